"""Leaks that only composition makes, for `evoenv compose`: a PARALLEL part can state another
part's answer (their seeds are public functions of the composite's); a SEQUENTIAL composite hides part
1's answer X in part 2's prompt (the value written as is becomes "X"), but part 2's words may
still give X away in another form (with thousands separators, as a neighbour, spelled out),
and then the composite is part 2 alone. validate's checks see only the composite's final
answer; this check knows the parts, so it asks part 1 for X on the composite's own instances
and runs the prompt-only solvers (stages/leak_solvers.py) against X, chance rate and all.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from evoenv_cli.checks import leak_solvers
from evoenv_cli.config import ValidateConfig
from evoenv_cli.envfile import EnvFile
from evoenv_cli.operators import Plan
from evoenv_cli.runtime.instances import Order, make_instances
from evoenv_cli.runtime.workers import Call, SandboxPool

INSTANCES = 12


@dataclass
class PartLeak:
    solver: str
    share: float
    baseline: float
    part: int = 1  # which part's answer the prompt gives away (1-based)
    probe: str = ""


def part_one_leak(plan: Plan, env: EnvFile, pool: SandboxPool, cfg: ValidateConfig) -> PartLeak | None:
    """The first prompt-only solver that reads a part's answer out of the composite's prompt
    more often than max_leak_share and by min_leak_excess over its chance rate: part 1's X in a
    SEQUENTIAL composite, or any part's answer in a PARALLEL one (its seed is the composite's
    seed plus its index, so another part can compute it and state it in its own prompt)."""
    if plan.operator == "sequential":
        parts = [(0, "leak_part_one_", lambda inst: inst["a"])]
    elif plan.operator == "parallel":
        parts = [
            (k, f"leak_parallel_part_{k + 1}_", lambda inst, k=k: inst["parts"][k]) for k in range(len(plan.parts))
        ]
    else:
        return None
    rng = random.Random(f"evoenv-part-leak:{env.env_id}")
    pairs = [(rng.randrange(2**31), 1 + k % 10) for k in range(INSTANCES)]
    (made,) = make_instances(pool, [Order(env, pairs, ask=("prompt",))])
    made = [m for m in made if m.instance is not None and m.task is not None]
    for k, probe, part_of in parts:
        part = plan.parts[k]
        results = pool.run(part.env, [Call.solve(part_of(m.instance)) for m in made])
        kept = [(m.task, r.value) for m, r in zip(made, results) if r.ok]
        if len(kept) < 2:
            continue
        prompts = [p for p, _ in kept]
        refs = [" ".join(sorted(x.split(), key=_number_first)) if part.order_free else x for _, x in kept]
        for r in leak_solvers.rates(prompts, refs):
            if r.share > cfg.max_leak_share and r.share - r.baseline > cfg.min_leak_excess:
                return PartLeak(r.name, r.share, r.baseline, k + 1, probe + r.name)
    return None


def _number_first(token: str) -> tuple:
    """The order the composite writes an order-free X in: increasing, numbers by value."""
    try:
        return (0, float(token), token)
    except ValueError:
        return (1, 0.0, token)
