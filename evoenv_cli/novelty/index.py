"""The novelty index and its decisions: `NoveltyIndex` holds the kept environments (`Member`s)
with one MinHash LSH index per signature kind, so a candidate is compared with its LSH
candidates, never with every member; `decide` gives the verdict on one candidate against
everything kept before it (docs/admission.md, "Novelty and re-skins")."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from evoenv_cli.checks import solve_signature
from evoenv_cli.config import DedupeConfig
from evoenv_cli.novelty import views
from evoenv_cli.novelty.minhash import as_minhash, scaffold_for
from evoenv_cli.runtime.workers import SandboxWorkers

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


def lsh_weights(cfg: DedupeConfig) -> tuple[float, float]:
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
        self.decoded: dict[tuple, list[tuple[int, int]]] = {}  # a decoded view's key -> (row, view)
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
        return lsh_params(float(self.thresholds[kind]), self.cfg.num_perm, lsh_weights(self.cfg))

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
            for v, view in enumerate(views.decoded_views(solved)):
                for vkey in views.view_keys(view):
                    self.decoded.setdefault(vkey, []).append((row, v))
            solved._views = None  # kept as keys only: recomputed (linear) when compared
        for kind, values in (("code", code), ("behaviour", behaviour)):
            self.has[kind].append(values is not None)
            if values is not None:
                self.sigs[kind].put(row, values)
                if insert:
                    self.lsh[kind].insert(row, self._sketch(values), check_duplication=False)
        return row

    def values(self, kind: str, row: int) -> np.ndarray | None:
        return self.sigs[kind].values[row] if self.has[kind][row] else None

    def solves_like(
        self, pool: SandboxWorkers, sample: solve_signature.Sample | None
    ) -> tuple[int, float, str] | tuple[int, float, str, str] | None:
        """The first member (of at most `solve_members` with instances of the same shape) on
        whose instances `sample`'s solve agrees best, with the share and the signature that
        found it: "solve", or "solve_layout" when no member of the same shape agreed and one
        whose varying fields `sample`'s layout can hold (records zipped or unzipped, story
        fields around them) did, or "solve_decoded" (with the decoding) when neither did and
        one agrees on a decoded view of one side's instances (see `decoded_like`); None if
        none compared."""
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
                return best
        if best is not None and best[1] >= self.cfg.solve_match_share:
            return best
        decoded = self.decoded_like(pool, sample)
        if decoded is not None and (best is None or decoded[1] > best[1]):
            best = decoded
        return best

    def decoded_like(self, pool: SandboxWorkers, sample: solve_signature.Sample) -> tuple[int, float, str, str] | None:
        """Re-encodings: a kept member's solve on a decoded view of `sample`'s instances (the
        candidate re-encodes a kept task: its list delta-encoded, run-length encoded, two
        fields joined), then `sample`'s solve on a decoded view of a kept member's (the kept
        one re-encoded). Views are matched to solves by shape (the same bucket, or a layout
        the solve's columns can hold), and at most MAX_DECODED_TRIES pairs are compared, each
        screened on a few instances first. (row, share, "solve_decoded", how) of the best."""
        Sample = solve_signature.Sample
        tries: list[tuple[int, Sample, Sample, str]] = []  # (row, runner, view, how)
        for view in views.decoded_views(sample):
            keys = views.view_keys(view)
            rows = set(self.buckets.get(view.bucket, ()))
            if key := next((k for k in keys if k[0] == "layout"), None):
                rows |= set(self.layouts.get(key[1:], ()))
            tries += [
                (r, self.solved[r], view, f"the kept one's solve on {view.decoding} of its instances")
                for r in sorted(rows)
            ]
        wanted = views.runner_keys(sample)
        pairs = sorted({p for key in wanted for p in self.decoded.get(key, ())})
        for row, v in pairs:
            view = views.decoded_views(self.solved[row])[v]
            tries.append((row, sample, view, f"its solve on {view.decoding} of the kept one's instances"))
        best = None
        seen = set()
        for row, runner, view, how in tries:
            if (row, how) in seen:
                continue
            seen.add((row, how))
            if len(seen) > views.MAX_DECODED_TRIES:
                break
            share = views.view_agreement(pool, runner, view)
            if best is None or share > best[1]:
                best = (row, share, "solve_decoded", how)
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
    row, share, signature, *decoding = near_solve
    extra = {"signature": signature} | ({"decoding": decoding[0]} if decoding else {})
    m["nearest_solve"] = {**index.members[row].ref(share), **extra}
    if share < index.cfg.solve_match_share:
        return None
    kept = index.members[row]
    m["duplicate_of"] = {**kept.ref(share), **extra}
    if decoding:
        return Decision(
            "duplicate_behaviour",
            f"it re-encodes the task of {_where(kept)}: {decoding[0]} gives the other's answers on "
            f"{share:.0%} of them, and its score accepts them",
            m,
        )
    how = "recast into its layout" if signature == "solve" else "their varying fields moved into its layout"
    return Decision(
        "duplicate_behaviour",
        f"its solve gives the answers of {_where(kept)} on {share:.0%} of that one's own "
        f"instances ({how}), and its score accepts them: the same task in another story",
        m,
    )


def _where(member: Member) -> str:
    return f"{member.file} ({'pool' if member.pool else 'batch'} {member.library})"
