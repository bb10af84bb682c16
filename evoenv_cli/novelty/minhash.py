"""MinHash signatures: shingles hashed to 32 bits, datasketch's permutations applied in numpy,
the code signature (normalized tokens, less the scaffold every environment shares) and the
behaviour signature (the words of sampled prompts). The scaffold shipped with evoenv is
`scaffold.txt` beside this module."""

from __future__ import annotations

import functools
import math
import re
import zlib
from pathlib import Path

import numpy as np

from evoenv_cli.config import DedupeConfig
from evoenv_cli.envfile import EnvFile
from evoenv_cli.novelty.tokens import code_tokens
from evoenv_cli.runtime.contract import MAX_SOURCE_BYTES, is_import_template

SIGNATURE_VERSION = 3  # bump when normalization changes (3: an import has no code signature): saved indexes rebuild
MINHASH_SEED = 1
MINHASH_SCHEME = "affine32"
SHIPPED_SCAFFOLD = Path(__file__).with_name("scaffold.txt")


# -- shingles ------------------------------------------------------------------------------------
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
    read further (the pool refuses it): None. So is a file that is exactly `evoenv import`'s
    template (`contract.is_import_template`): every import is that template with its task's
    name and levels filled in, so by code every import was a near-copy of every other
    (letter_counting of chain_sum at an estimated Jaccard of 0.91, 2026-12-06); its code is
    evoenv's, its task reasoning-gym's, and its prompts and solve signature compare it."""
    if len(source) > MAX_SOURCE_BYTES:
        return None
    if is_import_template(source.encode("utf-8", "replace") if isinstance(source, str) else source):
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
        f"(signature version {SIGNATURE_VERSION}); evoenv_cli.novelty.minhash."
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


# -- behaviour signature -------------------------------------------------------------------------
_WORD = re.compile(r"[^\W\d_]+|\d+")


def prompt_words(text: str) -> list[str]:
    """Lower-cased words; a number becomes its digit count (`#3`), so instances of one task at
    one difficulty read alike while the wording of the task stays."""
    return [w if not w[0].isdigit() else f"#{min(len(w), 9)}" for w in _WORD.findall(text.lower())]


def behaviour_signature(prompts: list[str], cfg: DedupeConfig) -> np.ndarray | None:
    """MinHash values of the word shingles of the prompts (no shingle spans two prompts)."""
    return minhash_values(shingle_hashes([prompt_words(p) for p in prompts], cfg.behaviour_shingle), cfg.num_perm)


def behaviour_pairs(cfg: DedupeConfig) -> list[tuple[int, int]]:
    """The (seed, level) pairs a behaviour signature's prompts are sampled at."""
    return [(seed, level) for level in cfg.behaviour_levels for seed in range(cfg.behaviour_seeds)]
