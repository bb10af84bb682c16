"""The `hedge` check: an answer that names the reference and one wrong candidate of its shape
("42 or 17", one a line) earns no more than a guess between the two would, the mean of what
each earns alone. A scorer that pays any short answer holding the reference (the first
candidate it finds that is right, in full or at 0.9) pays a policy to hedge; the flood probe
lists many candidates and misses it.

Each instance gets four hedges (reference first and last, joined by " or " and by a line
break) around one random wrong answer of the reference's shape (checks/fuzz.py). A scorer
that reads the first or the last candidate earns exactly the guess's mean on them; one that
reads the whole answer earns 0; reasoning-gym's containment credit (len(reference) /
len(answer)) earns under it. The excess over the guess, averaged per instance, is tested
one-sided at 95% against `validate.max_mean_excess`, the mean rule the probes are held to
(checks/pay.py); at 1 the check is off.
"""

from __future__ import annotations

import math

from evoenv_cli.checks import fuzz
from evoenv_cli.checks.context import Checker, Rejected
from evoenv_cli.checks.registry import Check, register
from evoenv_cli.runtime.workers import Call

JOINS = (" or ", "\n")
Z = 1.645  # one-sided 95%


def hedges(reference: str, wrong: str) -> list[str]:
    """The reference and `wrong` in both orders, with each join."""
    return [j.join(pair) for j in JOINS for pair in ((reference, wrong), (wrong, reference))]


def _wrong(checker: Checker, reference: str, instance: dict) -> str | None:
    """One random answer of the reference's shape that neither is nor holds it."""
    for cand in fuzz.random_shape(reference, checker.rng, fuzz.scalars(instance), 2):
        if cand.strip() and reference not in cand and cand not in reference:
            return cand
    return None


def check_hedge(checker: Checker) -> None:
    cfg = checker.cfg
    if cfg.max_mean_excess >= 1:
        return
    wrongs: dict[int, str] = {}  # instance index -> its wrong candidate
    for k, inst in enumerate(checker.insts):
        ref = inst.reference.strip()
        wrong = _wrong(checker, ref, inst.instance) if ref else None
        if wrong is not None:
            wrongs[k] = wrong
    if not wrongs:
        return
    # per instance: the wrong candidate alone ("" below), then its four hedges
    planned = [(k, h) for k, w in wrongs.items() for h in ("", *hedges(checker.insts[k].reference.strip(), w))]
    calls = [Call.score(checker.insts[k].instance, h or wrongs[k]) for k, h in planned]
    results = checker.call(calls, stop_on_failure=False)
    alone: dict[int, float] = {}
    hedged: dict[int, list[float]] = {}
    for (k, h), r in zip(planned, results):
        value = r.value if r.ok and isinstance(r.value, (int, float)) else 0.0
        if h:
            hedged.setdefault(k, []).append(value)
        else:
            alone[k] = value
    # what a guess between the two earns: the reference is paid in full (the reference check)
    excess = [sum(v) / len(v) - (1.0 + alone[k]) / 2 for k, v in hedged.items()]
    n = len(excess)
    mean = sum(excess) / n
    se = math.sqrt(sum((e - mean) ** 2 for e in excess) / max(1, n - 1) / n)
    checker.m["hedge_excess"] = round(mean, 4)
    if mean - Z * se > cfg.max_mean_excess:
        k = max(hedged, key=lambda i: sum(hedged[i]))
        ref = checker.insts[k].reference.strip()
        raise Rejected(
            "hedge",
            f"score pays an answer that hedges between the reference and a wrong one "
            f"{mean:.2f} more than a guess between them earns, on average over {n} instances "
            f"(e.g. {hedges(ref, wrongs[k])[0][:60]!r}); "
            f"the limit is validate.max_mean_excess {cfg.max_mean_excess:g}",
            "hedge",
        )


register(
    Check(
        "hedge",
        "an answer naming the reference and a wrong candidate earns no more than a guess between them",
        check_hedge,
        75,
    )
)
