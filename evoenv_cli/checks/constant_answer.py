"""The `constant_answer` check: no single answer is right on most instances (decided, when over
the limit, with 95% confidence on more instances), and no single answer that is one of the
prompt's listed options is right more often than its measured chance rate allows (a positional
prior: "the answer is usually A"), however far under that limit.

A constant answer's chance rate is measured, as the leak learners measure an option rule's
(checks/leak_learners.py): on each instance, the share of the prompt's options that the
reference is, read as the constant is (labels or texts), 1/k for k options. The constant's
excess over it is tested like a learner's, on instances the choice of the constant never saw
(one-sided 95%, `SolverRate`): surely over `validate.min_constant_excess` rejects, surely under
passes, and in between it is measured on more. An answer that is not an option has no
measured chance rate here, and is held to `validate.max_constant_share` alone.
"""

from __future__ import annotations

from collections import Counter

from evoenv_cli.checks import leak_learners, leak_solvers
from evoenv_cli.checks.context import CONFIRM_INSTANCES, MAX_CONFIRM_INSTANCES, Checker, Rejected
from evoenv_cli.checks.registry import Check, register
from evoenv_cli.confidence import wilson_interval
from evoenv_cli.runtime.workers import Call


def _shown(answer: str) -> str:
    return answer if len(answer) <= 40 else answer[:37] + "..."


def check_constant(checker: Checker) -> None:
    insts = checker.insts
    common = [a for a, _ in Counter(i.reference for i in insts).most_common(3)]
    calls = [Call.score(i.instance, a) for a in common for i in insts]
    results = checker.call(calls, stop_on_failure=False)
    best, best_share = "", 0.0
    priors: list[leak_solvers.SolverRate] = []
    for j, answer in enumerate(common):
        chunk = results[j * len(insts) : (j + 1) * len(insts)]
        hits = [r.ok and checker.paid(r.value, answer, i.reference) for r, i in zip(chunk, insts)]
        share = sum(hits) / len(insts)
        if share > best_share:
            best, best_share = answer, share
        rate = _option_rate(answer, [i.text for i in insts], [i.reference for i in insts], hits)
        if rate is not None:
            priors.append(rate)
    checker.m["constant_answer_share"] = round(best_share, 4)
    if priors:
        checker.m["constant_option_share"] = {r.name: [round(r.share, 4), round(r.baseline, 4)] for r in priors}
    if best_share > checker.cfg.max_constant_share:
        _confirm_share(checker, best, best_share)
    min_excess = checker.cfg.min_constant_excess
    # a lenient screen (half the limit), as the learners': the held-out test decides, for every
    # option among the most common answers (two tied on the first instances are both tested)
    screen = min_excess * leak_learners.SCREEN_SHARE
    suspects = [r.name for r in priors if min_excess < 1 and r.over(0.0, screen)]
    if suspects:
        _test_priors(checker, suspects)


def _option_rate(
    answer: str, prompts: list[str], references: list[str], hits: list[bool]
) -> leak_solvers.SolverRate | None:
    """The constant `answer`'s share (`hits`) and chance rate over the instances where it is one of
    the prompt's options; None when it is an option on under half of them."""
    chances = [leak_learners.option_chance(p, answer, ref) for p, ref in zip(prompts, references)]
    kept = [(c, h) for c, h in zip(chances, hits) if c is not None]
    if not kept or 2 * len(kept) < len(prompts):
        return None
    n = len(kept)
    return leak_solvers.SolverRate(answer, sum(h for _, h in kept) / n, sum(c for c, _ in kept) / n, n, n)


def _confirm_share(checker: Checker, best: str, best_share: float) -> None:
    """Over the share limit on these instances: decided with 95% confidence on many more."""
    insts = checker.insts
    more = checker.more_instances()
    again = checker.call([Call.score(m.instance, best) for m in more], stop_on_failure=False)
    hits = round(best_share * len(insts)) + sum(
        1 for r, m in zip(again, more) if r.ok and checker.paid(r.value, best, m.answer)
    )
    n = len(insts) + len(more)
    checker.m["constant_answer_share_confirmed"] = [round(hits / n, 4), n]
    low = wilson_interval(hits / n, n, leak_solvers.CONFIDENCE_Z)
    if low is not None and low[0] > checker.cfg.max_constant_share:
        raise Rejected(
            "constant_answer",
            f"the answer {_shown(best)!r} is right on {hits / n:.0%} of {n} "
            f"instances (at most {checker.cfg.max_constant_share:.0%} allowed, with 95% confidence)",
        )


def _held_out(checker: Checker, answers: list[str], n: int) -> list[leak_solvers.SolverRate]:
    """The constants `answers` on `n` instances their choice never saw."""
    made = checker.more_instances(n)
    rates = []
    for answer in answers:
        results = checker.call([Call.score(m.instance, answer) for m in made], stop_on_failure=False)
        hits = [r.ok and checker.paid(r.value, answer, m.answer) for r, m in zip(results, made)]
        rate = _option_rate(answer, [m.task for m in made], [m.answer for m in made], hits)
        if rate is not None:
            rates.append(rate)
    checker.m["constant_option_held_out"] = {r.name: [round(r.share, 4), round(r.baseline, 4), r.n] for r in rates}
    return rates


def _test_priors(checker: Checker, answers: list[str]) -> None:
    """Constant options over half the excess limit on the first instances, tested on held-out
    ones (one-sided 95% split among them, the learners' z): one surely over the limit rejects;
    all surely under pass; still in between, they are measured on MAX_CONFIRM_INSTANCES and one
    over the limit there rejects."""
    min_excess, z = checker.cfg.min_constant_excess, leak_learners.LEARNER_Z
    rates = _held_out(checker, answers, CONFIRM_INSTANCES)
    sure = [r for r in rates if r.surely_over(0.0, min_excess, z)]
    unsure = [r.name for r in rates if not r.surely_over(0.0, min_excess, z) and not r.surely_under(0.0, min_excess, z)]
    if unsure and not sure:
        sure = [r for r in _held_out(checker, unsure, MAX_CONFIRM_INSTANCES) if r.over(0.0, min_excess, z)]
    if sure:
        r = max(sure, key=lambda r: r.share - r.baseline)
        raise Rejected(
            "constant_answer",
            f"the answer {_shown(r.name)!r}, one of the prompt's options, is right on {r.share:.0%} of "
            f"{r.n} held-out instances against a chance rate of {r.baseline:.0%} (a uniformly drawn "
            f"option): at most {min_excess:.0%} over it allowed (validate.min_constant_excess, one-sided 95%)",
            "constant_option_prior",
        )


register(Check("constant_answer", "no single answer is right on most instances", check_constant, 80))
