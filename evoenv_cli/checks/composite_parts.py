"""Composites probed per part, for `evoenv compose` (issue 42, rule 4). A composite at level d
runs part k at start_k + ceil(d / 2) - 1 (operators.py), so over the composite's levels 1..10 a
part started at 1 runs at levels 1..5 only, each twice as often as validate asked it there. A part
whose prompt gives its answer away at levels 1-3 alone (30% of validate's instances, under the
limits) gives it away on 60% of a composite's, and validate's checks on the composite see only the
composite's answer (part lines, labels) and its score, never the part's.

So every part a composite exposes is judged again by validate's own leak check (the written and
encoded forms, the prompt-only solvers and learners: `leak.check_leak`) and fuzz check
(`discrimination.check_fuzz`), with their limits, on instances made at exactly the levels the
composite runs it at (`operators.part_levels`), as many instances as validate judges a file on.
What each operator exposes:

| operator | part | checks | why |
|---|---|---|---|
| SEQUENTIAL | 1 | leak | its answer X read off its own prompt makes the composite part 2 alone; its score is never called |
| SEQUENTIAL | 2 | (the composite's own) | the composite's answer and score are part 2's, on part 2's own instances (made by generate_from), at exactly these levels: validate's judgement of the composite is this probe |
| PARALLEL | every part | leak, fuzz | each part's answer is asked for and paid by the part's own score |
| SORT, SELECT | the part | leak | the labels follow from the n answers read off the n prompts; the composite orders by solve and never calls the part's score |

A (part file, levels) pair is judged once per compose run (`PartProbes` caches the instances and
each check's verdict; composites judged at once wait for the first to finish), so the cost is per
part, not per composite.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from dataclasses import dataclass, field

from evoenv_cli.checks.context import Checker, Rejected
from evoenv_cli.config import ValidateConfig
from evoenv_cli.operators import Blueprint, Part, part_levels
from evoenv_cli.runtime.workers import SandboxWorkers

LEAK, FUZZ = "leak", "fuzz"


def probed(operator: str, k: int) -> tuple[str, ...]:
    """The checks part k (0-based) of a composite of `operator` gets (the module's table)."""
    if operator == "parallel":
        return (LEAK, FUZZ)
    if operator == "sequential":
        return (LEAK,) if k == 0 else ()
    return (LEAK,)  # sort, select: one part


@dataclass
class PartFinding:
    """A part that fails a check at the levels the composite runs it at."""

    part: int  # 1-based
    name: str
    levels: list[int]
    stage: str  # the rejecting check's verdict stage (leak, discrimination; run if a call failed)
    reason: str
    probe: str

    def verdict_reason(self) -> str:
        lv = _levels_text(self.levels)
        return (
            f"part {self.part} ({self.name}) at levels {lv}, the levels this composite runs it at "
            f"(its own judgement spread over 1-10): {self.reason}"
        )


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    checker: Checker | None = None
    failed: Rejected | None = None  # `run` on these levels failed: every check reports it
    results: dict[str, Rejected | None] = field(default_factory=dict)


class PartProbes:
    """One compose run's per-part judgements: each (part file, levels) pair gets its instances
    made once (validate's `run` check on those levels) and each check run once on them, however
    many composites use the part; thread-safe (compose judges a batch of composites at once)."""

    def __init__(self, cfg: ValidateConfig, workers: SandboxWorkers, fresh: SandboxWorkers):
        self.cfg, self.workers, self.fresh = cfg, workers, fresh
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, tuple[int, ...]], _Entry] = {}
        self.judged = 0  # (part, levels) pairs whose instances were made
        self.seconds = 0.0  # wall seconds spent judging them (summed over threads)

    def finding(self, plan: Blueprint) -> PartFinding | None:
        """The first part of `plan` (in order) that fails a check it gets at its levels."""
        for k, (part, levels) in enumerate(zip(plan.parts, part_levels(plan))):
            for check in probed(plan.operator, k):
                rej = self.verdict(part, levels, check)
                if rej is not None:
                    own = f" [probe {rej.probe}]"
                    reason = rej.reason[: -len(own)] if rej.probe and rej.reason.endswith(own) else rej.reason
                    probe = f"part_{k + 1}_{rej.probe or rej.stage}"
                    return PartFinding(k + 1, part.name, levels, rej.stage, reason, probe)
        return None

    def record(self, plan: Blueprint) -> list[dict]:
        """What the verdict says was probed: per part its levels and checks."""
        return [
            {"part": k + 1, "levels": levels, "checks": list(probed(plan.operator, k))}
            for k, levels in enumerate(part_levels(plan))
            if probed(plan.operator, k)
        ]

    def verdict(self, part: Part, levels: list[int], check: str) -> Rejected | None:
        """`check` (LEAK or FUZZ) on `part` at `levels`: the Rejected it raised, or None."""
        with self._lock:
            entry = self._entries.setdefault((part.env.env_id, tuple(levels)), _Entry())
        with entry.lock:
            if check not in entry.results:
                started = time.perf_counter()
                entry.results[check] = self._judge(entry, part, levels, check)
                with self._lock:
                    self.seconds += time.perf_counter() - started
            return entry.results[check]

    def manifest(self) -> dict:
        """What the run's manifest says of the probing: pairs judged and the seconds they took."""
        return {"pairs": self.judged, "seconds": round(self.seconds, 3)}

    def _judge(self, entry: _Entry, part: Part, levels: list[int], check: str) -> Rejected | None:
        # imported here: the check modules load the registry, which loads this module
        from evoenv_cli.checks.discrimination import check_fuzz
        from evoenv_cli.checks.leak import check_leak
        from evoenv_cli.checks.run import check_run

        if entry.checker is None:
            checker = entry.checker = Checker(part.env, at_levels(self.cfg, levels), self.workers, self.fresh)
            checker.name, checker.answer_type, checker.tags = part.name, part.answer_type, list(part.tags)
            checker.m["order_free"] = part.order_free
            self.judged += 1
            try:
                check_run(checker)
            except Rejected as rej:
                entry.failed = rej
        if entry.failed is not None:
            return entry.failed
        checker = entry.checker
        checker.deadline = time.monotonic() + self.cfg.max_judge_seconds  # each check its own budget
        checker.running = check
        try:
            (check_leak if check == LEAK else check_fuzz)(checker)
        except Rejected as rej:
            return rej
        return None


def at_levels(cfg: ValidateConfig, levels: list[int]) -> ValidateConfig:
    """validate's settings with its levels replaced by `levels`, and as many instances as it
    judges a file on (seeds per level scaled up: 6 a level over 1..5 against 3 over 1..10)."""
    total = cfg.seeds_per_level * len(cfg.levels)
    per_level = max(cfg.seeds_per_level, math.ceil(total / max(1, len(levels))))
    return dataclasses.replace(cfg, levels=list(levels), seeds_per_level=per_level, diversity_levels=[])


def _levels_text(levels: list[int]) -> str:
    if len(levels) > 1 and levels == list(range(levels[0], levels[-1] + 1)):
        return f"{levels[0]}-{levels[-1]}"
    return ", ".join(map(str, levels))
