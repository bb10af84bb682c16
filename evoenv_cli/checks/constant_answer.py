"""The `constant_answer` check: no single answer is right on most instances (decided, when over
the limit, with 95% confidence on more instances).
"""

from __future__ import annotations

from collections import Counter

from evoenv_cli.checks import leak_solvers
from evoenv_cli.checks.context import PAID, Checker, Rejected
from evoenv_cli.checks.registry import Check, register
from evoenv_cli.confidence import wilson_interval
from evoenv_cli.runtime.workers import Call


def check_constant(checker: Checker) -> None:
    insts = checker.insts
    common = [a for a, _ in Counter(i.reference for i in insts).most_common(3)]
    calls = [Call.score(i.instance, a) for a in common for i in insts]
    results = checker.call(calls, stop_on_failure=False)
    best, best_share = "", 0.0
    for j, answer in enumerate(common):
        chunk = results[j * len(insts) : (j + 1) * len(insts)]
        share = sum(1 for r in chunk if r.ok and r.value >= PAID) / len(insts)
        if share > best_share:
            best, best_share = answer, share
    checker.m["constant_answer_share"] = round(best_share, 4)
    if best_share <= checker.cfg.max_constant_share:
        return
    # over the limit on these instances: decided with 95% confidence on many more
    more = checker.more_instances()
    again = checker.call([Call.score(m.instance, best) for m in more], stop_on_failure=False)
    hits = round(best_share * len(insts)) + sum(1 for r in again if r.ok and r.value >= PAID)
    n = len(insts) + len(more)
    checker.m["constant_answer_share_confirmed"] = [round(hits / n, 4), n]
    low = wilson_interval(hits / n, n, leak_solvers.CONFIDENCE_Z)
    if low is not None and low[0] > checker.cfg.max_constant_share:
        shown = best if len(best) <= 40 else best[:37] + "..."
        raise Rejected(
            "constant_answer",
            f"the answer {shown!r} is right on {hits / n:.0%} of {n} "
            f"instances (at most {checker.cfg.max_constant_share:.0%} allowed, with 95% confidence)",
        )


register(Check("constant_answer", "no single answer is right on most instances", check_constant, 80))
