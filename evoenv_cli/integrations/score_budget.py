"""CPU budgets for the reward's score calls, measured from each environment's reference: a
completion that makes `score` run long (catastrophic regex backtracking, an allocation sized
by the answer) is stopped inside the worker at its budget and paid 0 alone, and its neighbours
are scored by the same worker, so one completion costs only itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from evoenv_cli.envfile import EnvFile
from evoenv_cli.runtime.workers import Call, SandboxWorkers

Fresh = Callable[[EnvFile], AbstractContextManager[SandboxWorkers]]

FACTOR = 20.0  # the budget, in times the reference's own score time
FLOOR_S = 0.001  # never less: a cold cache, a page fault, a collection of the garbage
FREE_CHARS = 256  # an answer up to this long (or the reference's length) gets the base budget
CALIBRATION_INSTANCES = 3  # the largest distinct instances of the first batch an environment meets
CALIBRATION_REPEATS = 4  # each reference scored this often in one batch; their mean counts


@dataclass(frozen=True)
class ScoreBudget:
    """An environment's budget: `base_s` for an answer up to `free_chars` long on an instance up
    to `instance_chars`, scaled linearly beyond both (a score may be linear in its inputs), never
    over `ceiling_s` (the score call's own limit)."""

    reference_s: float
    base_s: float
    free_chars: int
    instance_chars: int
    ceiling_s: float

    def for_call(self, instance_chars: int, answer: str) -> float:
        scale = max(1.0, len(answer) / self.free_chars) * max(1.0, instance_chars / max(1, self.instance_chars))
        return min(self.ceiling_s, self.base_s * scale)


class ScoreBudgets:
    """Each environment's `ScoreBudget`, measured on first use in a worker of its own (`fresh`,
    so that the reward's workers serve no call but the rewards'): `solve` on the largest distinct
    instances of the batch, then `score` of each reference, unbudgeted."""

    def __init__(self, fresh: Fresh, ceiling_s: float, factor: float = FACTOR, floor_s: float = FLOOR_S):
        self.fresh, self.ceiling_s, self.factor, self.floor_s = fresh, ceiling_s, factor, floor_s
        self.budgets: dict[str, ScoreBudget] = {}
        self.measure_calls = 0  # calls made to measure budgets

    def calls(self, env: EnvFile, items: list[tuple[dict, str]]) -> list[Call]:
        """One budgeted score call per (instance, answer)."""
        sizes = [len(json.dumps(inst)) for inst, _ in items]
        budget = self.budgets.get(env.env_id)
        if budget is None:
            budget = self.budgets[env.env_id] = self._measure(env, items, sizes)
        return [Call.score(inst, ans, budget.for_call(n, ans)) for (inst, ans), n in zip(items, sizes)]

    def _measure(self, env: EnvFile, items: list[tuple[dict, str]], sizes: list[int]) -> ScoreBudget:
        picked: dict[str, dict] = {}
        for k in sorted(range(len(items)), key=lambda k: -sizes[k]):
            picked.setdefault(json.dumps(items[k][0], sort_keys=True), items[k][0])
            if len(picked) == CALIBRATION_INSTANCES:
                break
        instances = list(picked.values())
        with self.fresh(env) as pool:
            refs = pool.run(env, [Call.solve(inst) for inst in instances])
            known = [(inst, r.value) for inst, r in zip(instances, refs) if r.ok]
            # each reference's scores timed as a whole (replies that arrive together share a time)
            runs = pool.run(env, [Call.score(inst, ref) for inst, ref in known for _ in range(CALIBRATION_REPEATS)])
        self.measure_calls += len(instances) + len(runs)
        times = []
        for k in range(len(known)):
            got = runs[k * CALIBRATION_REPEATS : (k + 1) * CALIBRATION_REPEATS]
            if all(r.ok for r in got):
                times.append(sum(r.seconds for r in got) / CALIBRATION_REPEATS)
        if not times:  # no reference could be scored: the call's own limit, as before
            return ScoreBudget(self.ceiling_s, self.ceiling_s, FREE_CHARS, 1, self.ceiling_s)
        reference_s = max(times)
        longest = max(len(ref) for _, ref in known)
        return ScoreBudget(
            reference_s,
            min(self.ceiling_s, max(self.floor_s, self.factor * reference_s)),
            max(FREE_CHARS, longest),
            max(sizes),
            self.ceiling_s,
        )
