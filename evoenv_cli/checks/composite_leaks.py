"""Leaks that only composition makes, for `evoenv compose`: a PARALLEL part can state another
part's answer (their seeds are public functions of the composite's); a SEQUENTIAL composite hides part
1's answer X in part 2's prompt (the value written as is becomes "X"), but part 2's words may
still give X away in another form (with thousands separators, as a neighbour, spelled out, or
as written where the mask does not reach: "X ... (lot 123.)"), and then the composite is part 2
alone. validate's checks see only the composite's final
answer; this check knows the parts, so it asks part 1 for X on the composite's own instances
and runs the prompt-only solvers (checks/leak_solvers.py) against X, chance rate and all; for a
PARALLEL part, against what the other parts wrote.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from evoenv_cli.checks import leak_solvers
from evoenv_cli.config import ValidateConfig
from evoenv_cli.envfile import EnvFile
from evoenv_cli.operators import Blueprint
from evoenv_cli.runtime.instances import Order, ask_instances, make_instances
from evoenv_cli.runtime.workers import SandboxWorkers

INSTANCES = 12
CONFIRM_INSTANCES = 60  # a solver over the limits on the first INSTANCES is measured on these


@dataclass
class PartLeak:
    solver: str
    share: float
    baseline: float
    part: int = 1  # which part's answer the prompt gives away (1-based)
    probe: str = ""


def part_one_leak(plan: Blueprint, env: EnvFile, pool: SandboxWorkers, cfg: ValidateConfig) -> PartLeak | None:
    """The first prompt-only solver that reads a part's answer out of what the composite adds
    to it, more often than max_leak_share and by min_leak_excess over its chance rate: part 1's
    X in a SEQUENTIAL composite's prompt, or part k's answer in the *other* parts' text of a
    PARALLEL one (its seed is the composite's seed plus its index, so another part can compute
    it and state it in its own prompt). Part k's own section is left out of what the solvers
    read: a part whose own prompt a solver can compute (chain_sum's sum, written to be computed)
    was judged on its own by validate, and composing it leaks nothing new. A solver over the
    limits on the first INSTANCES is measured again on CONFIRM_INSTANCES and kept only if it is
    over them there too, so a verdict does not hang on which twelve instances the hash drew."""
    if plan.operator not in ("sequential", "parallel"):
        return None
    rng = random.Random(f"evoenv-part-leak:{env.env_id}")
    pairs = [(rng.randrange(2**31), 1 + k % 10) for k in range(CONFIRM_INSTANCES)]
    limits = (cfg.max_leak_share, cfg.min_leak_excess)
    made = _made(env, pairs[:INSTANCES], pool)
    more: list | None = None
    for k in range(1 if plan.operator == "sequential" else len(plan.parts)):
        texts, refs = _part_reads(plan, k, made, pool)
        over = [r.name for r in _rates(texts, refs) if r.over(*limits)] if len(texts) >= 2 else []
        if not over:
            continue
        if more is None:  # confirmed on more instances, made once for every part
            more = _made(env, pairs[INSTANCES:], pool)
        extra_texts, extra_refs = _part_reads(plan, k, more, pool)
        probe = "leak_part_one_" if plan.operator == "sequential" else f"leak_parallel_part_{k + 1}_"
        for r in _rates(texts + extra_texts, refs + extra_refs):
            if r.name in over and r.over(*limits):
                return PartLeak(r.name, r.share, r.baseline, k + 1, probe + r.name)
    return None


def _rates(texts: list[str], refs: list[str]) -> list[leak_solvers.SolverRate]:
    """The solvers' rates with the composite's own, a number stated as written (`as_written`)."""
    return leak_solvers.rates(texts, refs, solvers=leak_solvers.COMPOSITE_SOLVERS)


def _made(env: EnvFile, pairs: list[tuple[int, int]], pool: SandboxWorkers) -> list:
    (made,) = make_instances(pool, [Order(env, pairs, ask=("prompt",))])
    return [m for m in made if m.instance is not None and m.task is not None]


def _part_reads(plan: Blueprint, k: int, made: list, pool: SandboxWorkers) -> tuple[list[str], list[str]]:
    """(what the solvers read, part k's answer) per made instance: the composite's prompt for
    SEQUENTIAL's X, the composite's prompt less part k's own section for PARALLEL."""
    part = plan.parts[k]
    if plan.operator == "sequential":
        part_instances = [m.instance["a"] for m in made]
    else:
        part_instances = [m.instance["parts"][k] for m in made]
    asked = ("prompt", "solve") if plan.operator == "parallel" else ("solve",)
    texts, refs = [], []
    for m, p in zip(made, ask_instances(pool, part.env, part_instances, asked)):
        if p.answer is None:
            continue
        text = m.task
        if plan.operator == "parallel":
            if p.task is None:
                continue
            # part k's own section, as the composite wrote it; where it is not found (a part
            # whose prompt differs call to call), the whole prompt is read, as before
            text = text.replace(f"Part {k + 1}:\n" + p.task, f"Part {k + 1}:\n", 1)
        texts.append(text)
        refs.append(" ".join(sorted(p.answer.split(), key=_number_first)) if part.order_free else p.answer)
    return texts, refs


def _number_first(token: str) -> tuple:
    """The order the composite writes an order-free X in: increasing, numbers by value."""
    try:
        return (0, float(token), token)
    except ValueError:
        return (1, 0.0, token)
