"""The `determinism` check: generate, prompt, solve and score give the same again, in one
worker, in a fresh one with another hash seed, and in one fed what training feeds a reward
worker (checks/training_shape.py). The one check module that asks the pool for generate and
prompt itself: it regenerates instances it already has, to compare.
"""

from __future__ import annotations

import dataclasses
import random

from evoenv_cli.checks import probes, training_shape
from evoenv_cli.checks.context import FIXED_PROBES, Checker, Instance, Rejected, failed, reject_timeouts, training_seeds
from evoenv_cli.checks.load import load_rejected
from evoenv_cli.checks.registry import Check, in_turn, register
from evoenv_cli.runtime.workers import Call, CallResult, EnvLoadError


def check_determinism(checker: Checker) -> None:
    insts = checker.insts
    chosen = checker.spread(insts, checker.cfg.determinism_pairs)
    calls = [Call.generate(i.seed, i.difficulty) for i in chosen]
    twice = checker.call(calls + calls)  # one batch: the same worker answers both rounds
    fresh = checker.call(calls, workers=checker.fresh)  # a new worker, another PYTHONHASHSEED
    reject_timeouts([*zip(calls + calls, twice, chosen + chosen), *zip(calls, fresh, chosen)])
    for k, inst in enumerate(chosen):
        runs = {
            "again in one worker": (twice[k], "generate_repeat"),
            "a second time in one worker": (twice[len(calls) + k], "generate_repeat"),
            "in a fresh worker with another hash seed": (fresh[k], "generate_fresh_worker"),
        }
        for label, (r, probe) in runs.items():
            if not r.ok:
                raise Rejected("determinism", f"generate {label} failed at seed {inst.seed}: {r.error}", probe)
            if r.value != inst.instance:
                raise Rejected(
                    "determinism",
                    f"generate(seed={inst.seed}, difficulty={inst.difficulty}) gave a different instance {label}",
                    probe,
                )
    ps_calls = [c for i in chosen for c in (Call.prompt(i.instance), Call.solve(i.instance))]
    again = checker.call(ps_calls + ps_calls)
    fresh_ps = checker.call(ps_calls, workers=checker.fresh)
    n = len(ps_calls)
    about = [i for i in chosen for _ in range(2)]  # the instance each of ps_calls asks about
    reject_timeouts([*zip(ps_calls + ps_calls, again, about + about), *zip(ps_calls, fresh_ps, about)])
    for k, inst in enumerate(chosen):
        for j, expected, fn in ((0, inst.text, "prompt"), (1, inst.reference, "solve")):
            runs = (
                (again[2 * k + j], "repeat"),
                (again[n + 2 * k + j], "repeat"),
                (fresh_ps[2 * k + j], "fresh_worker"),
            )
            for r, how in runs:
                if not r.ok or r.value != expected:
                    raise Rejected(
                        "determinism",
                        f"{fn} of the instance at seed {inst.seed} difficulty {inst.difficulty} changed between runs",
                        f"{fn}_{how}",
                    )
    checker.m["determinism_pairs"] = len(chosen)
    _hash_seed_sample(checker)


def _hash_seed_sample(checker: Checker) -> None:
    """generate at many more seeds, compared between the two pools (PYTHONHASHSEED 0 and
    1): a generate that hashes a str for a few seeds in many slips past a few pairs. The
    fresh pool's import time counts against the import budget too (every worker pays it)."""
    levels = sorted(checker.cfg.levels)[:3]  # the cheap ones: many seeds matter, not many levels
    seeds = training_seeds(checker.env.env_id, "hash-seed", checker.cfg.hash_seed_samples)
    calls = [Call.generate(s, levels[k % len(levels)]) for k, s in enumerate(seeds)]
    here, there = checker.call(calls), checker.call(calls, workers=checker.fresh)
    for c, a, b in zip(calls, here, there):
        if not (a.ok and b.ok):
            r = a if not a.ok else b
            raise failed("run", "generate", r, *c.args)
        if a.value != b.value:
            raise Rejected(
                "determinism",
                f"generate(seed={c.args[0]}, difficulty={c.args[1]}) differs between two workers "
                f"with different PYTHONHASHSEED ({len(calls)} seeds compared)",
                "generate_hash_seed",
            )
    checker.m["hash_seed_samples"] = len(calls)
    try:
        fresh_import = checker.fresh.describe(checker.env).get("import_seconds", 0.0)
    except EnvLoadError as exc:  # the first worker imported it: the second ran past the limit, or died
        raise load_rejected(exc) from None
    checker.m["import_seconds_fresh_worker"] = round(fresh_import, 4)
    if fresh_import > checker.cfg.max_import_seconds:
        raise Rejected(
            "load",
            f"importing the file takes {fresh_import:.2f} s in a worker with another hash seed "
            f"(at most {checker.cfg.max_import_seconds} s); every new worker pays it again",
            "import_budget",
        )


def _score_pairs(checker: Checker, insts: list[Instance]) -> list[tuple[Instance, str, str]]:
    """(instance, probe kind, answer) triples whose score must not change: each chosen
    instance with its reference, another instance's reference, a near miss and garbage."""
    out = []
    for inst in checker.spread(insts, checker.cfg.score_determinism_pairs):
        other = next(
            (
                o.reference
                for o in insts
                if o.difficulty == inst.difficulty and o.reference.strip() != inst.reference.strip()
            ),
            "0",
        )
        misses = probes.near_misses(inst.reference, inst.context, checker.answer_type)
        miss = (f"near_miss_{misses[0][0]}", misses[0][1]) if misses else ("one", "1")
        for kind, answer in (
            ("reference", inst.reference),
            ("other_reference", other),
            miss,
            ("garbage", FIXED_PROBES["garbage"]),
        ):
            out.append((inst, kind, answer))
    return out


def check_score_determinism(checker: Checker) -> None:
    """The same (instance, answer) scored twice in one worker (one batch), once in a fresh
    worker with another hash seed, and once more by a worker that has served as many calls
    as a reward worker does before it is replaced: a score that drifts, or turns lenient
    once it has counted enough calls, would pay rewards validate never saw."""
    insts = checker.insts
    triples = _score_pairs(checker, insts)
    calls = [Call.score(i.instance, a) for i, _, a in triples]
    twice = checker.call(calls + calls)
    first = twice[: len(calls)]
    for (inst, kind, _), r in zip(triples, first):
        if not r.ok:  # not a matter of determinism: score must answer every string
            raise Rejected(
                "discrimination",
                f"score failed on the {kind} probe at seed {inst.seed} "
                f"difficulty {inst.difficulty} ({r.status}: {r.error}); score must "
                "return a number for any string",
                kind,
            )

    def compare(results: list[CallResult], probe: str, label: str) -> None:
        for (inst, _, answer), a, b in zip(triples, first, results):
            if not b.ok or a.value != b.value:
                shown = answer if len(answer) <= 30 else answer[:27] + "..."
                got = b.value if b.ok else f"a failed call ({b.status})"
                raise Rejected(
                    "determinism",
                    f"score of the answer {shown!r} at seed {inst.seed} "
                    f"difficulty {inst.difficulty} was {a.value} and then {got} {label}",
                    probe,
                )

    compare(twice[len(calls) :], "score_repeat", "when asked again in the same worker")
    # another order than the first pass's, so no sequence of calls is replayed as it came
    order = list(range(len(calls)))
    random.Random(f"evoenv-validate:{checker.env.env_id}:fresh-order").shuffle(order)
    shuffled = checker.call([calls[k] for k in order], workers=checker.fresh)
    fresh: list[CallResult] = [shuffled[0]] * len(calls) if calls else []
    for at, k in enumerate(order):
        fresh[k] = shuffled[at]
    compare(fresh, "score_fresh_worker", "in a fresh worker with another hash seed, in another order")
    checker.m["score_determinism_pairs"] = len(calls)
    bound = checker.workers.limits.max_calls_per_worker
    if bound > 0:
        known = [(c, r.value, kind, a) for (_, kind, a), c, r in zip(triples, calls, first)]
        _training_shape(checker, known, insts, bound)
    # a collapsed GRPO group: every pair sent several times in a row
    group = checker.cfg.collapsed_group
    if group > 1:
        collapsed = checker.call([c for c in calls for _ in range(group)])
        for j in range(1, group):
            compare(
                collapsed[j::group],
                "score_immediate_repeat",
                f"when sent again at once ({j + 1} times in a row, as a collapsed GRPO group sends it)",
            )


def _training_shape(checker: Checker, known: list, insts: list[Instance], bound: int) -> None:
    """One new worker (its replacement off) fed what training feeds a reward worker
    (checks/training_shape.py): GRPO groups, many distinct instances, then `bound` calls in
    all; the known scores must not change, nor the instances generate gives at the end."""
    limits = dataclasses.replace(checker.workers.limits, max_calls_per_worker=0)
    seeds = training_seeds(checker.env.env_id, "burst", checker.cfg.burst_distinct_instances)
    low = sorted(checker.cfg.levels)[:3]
    new_calls = [Call.generate(s, low[k % len(low)]) for k, s in enumerate(seeds)]
    cheap = [i for i in insts if i.difficulty <= 4] or insts
    filler = [c for c, _, kind, _ in known if kind != "reference"] + [
        Call.generate(i.seed, i.difficulty) for i in cheap
    ]
    regenerate = [(Call.generate(i.seed, i.difficulty), i.instance) for i in checker.spread(insts, 8)]
    with checker.workers.solo(limits) as one:  # the same jail and hash seed, on the same node
        made = checker.call(new_calls, workers=one)
        new = [r.value for r in made if r.ok]
        phases = [
            training_shape.groups(known),
            training_shape.distinct(new, known, FIXED_PROBES["garbage"]),
        ]
        served = len(new_calls) + sum(len(p.calls) for p in phases)
        need = bound - served - len(known)
        phases += training_shape.aged(known, filler, regenerate, need, bound)
        for phase in phases:
            mismatch = phase.first_mismatch(checker.call(phase.calls, workers=one))
            if mismatch is None:
                continue
            k, r = mismatch
            shown = phase.shown[k] if len(phase.shown[k]) <= 30 else phase.shown[k][:27] + "..."
            if phase.calls[k].fn == "generate":
                what = f"generate{phase.calls[k].args} gave another instance"
            else:
                got = r.value if r.ok else f"a failed call ({r.status})"
                what = f"score of the answer {shown!r} changed from {phase.expected[k]} to {got}"
            raise Rejected("determinism", f"{what} {phase.label} in one worker", phase.probe)
    checker.m["training_shape_calls"] = served + need + len(known) + len(regenerate)


register(
    Check(
        "determinism",
        "generate, prompt, solve and score give the same again, in a fresh worker and in an aged one",
        in_turn(check_determinism, check_score_determinism),
        40,
    )
)
