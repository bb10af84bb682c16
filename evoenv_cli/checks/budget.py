"""The `budget` check: calls, instances and printing stay within their time and size budgets,
at every level sampled.
"""

from __future__ import annotations

import json
import statistics

from evoenv_cli.checks.context import Checker, Rejected
from evoenv_cli.checks.registry import Check, register


def check_budget(checker: Checker) -> None:
    """Call time (the median per level) and instance size at every level sampled, not only
    the top one: a level that is slow or huge is trained on as often as any other."""
    insts = checker.insts
    cfg = checker.cfg
    medians = {key: statistics.median(v) for key, v in checker.times.items() if v}
    top = max(cfg.levels)
    checker.m["seconds_at_top_level"] = {fn: round(v, 5) for (fn, d), v in medians.items() if d == top}
    worst: dict[str, tuple[float, int]] = {}
    for (fn, d), v in medians.items():
        if v > worst.get(fn, (-1.0, 0))[0]:
            worst[fn] = (v, d)
    checker.m["seconds_by_level"] = {fn: {"worst": round(v, 5), "level": d} for fn, (v, d) in worst.items()}
    sizes = {}
    for i in insts:
        sizes[i.difficulty] = max(sizes.get(i.difficulty, 0), len(json.dumps(i.instance)))
    checker.m["instance_bytes_at_top_level"] = sizes.get(top, 0)
    big = max(sizes, key=sizes.get, default=top)
    checker.m["instance_bytes_max"] = sizes.get(big, 0)
    checker.m["output_chars"] = checker.output_chars
    for fn in ("generate", "prompt", "solve", "score"):
        budget = getattr(cfg, f"budget_{fn}_s")
        v, d = worst.get(fn, (0.0, top))
        if v > budget:
            raise Rejected("budget", f"{fn} takes {v:.2f} s at difficulty {d} (median; budget {budget} s)")
    if sizes.get(big, 0) > cfg.budget_instance_bytes:
        raise Rejected(
            "budget", f"instance is {sizes[big]} bytes at difficulty {big} (budget {cfg.budget_instance_bytes})"
        )
    if checker.output_chars > cfg.budget_output_chars:
        raise Rejected(
            "budget",
            f"printed {checker.output_chars} characters to stdout/stderr "
            f"(budget {cfg.budget_output_chars}); an environment has no reason to print",
        )


register(Check("budget", "calls, instances and printing stay within their time and size budgets", check_budget, 100))
