"""The `discrimination` check: score rejects the probes (answers no valid response can be:
floods, random answers of the reference's shape, near misses...), the constants score
compares against, and the scorer fuzzer's mutations of the reference (checks/fuzz.py).
Whether any order of a list is accepted is measured here too (`order_free`), and never rejects.
"""

from __future__ import annotations

from collections import Counter

from evoenv_cli import operators
from evoenv_cli.checks import fuzz, probes
from evoenv_cli.checks.context import FIXED_PROBES, PAID, Checker, Instance, Rejected
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


def _probes(checker: Checker, insts: list[Instance]) -> list[tuple[str, int, str]]:
    """(kind, instance index, answer) for every probe; `reordered` only measures."""
    cfg = checker.cfg
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
    tried: Counter = Counter()
    accepted: Counter = Counter()
    total: Counter = Counter()
    for (kind, k, _), r in zip(planned, results):
        if not r.ok:
            raise Rejected(
                "discrimination",
                f"score failed on the {kind} probe at seed "
                f"{insts[k].seed} difficulty {insts[k].difficulty} ({r.status}: {r.error}); "
                "score must return a number for any string",
                kind,
            )
        tried[kind] += 1
        accepted[kind] += r.value >= PAID
        total[kind] += r.value
    shares = {kind: round(accepted[kind] / tried[kind], 4) for kind in tried}
    means = {kind: round(total[kind] / tried[kind], 4) for kind in tried if kind in MEAN_LIMITED}
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
        if share > limit:
            raise Rejected(
                "discrimination",
                f"score accepts the {kind} probe on {share:.0%} of instances (at most {limit:.0%} allowed)",
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
    accepted: Counter = Counter()
    for (value, _), r in zip(planned, results):
        tried[value] += 1
        accepted[value] += r.ok and r.value >= PAID
    checker.m["magic_constants_tried"] = len(tried)
    for value in tried:
        share = accepted[value] / tried[value]
        if share > checker.cfg.max_probe_accept_share:
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
    accepted on fuzz_min_accepts instances or more (and again by a fresh worker) is a
    reward hack. A planted or order-free environment gets only the mutations its declared
    rule forbids whatever the answer, and the verdict says it was judged by that rule."""
    insts = checker.insts
    cfg = checker.cfg
    # a SORT composite (evoenv's template, known from the file's content) accepts tied labels
    # in either order: whenever two of its n answers tie its answer is one of several, so it is
    # fuzzed by its rule, like an order-free answer (its swaps of tied labels were counted as
    # accepted permutations: sort3 of coin_change_ways at levels 1-5, whose answers tie on up to
    # half the instances, was rejected on some draws and admitted on others)
    ties = operators.template_of(checker.env.source) == "sort"
    unique = "planted" not in (checker.tags or []) and not checker.m.get("order_free") and not ties
    chosen = checker.spread(insts, cfg.fuzz_instances) if cfg.fuzz_instances else []
    mutants = fuzz.plan(
        [(i.instance, i.text, i.reference) for i in chosen], checker.env.source, unique, checker.rng, cfg.fuzz_max_calls
    )
    results = checker.call([Call.score(chosen[m.instance].instance, m.answer) for m in mutants], stop_on_failure=False)
    accepted = [r.ok and r.value >= PAID for r in results]
    if any(accepted):  # the environment's own check again, in another worker and hash seed
        again = iter(
            checker.call(
                [Call.score(chosen[m.instance].instance, m.answer) for m, a in zip(mutants, accepted) if a],
                pool=checker.fresh,
                stop_on_failure=False,
            )
        )
        accepted = [a and (r := next(again)).ok and r.value >= PAID for a in accepted]
    counts, found = fuzz.judge(mutants, accepted, cfg.fuzz_min_accepts)
    checker.m["fuzz_calls"] = len(mutants)
    checker.m["fuzz_unique_answer"] = unique
    checker.m["fuzz_accepted"] = counts
    if found is not None:
        shown = found.answer if len(found.answer) <= 40 else found.answer[:37] + "..."
        rule = (
            ""
            if unique
            else f" (judged by the declared rule: {checker.answer_type or 'one answer'}, "
            "one answer of the reference's shape; other valid answers are not counted)"
        )
        raise Rejected(
            "discrimination",
            f"score accepts the {found.kind} mutation of the reference, e.g. {shown!r}, on "
            f"{found.instances} instances ({found.tried} such mutants tried){rule}",
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
