"""`evoenv dedupe`: the novelty contract. Keeps the pool from collapsing into renamed copies of
one template by rejecting near-duplicates, found with MinHash + LSH over two signatures:

- code: the source as normalized tokens (comments, docstrings and layout dropped, string and
  number literals bucketed, identifiers renamed canonically by recency within each top-level
  statement), shingled k tokens at a time within each top-level statement, so a renamed,
  re-commented or reordered copy has the same shingle set and a lightly edited one nearly so;
- behaviour: the words of prompts sampled in the sandbox at fixed seeds and difficulties
  (numbers bucketed), shingled k words at a time, so the same task posed by other code is caught.

Code similarity alone rejects only when it is very high (`code_sure_threshold`): from
`code_threshold` up it must be corroborated by behaviour (the same member's prompts, or the
solve signature), because programs written in one template share scaffolding that can outweigh
what they compute.

Streaming and index-based: each environment queries the LSH indexes and, when kept, is inserted;
nothing compares all pairs. The pool (`--against`) goes in first, then the candidates in the
library's order, so of two colliding environments the earlier one is kept. A pool's index
(its signatures) can be saved beside it and reused next round: a JSON header and numpy arrays,
loaded with allow_pickle=False, so a forged index file can be wrong but never runs code.
"""

from __future__ import annotations

import base64
import builtins
import collections
import functools
import hashlib
import heapq
import io
import itertools
import json
import keyword
import math
import random
import re
import string
import zipfile
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evoenv_cli import artifacts
from evoenv_cli.admission import AdmissionLog, Summary, Verdict
from evoenv_cli.checks import solve_signature
from evoenv_cli.config import DedupeConfig, RuntimeConfig, check_values, to_dict
from evoenv_cli.envfile import EnvFile
from evoenv_cli.operators import REGISTRY
from evoenv_cli.runtime import contract
from evoenv_cli.runtime.contract import MAX_SOURCE_BYTES
from evoenv_cli.runtime.instances import Order, first_failure, make_instances
from evoenv_cli.runtime.session import Runtime, shared
from evoenv_cli.runtime.workers import SandboxPool
from evoenv_cli.stage import Context, Stage, register

STAGES = ("run", "duplicate_code", "duplicate_behaviour", "duplicate_structure")
SIGNATURE_VERSION = 2  # bump when normalization changes: saved indexes then rebuild
INDEX_FILE = "dedupe-index.bin"
SIGNATURE_CACHE = "dedupe-signatures.jsonl"
INDEX_MAGIC = b"evoenv-dedupe-index-v2\n"
MINHASH_SEED = 1
MINHASH_SCHEME = "affine32"
SHIPPED_SCAFFOLD = Path(__file__).with_name("dedupe_scaffold.txt")

# -- code signature ------------------------------------------------------------------------------
_TOKEN = re.compile(  # one token, after spaces: name, string, line start, operator, number, ...
    r"""[ \t]*+((?:[^\W\d]\w*+(?!['"]))"""
    r"""|(?:[rRbBuUfF]{1,2})?(?:'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'(?:\\.|[^'\\\n])*+'|"(?:\\.|[^"\\\n])*+")"""
    r"|\n[ \t]*+"
    r"|[-+*/%&|^@<>=!:]=|\*\*=?|//=?|->|<<=?|>>=?"
    r"|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?[jJ]?"
    r"|\#[^\n]*+"
    r"|\\\n"
    r"|\w+"
    r"|[^\w\s])"
)
_QUOTES = frozenset("'\"")
_NAME_START = frozenset(string.ascii_letters + "_")
_OPENS, _CLOSES = frozenset("([{"), frozenset(")]}")
CONTRACT_NAMES = contract.CONTRACT_NAMES | {"self", "cls"}


def _stable_names() -> tuple[frozenset[str], frozenset[str]]:
    """Bare names kept as they are (keywords, builtins, the contract's names, stdlib module
    names; a file's own imports are added per file) and attribute names kept after a dot (the
    public names of builtin types and stdlib modules and classes)."""
    modules = (random, math, re, collections, itertools, heapq, string, json, hashlib, zlib)
    bare = set(keyword.kwlist) | set(dir(builtins)) - {"_"} | CONTRACT_NAMES
    # the module names every environment file is written with; not the contract's whole
    # allow-list, whose rarer names (numbers, abc) are common variable names elsewhere
    bare |= {m.__name__ for m in modules} | {
        "functools",
        "bisect",
        "fractions",
        "decimal",
        "statistics",
        "dataclasses",
        "typing",
        "operator",
        "copy",
        "enum",
        "textwrap",
        "cmath",
        "array",
    }
    attrs: set[str] = set()
    for obj in (
        *modules,
        list,
        dict,
        set,
        frozenset,
        str,
        bytes,
        int,
        float,
        tuple,
        random.Random,
        collections.deque,
        collections.Counter,
        re.Pattern,
        re.Match,
        io.StringIO,
    ):
        attrs |= {n for n in dir(obj) if not n.startswith("__")}
    return frozenset(bare), frozenset(attrs)


STABLE_BARE, STABLE_ATTRS = _stable_names()
_IMPORT = re.compile(r"import[ \t]+\(?([^\n#)]*)")  # `import a, b`, `from m import (a, b` (a \b would be slow)


def _imported_names(text: str) -> set[str]:
    names = set()
    for m in _IMPORT.finditer(text):
        for part in m.group(1).split(","):
            words = part.split()
            if words:
                names.add(words[0].split(".")[0])  # `import a as b`: the alias b is renamed
    return names


RECENCY_CAP = 4  # identifiers remembered per statement when naming by recency


def code_tokens(source: str | bytes) -> list[list[str]]:
    """The source as normalized tokens, one list per top-level statement.

    Comments, docstrings (a statement that is only a string), parentheses, trailing commas and
    layout vanish; strings become `S` (adjacent ones merge), numbers `N`; indentation becomes
    `>`/`<`; logical lines are separated by `;`. Keywords, builtins, imported modules and the
    contract's names stay, and so do attribute names of builtin and stdlib types; every other
    identifier is named by recency: `v0` if it is the identifier used last, `v1` if one other
    came in between, ... `vn` when new or not among the last few (`RECENCY_CAP`). So renaming
    changes nothing, a reordered function keeps its statement, and an added line disturbs only
    the names around it (numbering by first appearance would renumber the rest of the function).
    """
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    stable = STABLE_BARE | _imported_names(text)
    attrs, cap, recents = STABLE_ATTRS, RECENCY_CAP, _RECENT
    name_start, opens, closes, quotes = _NAME_START, _OPENS, _CLOSES, _QUOTES
    chunks: list[list[str]] = []
    cur: list[str] = []
    recent: list[str] = []  # the last identifiers used, most recent last
    depth = 0
    indents = [0]
    line_indent = 0  # >= 0 at a logical line's start, until its first token; else -1
    prev = ""
    line_start = 0  # where the current logical line begins in `cur`
    for tok in _TOKEN.findall(text):
        c = tok[0]
        if c == "(":  # parentheses are dropped (optional ones are a matter of style); depth kept
            depth += 1
            continue
        if c == ")":
            if depth:
                depth -= 1
            if prev == ",":
                cur.pop()  # a trailing comma
                prev = ""
            continue
        if c == "\n":
            if not depth:
                line_indent = len(tok.expandtabs(8)) - 1 if "\t" in tok else len(tok) - 1
            continue
        if c == "#" or c == "\\":
            continue
        if line_indent >= 0:  # the first token of a logical line
            if len(cur) - line_start == 1 and cur[-1] == "S":
                cur.pop()  # the last line was only a string: a docstring or a bare literal
            if line_indent == 0:
                if cur:
                    chunks.append(cur)
                cur, recent, indents = [], [], [0]
            elif cur:
                if cur[-1] != ";" and cur[-1] != ">":  # (after a dropped docstring it is there)
                    cur.append(";")
                while line_indent < indents[-1]:
                    indents.pop()
                    cur.append("<")
                if line_indent > indents[-1]:
                    indents.append(line_indent)
                    cur.append(">")
            line_start = len(cur)
            line_indent = -1
        if c in name_start or c > "\x7f":
            if tok[-1] in quotes:
                if prev == "S":
                    continue
                norm = "S"  # a prefixed string: f"...", rb'...'
            elif tok in stable if prev != "." else tok in attrs:
                norm = tok
            elif tok in recent:
                k = len(recent) - 1 - recent.index(tok)
                norm = recents[k]
                if k:
                    recent.remove(tok)
                    recent.append(tok)
            else:
                norm = "vn"
                if len(recent) >= cap:
                    del recent[0]
                recent.append(tok)
        elif c in quotes:
            if prev == "S":
                continue  # implicit concatenation: adjacent strings are one
            norm = "S"
        elif c in opens:
            depth += 1
            norm = tok
        elif c in closes:
            if depth:
                depth -= 1
            if prev == ",":
                cur.pop()  # a trailing comma
            norm = tok
        elif c.isdigit() or (c == "." and len(tok) > 1):
            norm = "N"
        else:
            norm = tok
        cur.append(norm)
        prev = norm
    if len(cur) - line_start == 1 and cur and cur[-1] == "S":
        cur.pop()
    if cur:
        chunks.append(cur)
    return chunks


_RECENT = [f"v{k}" for k in range(RECENCY_CAP)]


class _Vocab(dict):
    """A stable 32-bit id per token (crc32, cached): no hash seed, the same in every process."""

    def __missing__(self, token: str) -> int:
        value = self[token] = zlib.crc32(token.encode("utf-8"))
        return value


_VOCAB = _Vocab()
_PAD = "\x00"
_MULT = np.uint64(0x9E3779B97F4A7C15)


def shingle_hashes(chunks: list[list[str]], k: int) -> np.ndarray:
    """Sorted distinct 32-bit hashes of the k-token shingles inside each chunk; a chunk shorter
    than k is padded to one shingle, and no shingle spans two chunks, so the set does not
    depend on the chunks' order."""
    chunks = [ch for ch in chunks if ch]
    if not chunks:
        return np.zeros(0, dtype=np.uint32)
    lens = [max(len(ch), k) for ch in chunks]
    seq: list[str] = []
    for ch, n in zip(chunks, lens):
        seq.extend(ch)
        if n > len(ch):
            seq.extend([_PAD] * (n - len(ch)))
    ids = np.fromiter(map(_VOCAB.__getitem__, seq), dtype=np.uint64, count=len(seq))
    cid = np.repeat(np.arange(len(chunks)), lens)
    n = len(ids) - k + 1
    h = ids[:n].copy()  # polynomial hash of the k ids, wrapping mod 2**64
    for j in range(1, k):
        h *= _MULT
        h += ids[j : j + n]
    h = h[cid[:n] == cid[k - 1 :]]
    h ^= h >> np.uint64(31)  # mix the high bits down before keeping 32
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(32)
    return np.unique(h.astype(np.uint32))


# -- MinHash -------------------------------------------------------------------------------------
_PERMUTATIONS: dict[int, np.ndarray] = {}
_FMIX32 = (np.uint32(16), np.uint32(0x85EBCA6B), np.uint32(13), np.uint32(0xC2B2AE35), np.uint32(16))


def permutations(num_perm: int) -> np.ndarray:
    """datasketch's permutation parameters (scheme affine32, seed 1), made once per num_perm."""
    perms = _PERMUTATIONS.get(num_perm)
    if perms is None:
        from datasketch import MinHash

        perms = _PERMUTATIONS[num_perm] = MinHash(num_perm, seed=MINHASH_SEED, scheme=MINHASH_SCHEME).permutations
    return perms


def minhash_values(hashes: np.ndarray, num_perm: int) -> np.ndarray | None:
    """The MinHash of a set of 32-bit hashes: what datasketch's `MinHash.update_batch` computes
    under scheme affine32 (murmur3 finalizer, then h -> a*h + b mod 2**32, then the minimum),
    in a few vectorized steps instead of a Python call per element (tests check they agree).
    None for the empty set, which has no signature."""
    if len(hashes) == 0:
        return None
    a, b = permutations(num_perm)
    s1, m1, s2, m2, s3 = _FMIX32
    hv = hashes.astype(np.uint32)  # a copy: updated in place below
    hv ^= hv >> s1
    hv *= m1
    hv ^= hv >> s2
    hv *= m2
    hv ^= hv >> s3
    out = np.full(num_perm, np.uint32(0xFFFFFFFF), dtype=np.uint32)
    b = b[:, None]
    for start in range(0, len(hv), 8192):  # bounded memory for a huge set
        phv = np.multiply.outer(a, hv[start : start + 8192])  # (num_perm, n): min along rows
        phv += b
        np.minimum(out, phv.min(axis=1), out=out)
    return out


def as_minhash(values: np.ndarray):
    from datasketch import MinHash

    return MinHash(seed=MINHASH_SEED, hashvalues=values, permutations=permutations(len(values)), scheme=MINHASH_SCHEME)


def code_shingles(source: str | bytes, cfg: DedupeConfig) -> np.ndarray:
    return shingle_hashes(code_tokens(source), cfg.code_shingle)


def code_signature(source: str | bytes, cfg: DedupeConfig, scaffold: np.ndarray | None = None) -> np.ndarray | None:
    """MinHash values of the source's normalized code shingles less the scaffold (the
    contract's boilerplate every environment shares: the parsing tail of `score`, the rng
    set-up of `generate`, ...), so two environments compare by their own code; None: no code
    at all. `scaffold` None is the one shipped with evoenv (see `scaffold_for`). A file made of
    nothing but scaffold keeps its whole set. A source over the contract's size limit is never
    read further (the pool refuses it): None."""
    if len(source) > MAX_SOURCE_BYTES:
        return None
    hashes = code_shingles(source, cfg)
    if scaffold is None:
        scaffold = shipped_scaffold() if cfg.discount_scaffold else np.zeros(0, dtype=np.uint32)
    if len(scaffold):
        own = np.setdiff1d(hashes, scaffold, assume_unique=True)
        if len(own):
            hashes = own
    return minhash_values(hashes, cfg.num_perm)


def scaffold_of(shingle_sets: list[np.ndarray], cfg: DedupeConfig) -> np.ndarray:
    """The shingles found in at least `scaffold_share` of `shingle_sets` (and in at least
    `scaffold_min_files` of them): what distinct environments share is the contract's
    scaffolding, not a task. Only a library of distinct environments (seeds, a deduped pool)
    is a fair background; in a batch, copies of one file would look like scaffold."""
    if not shingle_sets:
        return np.zeros(0, dtype=np.uint32)
    values, counts = np.unique(np.concatenate(shingle_sets), return_counts=True)
    need = max(cfg.scaffold_min_files, math.ceil(cfg.scaffold_share * len(shingle_sets)))
    return values[counts >= need].astype(np.uint32)


@functools.cache
def shipped_scaffold() -> np.ndarray:
    """The scaffold of the ten seeds, learned once (`write_shipped_scaffold`) and shipped with
    evoenv, so it is there whatever the pool holds (rotation may retire the seeds)."""
    lines = [x.strip() for x in SHIPPED_SCAFFOLD.read_text().splitlines()]
    return np.array(sorted(int(x, 16) for x in lines if x and not x.startswith("#")), dtype=np.uint32)


def write_shipped_scaffold(seeds: Path, cfg: DedupeConfig | None = None) -> int:
    """Learn the shipped scaffold from a folder of seed environments; returns its size."""
    cfg = cfg or DedupeConfig()
    sets = [code_shingles(p.read_bytes(), cfg) for p in sorted(Path(seeds).glob("*.py"))]
    values = scaffold_of(sets, cfg)
    SHIPPED_SCAFFOLD.write_text(
        f"# code shingles in >= {cfg.scaffold_min_files} of {len(sets)} seeds "
        f"(signature version {SIGNATURE_VERSION}); evoenv_cli.stages.dedupe."
        "write_shipped_scaffold('seeds') rewrites it\n" + "".join(f"{int(v):08x}\n" for v in values)
    )
    shipped_scaffold.cache_clear()
    return len(values)


def scaffold_for(pools: list[list[EnvFile]], cfg: DedupeConfig) -> np.ndarray:
    """A run's scaffold: the shipped one and what the pools' files share (a pool's own
    idioms, which the policy may have grown beyond the seeds')."""
    if not cfg.discount_scaffold:
        return np.zeros(0, dtype=np.uint32)
    sets = [code_shingles(e.source, cfg) for files in pools for e in files]
    return np.union1d(shipped_scaffold(), scaffold_of(sets, cfg)).astype(np.uint32)


def _digest(values: np.ndarray) -> str:
    return hashlib.sha256(values.astype("<u4").tobytes()).hexdigest()[:16]


_OPERATOR = re.compile(rb"""^OPERATOR\s*=\s*(['"])([a-z]+)\1""", re.M)


def composite_structure(env: EnvFile, record: dict) -> tuple | None:
    """(operator, parents) of a composite `evoenv compose` made, or None. A composite's code
    embeds its parents', so it is judged by what it is built from, not by its text; the
    lineage must come from compose's own index record and agree with the file's OPERATOR."""
    if not isinstance(record, dict) or record.get("origin") != "compose":
        return None
    op, parents = record.get("operator"), record.get("parents")
    if (
        op not in REGISTRY  # compose's operator records are the one list of operators
        or not isinstance(parents, list)
        or not parents
        or not all(isinstance(x, str) for x in parents)
    ):
        return None
    m = _OPERATOR.search(env.source)
    if m is None or m.group(2).decode() != op:
        return None
    return (op, *sorted(parents)) if REGISTRY[op].unordered_parts else (op, *parents)


_WORD = re.compile(r"[^\W\d_]+|\d+")


def prompt_words(text: str) -> list[str]:
    """Lower-cased words; a number becomes its digit count (`#3`), so instances of one task at
    one difficulty read alike while the wording of the task stays."""
    return [w if not w[0].isdigit() else f"#{min(len(w), 9)}" for w in _WORD.findall(text.lower())]


def behaviour_signature(prompts: list[str], cfg: DedupeConfig) -> np.ndarray | None:
    """MinHash values of the word shingles of the prompts (no shingle spans two prompts)."""
    return minhash_values(shingle_hashes([prompt_words(p) for p in prompts], cfg.behaviour_shingle), cfg.num_perm)


def behaviour_pairs(cfg: DedupeConfig) -> list[tuple[int, int]]:
    return [(seed, level) for level in cfg.behaviour_levels for seed in range(cfg.behaviour_seeds)]


@dataclass
class Sampled:
    """What the sandbox gave for one environment at the behaviour seeds: its prompts (None and
    `failure` when it could not), and with the solve signature on, its instances with its own
    answers (None when its solve failed on them)."""

    prompts: list[str] | None
    failure: str | None = None
    solved: solve_signature.Sample | None = None


def sample_behaviour(env: EnvFile, pool: SandboxPool, cfg: DedupeConfig) -> Sampled:
    [made] = make_instances(pool, [Order(env, behaviour_pairs(cfg), ask=("prompt",))], stop_on_failure=True)
    if why := first_failure(made):
        return Sampled(None, why)
    solved = None
    if cfg.solve_signature:
        solved = solve_signature.Sample(env, [m.instance for m in made])
        if not solve_signature.answers(pool, solved):
            solved = None
    return Sampled([m.task for m in made], None, solved)


def static_name(source: bytes) -> str | None:
    """The NAME a verdict cites for an environment, as the contract reads it."""
    return contract.declared(source).name


# -- the index -----------------------------------------------------------------------------------
KINDS = ("code", "behaviour")


@dataclass(frozen=True)
class Member:
    """An environment in the index: where it came from and whether it belongs to a pool."""

    file: str
    library: str
    env_id: str
    name: str | None
    pool: bool
    structure: tuple | None = None  # (operator, parents) of a composite

    def ref(self, jaccard: float) -> dict:
        return {
            "file": self.file,
            "library": self.library,
            "env_id": self.env_id,
            "name": self.name,
            "pool": self.pool,
            "jaccard": round(jaccard, 4),
        }


@functools.cache
def lsh_params(threshold: float, num_perm: int, weights: tuple[float, float]) -> tuple[int, int]:
    """(bands, rows) datasketch picks for this threshold and weighting (computed once)."""
    from datasketch import MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, weights=weights)
    return lsh.b, lsh.r


def _lsh_weights(cfg: DedupeConfig) -> tuple[float, float]:
    fp, fn = (float(w) for w in cfg.lsh_weights)
    return fp, fn


class _Signatures:
    """Rows of MinHash values in one growing matrix (gathered in one step to compare)."""

    def __init__(self, num_perm: int):
        self.values = np.zeros((64, num_perm), dtype=np.uint32)
        self.n = 0

    def put(self, row: int, values: np.ndarray) -> None:
        if row >= len(self.values):
            grown = np.zeros((max(row + 1, 2 * len(self.values)), self.values.shape[1]), dtype=np.uint32)
            grown[: self.n] = self.values[: self.n]
            self.values = grown
        self.values[row] = values
        self.n = max(self.n, row + 1)


class NoveltyIndex:
    """Members in the order they were kept, with one MinHash LSH index per signature kind.
    `nearest` queries an index (never all pairs); `add` inserts a kept environment."""

    def __init__(self, cfg: DedupeConfig, scaffold: np.ndarray | None = None):
        from datasketch import MinHashLSH

        self.cfg = cfg
        self.scaffold = scaffold if scaffold is not None else scaffold_for([], cfg)
        self.structures: dict[tuple, int] = {}  # a composite's (operator, parents) -> its row
        self.solved: dict[int, solve_signature.Sample] = {}  # row -> instances and answers
        self.buckets: dict[tuple, list[int]] = {}  # instance shape -> rows (solve signature)
        self.layouts: dict[tuple, list[int]] = {}  # informative column shapes -> rows (by layout)
        self.members: list[Member] = []
        self.has: dict[str, list[bool]] = {k: [] for k in KINDS}
        self.sigs = {k: _Signatures(cfg.num_perm) for k in KINDS}
        self.thresholds = {"code": cfg.code_threshold, "behaviour": cfg.behaviour_threshold}
        self.lsh = {k: MinHashLSH(num_perm=cfg.num_perm, params=self.params(k)) for k in KINDS}
        self._last: tuple | None = None  # (values, MinHash): a query is usually followed by its insert

    def _sketch(self, values: np.ndarray):
        """The datasketch MinHash of `values`, reused when the same array (never modified:
        signatures are not) is queried and then inserted."""
        last = self._last
        if last is not None and last[0] is values:
            return last[1]
        sketch = as_minhash(values)
        self._last = (values, sketch)
        return sketch

    def params(self, kind: str) -> tuple[int, int]:
        return lsh_params(float(self.thresholds[kind]), self.cfg.num_perm, _lsh_weights(self.cfg))

    def __len__(self) -> int:
        return len(self.members)

    def nearest(self, kind: str, values: np.ndarray | None) -> tuple[int, float] | None:
        """The most similar member among the LSH candidates (ties: the earliest), or None."""
        if values is None:
            return None
        rows = self.lsh[kind].query(self._sketch(values))
        if not rows:
            return None
        rows = np.array(sorted(rows))
        same = np.count_nonzero(self.sigs[kind].values[rows] == values, axis=1)
        best = int(np.argmax(same))  # first of the maxima: the earliest member
        return int(rows[best]), float(same[best]) / len(values)

    def add(
        self,
        member: Member,
        code: np.ndarray | None,
        behaviour: np.ndarray | None,
        insert: bool = True,
        solved: solve_signature.Sample | None = None,
    ) -> int:
        row = len(self.members)
        self.members.append(member)
        if member.structure is not None:
            self.structures.setdefault(member.structure, row)
        if solved is not None:
            self.solved[row] = solved
            self.buckets.setdefault(solved.bucket, []).append(row)
            key = solve_signature.layout_key(solved)
            if key is not None:
                self.layouts.setdefault(key, []).append(row)
        for kind, values in (("code", code), ("behaviour", behaviour)):
            self.has[kind].append(values is not None)
            if values is not None:
                self.sigs[kind].put(row, values)
                if insert:
                    self.lsh[kind].insert(row, self._sketch(values), check_duplication=False)
        return row

    def values(self, kind: str, row: int) -> np.ndarray | None:
        return self.sigs[kind].values[row] if self.has[kind][row] else None

    def solves_like(self, pool: SandboxPool, sample: solve_signature.Sample | None) -> tuple[int, float, str] | None:
        """The first member (of at most `solve_members` with instances of the same shape) on
        whose instances `sample`'s solve agrees best, with the share and the signature that
        found it: "solve", or "solve_layout" when no member of the same shape agreed and one
        whose varying fields `sample`'s layout can hold (records zipped or unzipped, story
        fields around them) did; None if none compared."""
        if sample is None:
            return None
        best = None
        same_shape = self.buckets.get(sample.bucket, [])[: self.cfg.solve_members]
        for row in same_shape:
            share = solve_signature.agreement(pool, sample, self.solved[row])
            if best is None or share > best[1]:
                best = (row, share, "solve")
            if share >= 1.0:
                return best
        if best is not None and best[1] >= self.cfg.solve_match_share:
            return best
        done = set(same_shape)
        rows = sorted(
            {r for key in solve_signature.sub_keys(sample) for r in self.layouts.get(key, ()) if r not in done}
        )
        for row in rows[: self.cfg.solve_members]:
            share = solve_signature.layout_agreement(pool, sample, self.solved[row])
            if best is None or share > best[1]:
                best = (row, share, "solve_layout")
            if share >= 1.0:
                break
        return best


@dataclass
class Decision:
    stage: str
    reason: str
    measurements: dict

    @property
    def admitted(self) -> bool:
        return self.stage == "admitted"


def decide(
    index: NoveltyIndex,
    code: np.ndarray | None,
    behaviour: np.ndarray | None,
    failure: str | None = None,
    structure: tuple | None = None,
    solves_like: Callable[[], tuple[int, float, str] | None] | None = None,
) -> Decision:
    """The verdict on one environment against everything kept before it: code first (no
    execution needed), then whether its prompts could be sampled, then behaviour. A composite
    is judged by its structure and its behaviour by execution instead: its code and prompts
    embed its parents', so they would match its parents and every composite built on them."""
    m: dict = {}
    if structure is not None:
        m["structure"] = {"operator": structure[0], "parents": list(structure[1:])}
        hit = index.structures.get(structure)
        if hit is not None:
            kept = index.members[hit]
            m["duplicate_of"] = kept.ref(1.0)
            return Decision("duplicate_structure", f"it repeats the operator and parents of {_where(kept)}", m)
        if failure is not None:
            return Decision("run", f"its prompts could not be sampled: {failure}", m)
        same = _solves_the_same(index, solves_like, m)
        if same is not None:
            return same
        return Decision("admitted", "a composite whose operator and parents no other has", m)
    cfg = index.cfg
    near_code = index.nearest("code", code)
    m["nearest_code"] = index.members[near_code[0]].ref(near_code[1]) if near_code else None
    if near_code and near_code[1] >= sure_code_threshold(cfg):
        return _code_duplicate(index, near_code, m, f">= {sure_code_threshold(cfg)}")
    if failure is not None:
        return Decision("run", f"its prompts could not be sampled: {failure}", m)
    corroborated = _corroborated_code(index, near_code, behaviour, m)
    if corroborated is not None:
        return corroborated
    near_beh = index.nearest("behaviour", behaviour)
    m["nearest_behaviour"] = index.members[near_beh[0]].ref(near_beh[1]) if near_beh else None
    if near_beh and near_beh[1] >= index.cfg.behaviour_threshold:
        kept = index.members[near_beh[0]]
        m["duplicate_of"] = kept.ref(near_beh[1])
        return Decision(
            "duplicate_behaviour",
            f"its prompts pose the task of {_where(kept)}: "
            f"estimated Jaccard {near_beh[1]:.2f} >= {index.cfg.behaviour_threshold}",
            m,
        )
    same = _solves_the_same(index, solves_like, m)
    if same is not None:
        return same
    if near_code and near_code[1] >= cfg.code_threshold:
        return Decision(
            "admitted",
            f"its code resembles {_where(index.members[near_code[0]])} (estimated Jaccard "
            f"{near_code[1]:.2f}), but its behaviour does not: shared scaffolding, another task",
            m,
        )
    return Decision("admitted", "no near-duplicate in the pool or earlier in the batch", m)


def sure_code_threshold(cfg: DedupeConfig) -> float:
    """The code similarity that rejects on its own (never below `code_threshold`, which a
    `--threshold` flag may raise above it)."""
    return max(cfg.code_sure_threshold, cfg.code_threshold)


def _corroborated_code(
    index: NoveltyIndex, near_code: tuple[int, float] | None, behaviour: np.ndarray | None, m: dict
) -> Decision | None:
    """duplicate_code when the code is over `code_threshold` and the same member's prompts
    corroborate it (estimated Jaccard >= `code_corroboration`); None otherwise. Code alone in
    that band is shared scaffolding as often as a copy: two unrelated computations written in
    one template reach it, and a renamed copy poses the very same prompts. A copy that also
    re-words its prompts is left to the solve signature, which runs next."""
    cfg = index.cfg
    if not near_code or near_code[1] < cfg.code_threshold:
        return None
    theirs = index.values("behaviour", near_code[0])
    prompts = (
        None if theirs is None or behaviour is None else float(np.count_nonzero(theirs == behaviour)) / len(theirs)
    )
    m["code_corroboration"] = None if prompts is None else round(prompts, 4)
    if prompts is None or prompts < cfg.code_corroboration:
        return None
    return _code_duplicate(
        index,
        near_code,
        m,
        f">= {cfg.code_threshold}, and their prompts agree ({prompts:.2f} >= {cfg.code_corroboration})",
    )


def _code_duplicate(index: NoveltyIndex, near_code: tuple[int, float], m: dict, why: str) -> Decision:
    kept = index.members[near_code[0]]
    m["duplicate_of"] = kept.ref(near_code[1])
    return Decision(
        "duplicate_code",
        f"its code is a near-duplicate of {_where(kept)}: estimated Jaccard {near_code[1]:.2f} {why}",
        m,
    )


def _solves_the_same(
    index: NoveltyIndex, solves_like: Callable[[], tuple[int, float, str] | None] | None, m: dict
) -> Decision | None:
    """duplicate_behaviour when the environment's solve gives a kept one's answers on that
    one's own instances (recast) and its score accepts them; None otherwise."""
    near_solve = solves_like() if solves_like is not None else None
    if near_solve is None:
        return None
    row, share, signature = near_solve
    m["nearest_solve"] = {**index.members[row].ref(share), "signature": signature}
    if share < index.cfg.solve_match_share:
        return None
    kept = index.members[row]
    m["duplicate_of"] = {**kept.ref(share), "signature": signature}
    how = "recast into its layout" if signature == "solve" else "their varying fields moved into its layout"
    return Decision(
        "duplicate_behaviour",
        f"its solve gives the answers of {_where(kept)} on {share:.0%} of that one's own "
        f"instances ({how}), and its score accepts them: the same task in another story",
        m,
    )


def _where(member: Member) -> str:
    return f"{member.file} ({'pool' if member.pool else 'batch'} {member.library})"


# -- saved indexes -------------------------------------------------------------------------------
_VOCABULARY_DIGEST = hashlib.sha256("\n".join(sorted(STABLE_BARE) + ["."] + sorted(STABLE_ATTRS)).encode()).hexdigest()


def _signature_settings(cfg: DedupeConfig) -> dict:
    """Everything a signature depends on besides the file itself (the stable names come from
    the running Python's builtins and stdlib, so they are in it too)."""
    return {
        "signature_version": SIGNATURE_VERSION,
        "minhash": [MINHASH_SCHEME, MINHASH_SEED],
        "stable_names": _VOCABULARY_DIGEST,
        "num_perm": cfg.num_perm,
        "code_shingle": cfg.code_shingle,
        "behaviour_shingle": cfg.behaviour_shingle,
        "behaviour_pairs": behaviour_pairs(cfg),
    }


def settings_key(cfg: DedupeConfig) -> str:
    return hashlib.sha256(json.dumps(_signature_settings(cfg)).encode()).hexdigest()[:16]


def index_keys(files: list[EnvFile], cfg: DedupeConfig, scaffold: np.ndarray) -> tuple[str, str]:
    """(signatures key, LSH key): the pool's files (names and env_ids, in order) with the
    settings that shape the signatures (the scaffold taken out of the code included); then
    also those that shape the LSH tables."""
    sig = hashlib.sha256(
        json.dumps(
            {
                **_signature_settings(cfg),
                "scaffold": _digest(scaffold),
                "files": [[e.path.name, e.env_id] for e in files],
            }
        ).encode()
    ).hexdigest()
    lsh = hashlib.sha256(
        json.dumps(
            {
                "signatures": sig,
                "thresholds": [cfg.code_threshold, cfg.behaviour_threshold],
                "weights": list(_lsh_weights(cfg)),
                "datasketch": _datasketch_version(),
            }
        ).encode()
    ).hexdigest()
    return sig, lsh


def _datasketch_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("datasketch")
    except metadata.PackageNotFoundError:
        return "?"


def save_index(path: Path, files: list[EnvFile], index: NoveltyIndex, rows: list[int]) -> None:
    """Write the signatures of `rows`, which are `files` in order, to `path`: a magic line, a
    JSON header (keys, members, payload size and sha256), then an .npz of plain uint32/bool
    arrays. The LSH tables are not saved: they are rebuilt from the signatures on load. The
    code signatures are made again with the scaffold these files give as a pool, the one a
    later `--against` of them computes."""
    cfg = index.cfg
    scaffold = scaffold_for([files], cfg)
    code = np.zeros((len(rows), cfg.num_perm), dtype="<u4")
    behaviour = np.zeros((len(rows), cfg.num_perm), dtype="<u4")
    has = {k: np.zeros(len(rows), dtype=bool) for k in KINDS}
    for i, (env, row) in enumerate(zip(files, rows)):
        for kind, matrix in (("code", code), ("behaviour", behaviour)):
            values = code_signature(env.source, cfg, scaffold) if kind == "code" else index.values(kind, row)
            if values is not None:
                matrix[i] = values
                has[kind][i] = True
    buffer = io.BytesIO()
    np.savez(buffer, code=code, behaviour=behaviour, has_code=has["code"], has_behaviour=has["behaviour"])
    payload = buffer.getvalue()
    members = [[e.path.name, e.env_id, index.members[row].name] for e, row in zip(files, rows)]
    sig_key, lsh_key = index_keys(files, cfg, scaffold)
    header = {
        "version": 2,
        "signature_key": sig_key,
        "lsh_key": lsh_key,
        "files": len(files),
        "members": members,
        "num_perm": cfg.num_perm,
        "payload_bytes": len(payload),
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
    }
    with artifacts.atomic_file(path, "wb") as f:  # fsynced: a kill leaves the old index or the new
        f.write(INDEX_MAGIC + json.dumps(header).encode() + b"\n")
        f.write(payload)


@dataclass
class SavedIndex:
    members: list[tuple[str, str, str | None]]
    code: np.ndarray
    behaviour: np.ndarray
    has_code: np.ndarray
    has_behaviour: np.ndarray
    same_lsh: bool  # the LSH settings are those it was saved with (else "rebuilt" is reported)


MAX_INDEX_HEADER_BYTES = 64 << 20


def _arrays(payload: bytes, n: int, num_perm: int) -> dict[str, np.ndarray]:
    """The payload's four arrays, of exactly the expected shapes and types; ValueError if not."""
    with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
        want = {
            "code": ((n, num_perm), np.uint32),
            "behaviour": ((n, num_perm), np.uint32),
            "has_code": ((n,), np.bool_),
            "has_behaviour": ((n,), np.bool_),
        }
        if set(npz.files) != set(want):
            raise ValueError("unexpected arrays")
        out = {}
        for key, (shape, dtype) in want.items():
            array = npz[key]
            if array.shape != shape or array.dtype != dtype:
                raise ValueError(f"{key} has shape {array.shape} and type {array.dtype}")
            out[key] = array
    return out


def load_index(
    path: Path, files: list[EnvFile], cfg: DedupeConfig, scaffold: np.ndarray
) -> tuple[SavedIndex | None, str]:
    """A pool's saved index when it matches the pool's files and the settings, else (None, why).
    The header is checked, and the payload's size and sha256; the arrays are read with
    allow_pickle=False and must have the expected shapes: nothing in the file is executed."""
    if not path.is_file():
        return None, "no saved index"
    sig_key, lsh_key = index_keys(files, cfg, scaffold)
    try:
        with path.open("rb") as f:
            if f.read(len(INDEX_MAGIC)) != INDEX_MAGIC:
                return None, "saved index unreadable (not an evoenv dedupe index)"
            header = json.loads(f.readline(MAX_INDEX_HEADER_BYTES))
            if not isinstance(header, dict) or header.get("version") != 2:
                return None, "saved index unreadable (unknown version)"
            if header.get("signature_key") != sig_key:
                return None, "saved index stale (the pool's files or the signature settings changed)"
            size = header.get("payload_bytes")
            if type(size) is not int or size < 0:
                return None, "saved index unreadable (bad header)"
            payload = f.read(size + 1)
        if len(payload) != size or hashlib.sha256(payload).hexdigest() != header.get("payload_sha256"):
            return None, "saved index unreadable (payload size or checksum mismatch)"
        members = header.get("members")
        if not isinstance(members, list) or not all(
            isinstance(m, list)
            and len(m) == 3
            and all(isinstance(x, str) for x in m[:2])
            and (m[2] is None or isinstance(m[2], str))
            for m in members
        ):
            return None, "saved index unreadable (bad members)"
        arrays = _arrays(payload, len(members), cfg.num_perm)
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
        return None, f"saved index unreadable ({type(exc).__name__})"
    saved = SavedIndex(
        [tuple(m) for m in members],
        arrays["code"].astype(np.uint32),
        arrays["behaviour"].astype(np.uint32),
        arrays["has_code"],
        arrays["has_behaviour"],
        header.get("lsh_key") == lsh_key,
    )
    if [tuple(m[:2]) for m in saved.members] != [(e.path.name, e.env_id) for e in files]:
        return None, "saved index stale (its members differ from the pool's files)"
    return saved, "loaded" if saved.same_lsh else "loaded signatures; LSH tables rebuilt (thresholds changed)"


# -- the stage -------------------------------------------------------------------------------------
def check_config(cfg: DedupeConfig) -> None:
    """Settings that cannot work are an InputError (exit 2), before anything runs: the field
    rules of config.DedupeConfig, the one mechanism recipes and flags are checked by."""
    check_values(cfg, "dedupe")


def _sample_many(envs: list[EnvFile], pools: Runtime, cfg: DedupeConfig) -> dict[str, Sampled]:
    """{file name: Sampled} for `envs`, sampled in parallel on the pool's workers (the Runtime
    starts its pool only when some prompts must actually be sampled)."""
    if not envs:
        return {}
    pool = pools.pool
    with ThreadPoolExecutor(max_workers=pools.cfg.workers) as ex:
        results = list(ex.map(lambda e: sample_behaviour(e, pool, cfg), envs))
    return {e.path.name: r for e, r in zip(envs, results)}


def _chunks(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def add_pool(index: NoveltyIndex, lib: artifacts.EnvLibrary, label: str, pools: Runtime) -> dict:
    """Put a pool's environments in the index (not judged), from its saved index when valid."""
    cfg = index.cfg
    saved, status = load_index(lib.root / INDEX_FILE, lib.files, cfg, index.scaffold)
    unsampled = 0
    if saved is not None:
        by_id = {e.env_id: e for e in lib.files}
        structures = {e.env_id: composite_structure(e, lib.index.get(e.env_id, {})) for e in lib.files}
        solved = _saved_solves(lib, pools, cfg)
        for i, (file, env_id, name) in enumerate(saved.members):
            index.add(
                Member(file, label, env_id, name, True, structures.get(env_id)),
                saved.code[i] if saved.has_code[i] else None,
                saved.behaviour[i] if saved.has_behaviour[i] else None,
                solved=solved.get(by_id[env_id].path.name),
            )
            unsampled += not saved.has_behaviour[i]
    else:
        status = f"built ({status})"
        for chunk in _chunks(lib.files, 8 * pools.cfg.workers):
            sampled = _sample_many(chunk, pools, cfg)
            for env in chunk:
                got = sampled[env.path.name]
                unsampled += got.prompts is None
                index.add(
                    Member(
                        env.path.name,
                        label,
                        env.env_id,
                        static_name(env.source),
                        True,
                        composite_structure(env, lib.index.get(env.env_id, {})),
                    ),
                    code_signature(env.source, cfg, index.scaffold),
                    behaviour_signature(got.prompts, cfg) if got.prompts is not None else None,
                    solved=got.solved,
                )
    return {"library": label, "files": len(lib.files), "index": status, "behaviour_unsampled": unsampled}


def _solve_record(sample: solve_signature.Sample | None) -> dict | None:
    return None if sample is None else {"instances": sample.instances, "answers": sample.answers}


def _solve_sample(env: EnvFile, record) -> solve_signature.Sample | None:
    """A cached solve sample, when it is well formed."""
    if not isinstance(record, dict):
        return None
    instances, answers = record.get("instances"), record.get("answers")
    if (
        not isinstance(instances, list)
        or not instances
        or not all(isinstance(i, dict) for i in instances)
        or not isinstance(answers, list)
        or len(answers) != len(instances)
        or not all(isinstance(a, str) for a in answers)
    ):
        return None
    return solve_signature.Sample(env, instances, answers)


def _saved_solves(lib: artifacts.EnvLibrary, pools: Runtime, cfg: DedupeConfig) -> dict[str, solve_signature.Sample]:
    """{file: solve sample} of a pool whose saved index was loaded: from the signature cache
    the run that saved it kept beside it, and sampled for the files it lacks."""
    if not cfg.solve_signature:
        return {}
    key = settings_key(cfg)
    cached = {
        r.get("env_id"): r.get("solve")
        for r in artifacts.read_jsonl_tolerant(lib.root / SIGNATURE_CACHE)
        if isinstance(r, dict) and r.get("settings") == key
    }
    out = {e.path.name: s for e in lib.files if (s := _solve_sample(e, cached.get(e.env_id))) is not None}
    missing = [e for e in lib.files if e.path.name not in out]
    for name, got in _sample_many(missing, pools, cfg).items():
        if got.solved is not None:
            out[name] = got.solved
    return out


def _encode(values: np.ndarray | None) -> str | None:
    return None if values is None else base64.b64encode(values.astype("<u4").tobytes()).decode()


def _decode(text: str | None, num_perm: int) -> np.ndarray | None:
    if not isinstance(text, str):
        return None
    values = np.frombuffer(base64.b64decode(text), dtype="<u4").astype(np.uint32)
    return values if len(values) == num_perm else None


def run(
    library: artifacts.EnvLibrary,
    cfg: DedupeConfig,
    runtime: RuntimeConfig,
    out: Path,
    against: list[artifacts.EnvLibrary] = (),
    on_verdict: Callable[[Verdict], None] | None = None,
    note: Callable[[str], None] | None = None,
    session: Runtime | None = None,
) -> Summary:
    """Judge every file of `library` into `out` (already prepared) against the pools and the
    earlier files of the batch, resuming what is final."""
    index = NoveltyIndex(cfg, scaffold_for([lib.files for lib in against], cfg))
    reports = []
    with AdmissionLog(out, library.files) as log, shared(runtime, session) as pools:
        for lib in against:
            report = add_pool(index, lib, str(lib.root), pools)
            reports.append(report)
            if note:
                note(
                    f"dedupe: compared against {report['library']} ({report['files']} environments; "
                    f"their signatures: {report['index']})"
                )
        # behaviour signatures of the kept ones, so that a resumed run puts them back in the
        # index without sampling them again (only records made with the same settings count)
        cache_path = out / SIGNATURE_CACHE
        key = settings_key(cfg)
        cached = {r.get("env_id"): r for r in artifacts.read_jsonl_tolerant(cache_path) if r.get("settings") == key}
        label = str(library.root)
        rows: dict[str, int] = {}  # file -> row of the batch's kept environments
        with artifacts.JsonlAppender(cache_path) as cache:
            for chunk in _chunks(library.files, 8 * runtime.workers):
                codes = {e.path.name: code_signature(e.source, cfg, index.scaffold) for e in chunk}
                shapes = {e.path.name: composite_structure(e, library.index.get(e.env_id, {})) for e in chunk}
                need = []
                for env in chunk:
                    done = log.done.get(env.path.name)
                    if done is not None:
                        hit = cached.get(env.env_id)
                        if done["admitted"] and (hit is None or (cfg.solve_signature and "solve" not in hit)):
                            need.append(env)
                        continue
                    shape = shapes[env.path.name]
                    if shape is not None:  # a repeated structure needs no run
                        if shape not in index.structures:
                            need.append(env)
                        continue
                    near = index.nearest("code", codes[env.path.name])
                    if not (near and near[1] >= sure_code_threshold(cfg)):  # a sure duplicate needs no run
                        need.append(env)
                sampled = _sample_many(need, pools, cfg)
                for env in chunk:
                    file = env.path.name
                    got = sampled.get(file, Sampled(None))
                    member = Member(file, label, env.env_id, static_name(env.source), False, shapes[file])
                    done = log.done.get(file)
                    if done is not None:
                        if done["admitted"]:
                            hit = cached.get(env.env_id)
                            beh = (
                                _decode(hit.get("behaviour"), cfg.num_perm)
                                if hit is not None and got.prompts is None
                                else (behaviour_signature(got.prompts, cfg) if got.prompts is not None else None)
                            )
                            solved = got.solved or (_solve_sample(env, hit.get("solve")) if hit is not None else None)
                            rows[file] = index.add(member, codes[file], beh, solved=solved)
                        continue
                    beh = behaviour_signature(got.prompts, cfg) if got.prompts is not None else None
                    decision = decide(
                        index,
                        codes[file],
                        beh,
                        got.failure,
                        shapes[file],
                        lambda got=got: index.solves_like(pools.pool, got.solved),
                    )
                    if decision.admitted:
                        record = {"env_id": env.env_id, "settings": key, "behaviour": _encode(beh)}
                        if cfg.solve_signature:
                            record["solve"] = _solve_record(got.solved)
                        cache.append(record)
                        rows[file] = index.add(member, codes[file], beh, solved=got.solved)
                    verdict = Verdict(
                        file,
                        env.env_id,
                        member.name,
                        decision.admitted,
                        decision.stage,
                        decision.reason,
                        decision.measurements,
                    )
                    log.add(verdict)
                    if on_verdict:
                        on_verdict(verdict)
        saved_to = None
        if cfg.save_index:  # the admitted files, in the order the output library will list them
            files = [e for e in library.files if e.path.name in rows]
            saved_to = out / INDEX_FILE
            save_index(saved_to, files, index, [rows[e.path.name] for e in files])
            if note:
                note(f"index of the {len(files)} admitted environments saved to {saved_to}")
        summary = log.finish(
            "dedupe",
            STAGES,
            library,
            {"dedupe": to_dict(cfg), "runtime": to_dict(runtime)},
            manifest_extra={
                "against": reports,
                "lsh_bands_rows": {k: list(index.params(k)) for k in KINDS},
                "index_saved": str(saved_to) if saved_to else None,
            },
        )
        return summary


# -- the stage's record (evoenv_cli/stage.py) ------------------------------------------------------
def _run(ctx: Context, lib, out: Path, llm, bar) -> Summary:
    r = ctx.recipe
    pools = [artifacts.EnvLibrary.open(p, allow_empty=True) for p in ctx.inputs.get("against", [])]
    return run(lib, r.dedupe, r.runtime, out, pools, on_verdict=bar.advance, note=ctx.note, session=ctx.session)


STAGE = register(
    Stage(
        "dedupe",
        sections=("dedupe", "runtime.limits"),
        marker="summary.json",
        settings=lambda ctx: dict(
            dedupe=ctx.recipe.dedupe, limits=ctx.recipe.runtime.limits, against=list(ctx.inputs.get("against", []))
        ),
        run=_run,
        place=5,  # before calibrate: the cheap contract first, so no solver call is spent on a copy
        funnel="were new",
        check=lambda ctx, lib: check_config(ctx.recipe.dedupe),
    )
)
