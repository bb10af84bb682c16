"""The `discrimination` check: score rejects the probes (answers no valid response can be:
floods, random answers of the reference's shape, near misses...), the constants score
compares against, and the scorer fuzzer's mutations of the reference (checks/fuzz.py).
Whether any order of a list is accepted is measured here too (`order_free`), and never rejects.
So is the chance pay (checks/pay.py), first: what answers of the reference's shape that know
nothing are paid, against which every probe, constant and mutant here (and the constant
answer after) is judged paid or not.
"""

from __future__ import annotations

from collections import Counter

from evoenv_cli import operators
from evoenv_cli.checks import fuzz, probes
from evoenv_cli.checks.context import FIXED_PROBES, PAID, Checker, Instance, Rejected
from evoenv_cli.checks.pay import Chance
from evoenv_cli.checks.registry import Check, in_turn, register
from evoenv_cli.runtime.workers import Call

# No valid answer is empty, blank, prose or an object: accepted once is once too many.
ZERO_TOLERANCE = ("empty", "whitespace", "garbage", "always_equal", "huge")
NEAR_MISSES = tuple(f"near_miss_{k}" for k in probes.NEAR_MISS_KINDS)
NEAR = (*NEAR_MISSES, "other_reference", "random_shape")
# Answers that deserve no credit at all, so a high mean score (partial credit) is a defect.
MEAN_LIMITED = (*FIXED_PROBES, "huge", "flood", "expression", "random_shape")
# The order kinds are checked in: the first over its limit is the verdict's probe.
PROBE_ORDER = (*FIXED_PROBES, "huge", "flood", "expression", "other_reference", *NEAR_MISSES, "random_shape")
# Chance answers: other instances' references (the `other_reference` probe, one per instance)
# and this many random answers of the reference's shape per instance (fuzz's: digit strings of
# its length, lists of its size from the instance's values...), scored only to measure chance pay.
CHANCE_RANDOM = 2
CHANCE_KINDS = ("other_reference", "chance")


def _probes(checker: Checker, insts: list[Instance]) -> list[tuple[str, int, str]]:
    """(kind, instance index, answer) for every probe; `reordered` only measures."""
    cfg = checker.cfg
    measured = cfg.min_paid_excess < 1 or cfg.max_mean_excess < 1
    out: list[tuple[str, int, str]] = []
    for k, inst in enumerate(insts):
        ref, ctx = inst.reference.strip(), inst.context
        for kind, answer in FIXED_PROBES.items():
            if answer.strip() != ref or kind in ("empty", "whitespace"):
                out.append((kind, k, answer))
        if k < cfg.huge_probe_instances:
            out.append(("huge", k, "7" * cfg.huge_probe_chars))
        others = [
            o.reference
            for o in insts
            if o.difficulty == inst.difficulty and o is not inst and o.reference.strip() != ref
        ]
        if others:
            out.append(("other_reference", k, others[0]))
        if measured:  # with the measured rules off, chance pay is not needed
            values = fuzz.scalars(inst.instance)
            # not the reference itself: a string over its own letters is not a blind guess ("A" for "A")
            out += [("chance", k, a) for a in fuzz.random_shape(ref, checker.rng, values, CHANCE_RANDOM) if a != ref]
        out += [(f"near_miss_{kind}", k, a) for kind, a in probes.near_misses(inst.reference, ctx, checker.answer_type)]
        out += [("random_shape", k, a) for a in probes.random_shaped(inst.reference, ctx, checker.rng)]
        out += [("flood", k, a) for a in probes.flood(inst.reference, ctx, others)]
        expr = probes.expression(inst.reference)
        if expr is not None:
            out.append(("expression", k, expr))
        moved = probes.reordered(inst.reference)
        if moved is not None:
            out.append(("reordered", k, moved))
    return out


def check_discrimination(checker: Checker) -> None:
    insts = checker.insts
    cfg = checker.cfg
    planned = _probes(checker, insts)
    results = checker.call([Call.score(insts[k].instance, a) for _, k, a in planned])
    for (kind, k, _), r in zip(planned, results):
        if not r.ok:
            raise Rejected(
                "discrimination",
                f"score failed on the {kind} probe at seed "
                f"{insts[k].seed} difficulty {insts[k].difficulty} ({r.status}: {r.error}); "
                "score must return a number for any string",
                kind,
            )
    chance = Chance(
        tuple(r.value for (kind, _, _), r in zip(planned, results) if kind in CHANCE_KINDS), cfg.min_paid_excess
    )
    checker.chance = chance
    checker.m["chance_pay"] = {
        "answers": chance.n,
        "right": round(chance.right, 4),
        "wrong_top": round(chance.wrong_top, 4),
        "line": round(chance.line, 4),
    }
    tried: Counter = Counter()
    accepted: Counter = Counter()  # paid in full
    paid: Counter = Counter()  # paid: in full, or over the chance line (checks/pay.py)
    scores: dict[str, list[float]] = {}
    for (kind, k, answer), r in zip(planned, results):
        if kind == "chance":
            continue
        tried[kind] += 1
        accepted[kind] += r.value >= PAID
        # order is measured by full acceptance (a valid reordering is paid in full), and another
        # instance's reference is a chance answer itself: both are judged by full pay
        full_only = kind == "reordered" or kind in CHANCE_KINDS
        paid[kind] += r.value >= PAID if full_only else checker.paid(r.value, answer, insts[k].reference)
        scores.setdefault(kind, []).append(r.value)
    shares = {kind: round(paid[kind] / tried[kind], 4) for kind in tried}
    means = {kind: round(sum(scores[kind]) / tried[kind], 4) for kind in tried if kind in MEAN_LIMITED}
    order = shares.pop("reordered", None)
    checker.m["order_free_share"] = order
    checker.m["order_free"] = order is not None and order >= cfg.order_free_share
    checker.m["probe_accept_share"] = shares
    checker.m["probe_mean_score"] = means
    for kind in PROBE_ORDER:
        if kind not in shares:
            continue
        share = shares[kind]
        limit = (
            0.0
            if kind in ZERO_TOLERANCE
            else cfg.max_near_miss_accept_share
            if kind in NEAR
            else cfg.max_probe_accept_share
        )
        # over the limit in full pay (the old rule), or paid over the limit and more often than
        # chance answers are paid at the line
        if accepted[kind] / tried[kind] > limit or (share > limit and chance.beats_chance(paid[kind], tried[kind])):
            line = chance.line
            raise Rejected(
                "discrimination",
                f"score accepts the {kind} probe on {share:.0%} of instances (at most {limit:.0%} allowed"
                + (")" if line >= PAID else f"; paid: {line:.2f} or more, over what chance answers earn)"),
                kind,
            )
        if means.get(kind, 0.0) > cfg.max_probe_mean_score:
            raise Rejected(
                "discrimination",
                f"score gives the {kind} probe a mean of {means[kind]:.2f} "
                f"(at most {cfg.max_probe_mean_score} allowed): credit for answers no valid "
                "one can be",
                kind,
            )
        if kind in MEAN_LIMITED and chance.mean_over(scores[kind], cfg.max_mean_excess):
            excess, _ = chance.mean_excess(scores[kind])
            raise Rejected(
                "discrimination",
                f"score gives the {kind} probe a mean of {means[kind]:.2f}, {excess:.2f} over the chance "
                f"rate of being right ({chance.right:.0%} of {chance.n} answers of the reference's shape): "
                f"at most {cfg.max_mean_excess} over it allowed (validate.max_mean_excess, one-sided 95%): "
                "credit for answers no valid one can be",
                kind,
            )


def check_magic_constants(checker: Checker) -> None:
    """The literals score compares against that the instance does not hold, each tried as
    the answer: one accepted where it is not the reference is a planted backdoor."""
    insts = checker.insts
    found = probes.score_constants(checker.env.source)
    if found.digest_compare is not None:
        raise Rejected(
            "discrimination",
            f"score compares a digest with the constant "
            f"{found.digest_compare[:24]!r}: an answer that hashes to it is a backdoor "
            "no probe can find",
            "magic_constant",
        )
    planned = []
    for value in found.values:
        for inst in checker.spread(insts, checker.cfg.magic_probe_instances):
            # a format of the reference ("0.0" for 0) is the reference, not a backdoor
            if not fuzz._same_value(value, inst.reference) and not inst.context.holds(value):
                planned.append((value, inst))
    results = checker.call([Call.score(i.instance, v) for v, i in planned], stop_on_failure=False)
    tried: Counter = Counter()
    accepted: Counter = Counter()  # paid in full
    paid: Counter = Counter()  # in full or over the chance line
    for (value, i), r in zip(planned, results):
        tried[value] += 1
        accepted[value] += r.ok and r.value >= PAID
        paid[value] += r.ok and checker.paid(r.value, value, i.reference)
    checker.m["magic_constants_tried"] = len(tried)
    limit = checker.cfg.max_probe_accept_share
    for value in tried:
        share = paid[value] / tried[value]
        if accepted[value] / tried[value] > limit or (
            share > limit and checker.chance.beats_chance(paid[value], tried[value])
        ):
            shown = value if len(value) <= 40 else value[:37] + "..."
            raise Rejected(
                "discrimination",
                f"score accepts the magic_constant probe {shown!r} (a "
                f"literal it compares answers against, not in the instance) on {share:.0%} "
                f"of instances (at most {checker.cfg.max_probe_accept_share:.0%} allowed)",
                "magic_constant",
            )


def check_fuzz(checker: Checker) -> None:
    """The scorer fuzzer (checks/fuzz.py): structured mutations of the reference, each kind
    paid on fuzz_min_accepts instances or more (and again by a fresh worker) is a reward hack:
    paid in full, or paid over the chance line more often than chance answers are
    (checks/pay.py). A planted environment gets in full only the mutations its declared rule
    forbids whatever the answer, the others at partial pay; an order-free one every kind but
    reorderings. The verdict says which rule it was judged by."""
    insts = checker.insts
    cfg = checker.cfg
    planted = "planted" in (checker.tags or [])
    order_free = bool(checker.m.get("order_free"))
    # a SORT composite (evoenv's template, known from the file's content) accepts tied labels
    # in either order: whenever two of its n answers tie its answer is one of several, so it is
    # fuzzed by its rule, like a planted answer (its swaps of tied labels were counted as
    # accepted permutations: sort3 of coin_change_ways at levels 1-5, whose answers tie on up to
    # half the instances, was rejected on some draws and admitted on others)
    ties = operators.template_of(checker.env.source) == "sort"
    unique = not planted and not order_free and not ties
    chosen = checker.spread(insts, cfg.fuzz_instances) if cfg.fuzz_instances else []
    mutants = fuzz.plan(
        [(i.instance, i.text, i.reference) for i in chosen],
        checker.env.source,
        unique,
        checker.rng,
        cfg.fuzz_max_calls,
        order_free=order_free and not planted,
    )
    if checker.chance.line >= PAID:  # paid in full alone: a kind judged at partial pay cannot be paid
        mutants = [m for m in mutants if m.full]

    def judged(m: fuzz.Mutant, r) -> tuple[bool, bool]:
        """(paid, paid in full) for one mutant's score, by its rule."""
        if not r.ok:
            return False, False
        whole = m.full and r.value >= PAID
        paid = checker.paid(r.value, m.answer, chosen[m.instance].reference)
        return (paid if m.full else paid and r.value < PAID), whole

    results = checker.call([Call.score(chosen[m.instance].instance, m.answer) for m in mutants], stop_on_failure=False)
    flags = [judged(m, r) for m, r in zip(mutants, results)]
    if any(p for p, _ in flags):  # the environment's own check again, in another worker and hash seed
        again = iter(
            checker.call(
                [Call.score(chosen[m.instance].instance, m.answer) for m, (p, _) in zip(mutants, flags) if p],
                workers=checker.fresh,
                stop_on_failure=False,
            )
        )
        flags = [
            (p and (f := judged(m, next(again)))[0], w and f[1]) if p else (False, False)
            for m, (p, w) in zip(mutants, flags)
        ]
    counts, found = fuzz.judge(
        mutants,
        [p for p, _ in flags],
        cfg.fuzz_min_accepts,
        full=[w for _, w in flags],
        beats_chance=checker.chance.beats_chance,
    )
    checker.m["fuzz_calls"] = len(mutants)
    checker.m["fuzz_unique_answer"] = unique
    checker.m["fuzz_accepted"] = counts
    if found is not None:
        shown = found.answer if len(found.answer) <= 40 else found.answer[:37] + "..."
        rule = (
            ""
            if unique
            else " (judged by the declared rule: the answer's items in any order, so no reorderings)"
            if not planted
            else f" (judged by the declared rule: {checker.answer_type or 'one answer'}, "
            "one answer of the reference's shape; other valid answers are not counted, and one "
            "paid in full only where no valid answer can be of its kind)"
        )
        line = checker.chance.line
        pay = "" if line >= PAID else f"; paid: {line:.2f} or more, over what chance answers earn"
        raise Rejected(
            "discrimination",
            f"score accepts the {found.kind} mutation of the reference, e.g. {shown!r}, on "
            f"{found.instances} instances ({found.tried} such mutants tried{pay}){rule}",
            f"fuzz_{found.kind}",
        )


register(
    Check(
        "discrimination",
        "score rejects probes, planted constants and fuzzed near misses of the reference",
        in_turn(check_discrimination, check_magic_constants, check_fuzz),
        70,
    )
)
