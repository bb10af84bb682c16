"""`evoenv validate`: the execution contract. Decides, with no LLM, whether a Python file is
a working environment, by staged checks run cheapest first; the first failing check decides
and names itself in the verdict, and a probe that decided names itself too (`probe`).

Each check is one record (`Check`: its name, what it guards, the function that runs it, its
place in the order), registered once in `CHECKS` below; `STAGES`, the admission summary's
funnel and the validate command's help all read their names and order from there. Everything
that executes environment code goes through the sandboxed pool, and a broken candidate is a
verdict, never a crash.

The policy writes the `score` it is later rewarded by, so the checks assume a verifier that
may be gamed on purpose: instance seeds come from the whole training range (not 0..7), score
is re-run (twice in one worker, in a fresh one, and after as many calls as a reward worker
serves before it is replaced), and the probes include floods, random answers of the
reference's shape, the constants score compares against and the reference hidden in simple
encodings. Beyond those fixed lists, a scorer fuzzer (stages/fuzz.py) searches mutations of
the reference, prompt-only solvers (stages/leak_solvers.py) read the prompt as a policy would,
and one worker is fed what training feeds it (stages/training_shape.py). Probes are answers no
valid response can be; whether any order of a list is
accepted is measured apart (`order_free`) and never rejects.
"""

from __future__ import annotations

import dataclasses
import json
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from evoenv_cli import artifacts
from evoenv_cli.admission import AdmissionLog, Summary, Verdict
from evoenv_cli.checks import fuzz, leak_solvers, probes, training_shape
from evoenv_cli.checks.probes import Context, whole_token_in
from evoenv_cli.confidence import wilson_interval
from evoenv_cli.config import RuntimeConfig, SampleConfig, ValidateConfig, to_dict
from evoenv_cli.runtime.contract import check_source, import_grant
from evoenv_cli.runtime.instances import ASKED, Made, Order, instance_seed, make_instances
from evoenv_cli.runtime.session import Runtime, shared
from evoenv_cli.runtime.workers import (
    Call,
    CallResult,
    EnvFile,
    EnvLoadError,
    SandboxPool,
    describe_failure,
)
from evoenv_cli.stage import Context as StageContext
from evoenv_cli.stage import Stage
from evoenv_cli.stage import register as register_stage

TRAINING_SEEDS = 2**31  # `sample` and `calibrate` draw instance seeds below this
CONFIRM_INSTANCES = 120  # more instances for a leak solver or a constant answer over its limit
MAX_CONFIRM_INSTANCES = 600  # ... and for a leak solver still neither surely over nor surely under
ALWAYS_EQUAL = "type('AlwaysEqual', (), {'__eq__': lambda self, other: True, '__hash__': lambda self: 0})()"
FIXED_PROBES = {
    "empty": "",
    "whitespace": "  \n\t ",
    "garbage": "garbage text: lorem ipsum dolor sit amet",
    "none": "None",
    "zero": "0",
    "one": "1",
    "one_float": "1.0",
    "true": "true",
    "always_equal": ALWAYS_EQUAL,
}
# No valid answer is empty, blank, prose or an object: accepted once is once too many.
ZERO_TOLERANCE = ("empty", "whitespace", "garbage", "always_equal", "huge")
NEAR_MISSES = tuple(f"near_miss_{k}" for k in probes.NEAR_MISS_KINDS)
NEAR = (*NEAR_MISSES, "other_reference", "random_shape")
# Answers that deserve no credit at all, so a high mean score (partial credit) is a defect.
MEAN_LIMITED = (*FIXED_PROBES, "huge", "flood", "expression", "random_shape")
# The order kinds are checked in: the first over its limit is the verdict's probe.
PROBE_ORDER = (*FIXED_PROBES, "huge", "flood", "expression", "other_reference", *NEAR_MISSES, "random_shape")

LEAK_FORMS = {
    "plain": "",
    "reversed": " backwards",
    "reversed_items": " with its items reversed",
    "base64": " in base64",
    "hex": " in hex",
    "spelled_out": " with its digits spelled out",
}


class Rejected(Exception):
    """The verdict of the check that failed. `cut` False keeps the reason as written (the
    static contract's reasons, which name the offending line, were never cut)."""

    def __init__(self, stage: str, reason: str, probe: str | None = None, *, cut: bool = True):
        super().__init__(reason)
        self.stage = stage
        reason = " ".join(reason.split())[:380] if cut else reason
        self.reason = f"{reason} [probe {probe}]" if probe and probe not in reason else reason
        self.probe = probe


def reject_escapes(done: Iterable[tuple[Call, CallResult]]) -> None:
    """Rejected (run, probe base_exception) at the first call that let a BaseException that is
    not an Exception escape (KeyboardInterrupt, SystemExit, GeneratorExit...): the sandbox
    contains it like any error, but no environment has a reason to raise what stops a
    program, and every check that tolerates a failed call would otherwise pass it in silence."""
    for call, r in done:
        if r.status == "escaped":
            raise Rejected(
                "run",
                f"{call.fn} let a BaseException escape ({r.error}); environment code must raise "
                "an Exception, or return, never stop the program",
                "base_exception",
            )


@dataclass
class Instance:
    seed: int
    difficulty: int
    instance: dict
    text: str = ""
    reference: str = ""
    context: Context | None = None


def training_seeds(env_id: str, salt: str, n: int) -> list[int]:
    """n distinct instance seeds from the whole training range, fixed per file (the same
    bytes are judged on the same instances) but not guessable by the file's author."""
    rng = random.Random(f"evoenv-validate:{env_id}:{salt}")
    out: list[int] = []
    while len(out) < n:
        seed = rng.randrange(TRAINING_SEEDS)
        if seed not in out:
            out.append(seed)
    return out


def sample_pairs(env_id: str, name: str, cfg: ValidateConfig) -> list[tuple[int, int]]:
    """(seed, level) of `cfg.sample_seed_instances` instances at exactly the seeds `evoenv sample`
    gives the rows of `name` (its default base seed): the first rows, and rows drawn per file,
    so a file that recognises the seeds training uses is judged on them too."""
    n = cfg.sample_seed_instances
    rng = random.Random(f"evoenv-validate:{env_id}:sample-rows")
    rows = list(range((n + 1) // 2)) + rng.sample(range((n + 1) // 2, 4096), n // 2)
    base = SampleConfig().seed
    return [(instance_seed(base, name, i), cfg.levels[k % len(cfg.levels)]) for k, i in enumerate(rows)]


class Checker:
    """One environment's checks and what they share: the instances `run` made, the times and
    output every call adds, the measurements that land in the verdict. `run()` runs the
    sandboxed checks of `CHECKS` in order; a check that reads the source alone (`static`) runs
    on a Checker without pools, before any worker starts."""

    def __init__(
        self, env: EnvFile, cfg: ValidateConfig, pool: SandboxPool | None = None, fresh: SandboxPool | None = None
    ):
        self.env, self.cfg, self.pool, self.fresh = env, cfg, pool, fresh
        self.static_name: str | None = None  # the NAME the static check read
        self.insts: list[Instance] = []  # the (seed, level) instances `run` made, scored by `reference`
        self.ref_scores: list[CallResult] = []
        self.by_pair: dict[tuple[int, int], dict] = {}  # every instance made, diversity's too
        self.m: dict = {}
        self.output_chars = 0
        self.times: dict[tuple[str, int], list[float]] = {}  # seconds per (call kind, level), every level
        self.rng = random.Random(f"evoenv-validate-probes:{env.env_id}")
        self.answer_type: str | None = None
        self.tags: list[str] | None = None
        self.name = env.name  # the NAME the worker declared, once `load` has run
        self.sampled: set[tuple[int, int]] = set()  # (seed, level) of instances at `sample`'s seeds
        self.more: list[Made] | None = None  # `_more_instances`, once made
        self.diversity_pairs: dict[int, list[int]] = {}
        self.deadline = time.monotonic() + cfg.max_judge_seconds  # the whole judgement's wall budget
        self.running = "static"  # the check under way, which the budget names when it runs out

    def within_budget(self) -> None:
        """Rejected at `budget` once the judgement is past validate.max_judge_seconds, naming the
        check that ran out: checked between checks and between slices of calls."""
        if time.monotonic() > self.deadline:
            raise Rejected(
                "budget",
                f"the judgement ran past its budget of {self.cfg.max_judge_seconds:g} s "
                f"(validate.max_judge_seconds) in the {self.running} check",
                "judge_seconds",
            )

    def call(
        self, calls: list[Call], pool: SandboxPool | None = None, stop_on_failure: bool = True
    ) -> list[CallResult]:
        """Every check rejects on the first failed call, so the rest of a batch after one is
        skipped rather than paid for (a looping solve costs one time limit, not thirty). The
        calls go in slices of what the pool runs at once, the budget checked before each, so a
        judgement overruns it by one slice at most."""
        pool = pool or self.pool
        step = pool.limits.batch_size * pool.workers
        results: list[CallResult] = []
        for start in range(0, len(calls), step):
            self.within_budget()
            results += pool.run(self.env, calls[start : start + step], stop_on_failure)
        reject_escapes(zip(calls, results))
        for c, r in zip(calls, results):
            self.output_chars += r.output_chars
            if r.ok and c.fn == "generate":
                self.times.setdefault(("generate", c.args[1]), []).append(r.seconds)
        return results

    def make(self, orders: list[Order]) -> list[list[Made]]:
        """Instances through the one path every stage makes them by, counted like `call`."""
        self.within_budget()
        made = make_instances(self.pool, orders, stop_on_failure=True)
        reject_escapes((Call(fn, (m.seed, m.difficulty)), r) for ms in made for m in ms for fn, r in m.results.items())
        for m in (m for ms in made for m in ms):
            self.output_chars += sum(r.output_chars for r in m.results.values())
            r = m.results["generate"]
            if r.ok:
                self.times.setdefault(("generate", m.difficulty), []).append(r.seconds)
        return made

    def run(self) -> None:
        """The sandboxed checks in order; the first to fail raises `Rejected`, and so does the
        budget, when one of them runs past it."""
        for check in checks(sandboxed=True):
            self.running = check.name
            self.within_budget()
            check.run(self)
            self.within_budget()

    def check_static(self) -> None:
        report = check_source(self.env.source, max_bytes=self.cfg.max_source_bytes)
        self.static_name = report.name
        if not report.ok:
            raise Rejected("static", report.reason, cut=False)

    def check_load(self) -> None:
        """The import, and what it costs (a replaced worker pays it again)."""
        cfg = self.cfg
        try:
            meta = self.pool.describe(self.env)
        except EnvLoadError as exc:
            raise Rejected("load", str(exc)) from None
        self.answer_type = meta.get("ANSWER_TYPE")
        self.tags = meta.get("TAGS")
        self.name = meta.get("NAME") or self.env.name  # what `sample` derives seeds from
        self.m["import_seconds"] = round(meta.get("import_seconds", 0.0), 4)
        self.output_chars += meta.get("import_output_chars", 0)
        if self.m["import_seconds"] > cfg.max_import_seconds:
            raise Rejected(
                "load",
                f"importing the file takes {self.m['import_seconds']:.2f} s (at most "
                f"{cfg.max_import_seconds} s); every new worker pays it again",
                "import_budget",
            )

    def check_run(self) -> None:
        """Every call on every (seed, level); values are checked by the pool."""
        cfg = self.cfg
        env_id = self.env.env_id
        pairs = [(s, d) for d in cfg.levels for s in training_seeds(env_id, f"level:{d}", cfg.seeds_per_level)]
        self.sampled = {p for p in sample_pairs(env_id, self.name, cfg) if p not in pairs}
        pairs += sorted(self.sampled)
        self.diversity_pairs = {
            d: training_seeds(env_id, f"diversity:{d}", cfg.diversity_seeds) for d in cfg.diversity_levels
        }
        planned = set(pairs)
        extra = [(s, d) for d, seeds in self.diversity_pairs.items() for s in seeds if (s, d) not in planned]
        made, extra_made = self.make([Order(self.env, pairs), Order(self.env, extra, ask=())])
        for m in made + extra_made:
            if why := m.failure(("generate",)):
                raise Rejected("run", why)
        by_pair = {(m.seed, m.difficulty): m.instance for m in made + extra_made}
        insts = [Instance(m.seed, m.difficulty, m.instance) for m in made]
        for m, inst in zip(made, insts):
            if why := m.failure(ASKED):
                raise Rejected("run", why)
            for fn in ASKED:
                self.times.setdefault((fn, inst.difficulty), []).append(m.results[fn].seconds)
            inst.text, inst.reference = m.task, m.answer
            inst.context = Context.of(inst.instance, inst.text, inst.reference)
            if not inst.text.strip():
                raise Rejected("run", f"prompt is empty at seed {inst.seed} difficulty {inst.difficulty}")
        ref_calls = [Call.score(i.instance, i.reference) for i in insts]
        ref_scores = self.call(ref_calls)
        for c, r, inst in zip(ref_calls, ref_scores, insts):
            if not r.ok:
                raise Rejected("run", describe_failure(c.fn, r, inst.seed, inst.difficulty))
            self.times.setdefault(("score", inst.difficulty), []).append(r.seconds)
        self.m["instances"] = len(insts)
        self.insts, self.ref_scores, self.by_pair = insts, ref_scores, by_pair

    def check_reference(self) -> None:
        """The oracle's own answers score 1.0."""
        insts = self.insts
        bad = [(i, r.value) for i, r in zip(insts, self.ref_scores) if r.value != 1.0]
        self.m["reference_pass_share"] = round(1 - len(bad) / len(insts), 4)
        if bad:
            i, v = bad[0]
            raise Rejected(
                "reference",
                f"score(instance, solve(instance)) = {v} at seed {i.seed} "
                f"difficulty {i.difficulty} ({len(bad)}/{len(insts)} instances), expected 1.0",
            )

    def _spread(self, insts: list[Instance], n: int) -> list[Instance]:
        """n instances spread over the levels, a third of them (at least one) at the seeds
        `sample` derives when there are such."""
        drawn = [i for i in insts if (i.seed, i.difficulty) in self.sampled]
        taken = drawn[: min(len(drawn), max(1, n // 3))] if n > 1 else []
        rest = [i for i in insts if (i.seed, i.difficulty) not in self.sampled]
        step = max(1, len(rest) // max(1, n - len(taken)))
        return rest[::step][: n - len(taken)] + taken

    def check_determinism(self) -> None:
        insts = self.insts
        chosen = self._spread(insts, self.cfg.determinism_pairs)
        calls = [Call.generate(i.seed, i.difficulty) for i in chosen]
        twice = self.call(calls + calls)  # one batch: the same worker answers both rounds
        fresh = self.call(calls, pool=self.fresh)  # a new worker, another PYTHONHASHSEED
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
        again = self.call(ps_calls + ps_calls)
        fresh_ps = self.call(ps_calls, pool=self.fresh)
        n = len(ps_calls)
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
                            f"{fn} of the instance at seed {inst.seed} "
                            f"difficulty {inst.difficulty} changed between runs",
                            f"{fn}_{how}",
                        )
        self.m["determinism_pairs"] = len(chosen)
        self._hash_seed_sample()

    def _hash_seed_sample(self) -> None:
        """generate at many more seeds, compared between the two pools (PYTHONHASHSEED 0 and
        1): a generate that hashes a str for a few seeds in many slips past a few pairs. The
        fresh pool's import time counts against the import budget too (every worker pays it)."""
        levels = sorted(self.cfg.levels)[:3]  # the cheap ones: many seeds matter, not many levels
        seeds = training_seeds(self.env.env_id, "hash-seed", self.cfg.hash_seed_samples)
        calls = [Call.generate(s, levels[k % len(levels)]) for k, s in enumerate(seeds)]
        here, there = self.call(calls), self.call(calls, pool=self.fresh)
        for c, a, b in zip(calls, here, there):
            if not (a.ok and b.ok):
                r = a if not a.ok else b
                raise Rejected("run", describe_failure("generate", r, *c.args))
            if a.value != b.value:
                raise Rejected(
                    "determinism",
                    f"generate(seed={c.args[0]}, difficulty={c.args[1]}) differs between two workers "
                    f"with different PYTHONHASHSEED ({len(calls)} seeds compared)",
                    "generate_hash_seed",
                )
        self.m["hash_seed_samples"] = len(calls)
        fresh_import = self.fresh.describe(self.env).get("import_seconds", 0.0)
        self.m["import_seconds_fresh_worker"] = round(fresh_import, 4)
        if fresh_import > self.cfg.max_import_seconds:
            raise Rejected(
                "load",
                f"importing the file takes {fresh_import:.2f} s in a worker with another hash seed "
                f"(at most {self.cfg.max_import_seconds} s); every new worker pays it again",
                "import_budget",
            )

    def _score_pairs(self, insts: list[Instance]) -> list[tuple[Instance, str, str]]:
        """(instance, probe kind, answer) triples whose score must not change: each chosen
        instance with its reference, another instance's reference, a near miss and garbage."""
        out = []
        for inst in self._spread(insts, self.cfg.score_determinism_pairs):
            other = next(
                (
                    o.reference
                    for o in insts
                    if o.difficulty == inst.difficulty and o.reference.strip() != inst.reference.strip()
                ),
                "0",
            )
            misses = probes.near_misses(inst.reference, inst.context, self.answer_type)
            miss = (f"near_miss_{misses[0][0]}", misses[0][1]) if misses else ("one", "1")
            for kind, answer in (
                ("reference", inst.reference),
                ("other_reference", other),
                miss,
                ("garbage", FIXED_PROBES["garbage"]),
            ):
                out.append((inst, kind, answer))
        return out

    def check_score_determinism(self) -> None:
        """The same (instance, answer) scored twice in one worker (one batch), once in a fresh
        worker with another hash seed, and once more by a worker that has served as many calls
        as a reward worker does before it is replaced: a score that drifts, or turns lenient
        once it has counted enough calls, would pay rewards validate never saw."""
        insts = self.insts
        triples = self._score_pairs(insts)
        calls = [Call.score(i.instance, a) for i, _, a in triples]
        twice = self.call(calls + calls)
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
        random.Random(f"evoenv-validate:{self.env.env_id}:fresh-order").shuffle(order)
        shuffled = self.call([calls[k] for k in order], pool=self.fresh)
        fresh: list[CallResult] = [shuffled[0]] * len(calls) if calls else []
        for at, k in enumerate(order):
            fresh[k] = shuffled[at]
        compare(fresh, "score_fresh_worker", "in a fresh worker with another hash seed, in another order")
        self.m["score_determinism_pairs"] = len(calls)
        bound = self.pool.limits.max_calls_per_worker
        if bound > 0:
            known = [(c, r.value, kind, a) for (_, kind, a), c, r in zip(triples, calls, first)]
            self._training_shape(known, insts, bound)
        # a collapsed GRPO group: every pair sent several times in a row
        group = self.cfg.collapsed_group
        if group > 1:
            collapsed = self.call([c for c in calls for _ in range(group)])
            for j in range(1, group):
                compare(
                    collapsed[j::group],
                    "score_immediate_repeat",
                    f"when sent again at once ({j + 1} times in a row, as a collapsed GRPO group sends it)",
                )

    def _training_shape(self, known: list, insts: list[Instance], bound: int) -> None:
        """One new worker (its replacement off) fed what training feeds a reward worker
        (stages/training_shape.py): GRPO groups, many distinct instances, then `bound` calls in
        all; the known scores must not change, nor the instances generate gives at the end."""
        limits = dataclasses.replace(self.pool.limits, max_calls_per_worker=0)
        mode = self.pool.plan.requested or self.pool.plan.mode  # the same jail, asked for the same way
        seeds = training_seeds(self.env.env_id, "burst", self.cfg.burst_distinct_instances)
        low = sorted(self.cfg.levels)[:3]
        new_calls = [Call.generate(s, low[k % len(low)]) for k, s in enumerate(seeds)]
        cheap = [i for i in insts if i.difficulty <= 4] or insts
        filler = [c for c, _, kind, _ in known if kind != "reference"] + [
            Call.generate(i.seed, i.difficulty) for i in cheap
        ]
        regenerate = [(Call.generate(i.seed, i.difficulty), i.instance) for i in self._spread(insts, 8)]
        with SandboxPool(limits, mode, workers=1, hash_seed=self.pool.hash_seed) as one:
            made = self.call(new_calls, pool=one)
            new = [r.value for r in made if r.ok]
            phases = [
                training_shape.groups(known),
                training_shape.distinct(new, known, FIXED_PROBES["garbage"]),
            ]
            served = len(new_calls) + sum(len(p.calls) for p in phases)
            need = bound - served - len(known)
            phases += training_shape.aged(known, filler, regenerate, need, bound)
            for phase in phases:
                mismatch = phase.first_mismatch(self.call(phase.calls, pool=one))
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
        self.m["training_shape_calls"] = served + need + len(known) + len(regenerate)

    def check_diversity(self) -> None:
        by_pair = self.by_pair
        shares = {}
        for d, seeds in self.diversity_pairs.items():
            seen = [json.dumps(by_pair[(s, d)], sort_keys=True) for s in seeds]
            shares[d] = round(len(set(seen)) / len(seen), 4)
        self.m["distinct_instance_share"] = {str(d): v for d, v in shares.items()}
        low = [d for d, v in shares.items() if v < self.cfg.min_distinct_share]
        if low:
            d = low[0]
            raise Rejected(
                "diversity",
                f"only {shares[d]:.0%} distinct instances over "
                f"{self.cfg.diversity_seeds} seeds at difficulty {d} "
                f"(need {self.cfg.min_distinct_share:.0%})",
            )

    def _probes(self, insts: list[Instance]) -> list[tuple[str, int, str]]:
        """(kind, instance index, answer) for every probe; `reordered` only measures."""
        cfg = self.cfg
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
            out += [
                (f"near_miss_{kind}", k, a) for kind, a in probes.near_misses(inst.reference, ctx, self.answer_type)
            ]
            out += [("random_shape", k, a) for a in probes.random_shaped(inst.reference, ctx, self.rng)]
            out += [("flood", k, a) for a in probes.flood(inst.reference, ctx, others)]
            expr = probes.expression(inst.reference)
            if expr is not None:
                out.append(("expression", k, expr))
            moved = probes.reordered(inst.reference)
            if moved is not None:
                out.append(("reordered", k, moved))
        return out

    def check_discrimination(self) -> None:
        insts = self.insts
        cfg = self.cfg
        planned = self._probes(insts)
        results = self.call([Call.score(insts[k].instance, a) for _, k, a in planned])
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
            accepted[kind] += r.value >= 1.0
            total[kind] += r.value
        shares = {kind: round(accepted[kind] / tried[kind], 4) for kind in tried}
        means = {kind: round(total[kind] / tried[kind], 4) for kind in tried if kind in MEAN_LIMITED}
        order = shares.pop("reordered", None)
        self.m["order_free_share"] = order
        self.m["order_free"] = order is not None and order >= cfg.order_free_share
        self.m["probe_accept_share"] = shares
        self.m["probe_mean_score"] = means
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

    def check_magic_constants(self) -> None:
        """The literals score compares against that the instance does not hold, each tried as
        the answer: one accepted where it is not the reference is a planted backdoor."""
        insts = self.insts
        found = probes.score_constants(self.env.source)
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
            for inst in self._spread(insts, self.cfg.magic_probe_instances):
                # a format of the reference ("0.0" for 0) is the reference, not a backdoor
                if not fuzz._same_value(value, inst.reference) and not inst.context.holds(value):
                    planned.append((value, inst))
        results = self.call([Call.score(i.instance, v) for v, i in planned], stop_on_failure=False)
        tried: Counter = Counter()
        accepted: Counter = Counter()
        for (value, _), r in zip(planned, results):
            tried[value] += 1
            accepted[value] += r.ok and r.value >= 1.0
        self.m["magic_constants_tried"] = len(tried)
        for value in tried:
            share = accepted[value] / tried[value]
            if share > self.cfg.max_probe_accept_share:
                shown = value if len(value) <= 40 else value[:37] + "..."
                raise Rejected(
                    "discrimination",
                    f"score accepts the magic_constant probe {shown!r} (a "
                    f"literal it compares answers against, not in the instance) on {share:.0%} "
                    f"of instances (at most {self.cfg.max_probe_accept_share:.0%} allowed)",
                    "magic_constant",
                )

    def check_fuzz(self) -> None:
        """The scorer fuzzer (stages/fuzz.py): structured mutations of the reference, each kind
        accepted on fuzz_min_accepts instances or more (and again by a fresh worker) is a
        reward hack. A planted or order-free environment gets only the mutations its declared
        rule forbids whatever the answer, and the verdict says it was judged by that rule."""
        insts = self.insts
        cfg = self.cfg
        unique = "planted" not in (self.tags or []) and not self.m.get("order_free")
        chosen = self._spread(insts, cfg.fuzz_instances) if cfg.fuzz_instances else []
        mutants = fuzz.plan(
            [(i.instance, i.text, i.reference) for i in chosen], self.env.source, unique, self.rng, cfg.fuzz_max_calls
        )
        results = self.call([Call.score(chosen[m.instance].instance, m.answer) for m in mutants], stop_on_failure=False)
        accepted = [r.ok and r.value >= 1.0 for r in results]
        if any(accepted):  # the environment's own check again, in another worker and hash seed
            again = iter(
                self.call(
                    [Call.score(chosen[m.instance].instance, m.answer) for m, a in zip(mutants, accepted) if a],
                    pool=self.fresh,
                    stop_on_failure=False,
                )
            )
            accepted = [a and (r := next(again)).ok and r.value >= 1.0 for a in accepted]
        counts, found = fuzz.judge(mutants, accepted, cfg.fuzz_min_accepts)
        self.m["fuzz_calls"] = len(mutants)
        self.m["fuzz_unique_answer"] = unique
        self.m["fuzz_accepted"] = counts
        if found is not None:
            shown = found.answer if len(found.answer) <= 40 else found.answer[:37] + "..."
            rule = (
                ""
                if unique
                else f" (judged by the declared rule: {self.answer_type or 'one answer'}, "
                "one answer of the reference's shape; other valid answers are not counted)"
            )
            raise Rejected(
                "discrimination",
                f"score accepts the {found.kind} mutation of the reference, e.g. {shown!r}, on "
                f"{found.instances} instances ({found.tried} such mutants tried){rule}",
                f"fuzz_{found.kind}",
            )

    def check_constant(self) -> None:
        insts = self.insts
        common = [a for a, _ in Counter(i.reference for i in insts).most_common(3)]
        calls = [Call.score(i.instance, a) for a in common for i in insts]
        results = self.call(calls, stop_on_failure=False)
        best, best_share = "", 0.0
        for j, answer in enumerate(common):
            chunk = results[j * len(insts) : (j + 1) * len(insts)]
            share = sum(1 for r in chunk if r.ok and r.value >= 1.0) / len(insts)
            if share > best_share:
                best, best_share = answer, share
        self.m["constant_answer_share"] = round(best_share, 4)
        if best_share <= self.cfg.max_constant_share:
            return
        # over the limit on these instances: decided with 95% confidence on many more
        more = self._more_instances()
        again = self.call([Call.score(m.instance, best) for m in more], stop_on_failure=False)
        hits = round(best_share * len(insts)) + sum(1 for r in again if r.ok and r.value >= 1.0)
        n = len(insts) + len(more)
        self.m["constant_answer_share_confirmed"] = [round(hits / n, 4), n]
        low = wilson_interval(hits / n, n, leak_solvers.CONFIDENCE_Z)
        if low is not None and low[0] > self.cfg.max_constant_share:
            shown = best if len(best) <= 40 else best[:37] + "..."
            raise Rejected(
                "constant_answer",
                f"the answer {shown!r} is right on {hits / n:.0%} of {n} "
                f"instances (at most {self.cfg.max_constant_share:.0%} allowed, with 95% confidence)",
            )

    def check_leak(self) -> None:
        """The reference written in most prompts, as is or in a simple encoding (reversed,
        base64, hex, digits spelled out), and more often than other instances' references are
        so written: an answer that is one of the prompt's own labels (a SELECT composite's "B")
        appears in every prompt but tells the solver nothing."""
        insts = self.insts
        others = [
            (i, o)
            for k, i in enumerate(insts)
            for o in insts[k + 1 : k + 6]
            if o.reference.strip() != i.reference.strip()
        ]
        own = [(i, i.reference.strip(), probes.encodings(i.reference)) for i in insts]
        encoded = {id(i): enc for i, _, enc in own}
        shares, baselines = {}, {}
        for kind in LEAK_FORMS:
            if kind == "plain":
                hits = [whole_token_in(ref, i.text) for i, ref, _ in own]
                base = [whole_token_in(o.reference, i.text) for i, o in others]
            else:
                hits = [probes.encoded_in(kind, enc[kind], i.text) for i, _, enc in own if kind in enc]
                base = [
                    probes.encoded_in(kind, encoded[id(o)][kind], i.text) for i, o in others if kind in encoded[id(o)]
                ]
            if not hits:
                continue
            shares[kind] = sum(hits) / len(insts)
            baselines[kind] = sum(base) / len(base) if base else 0.0
        self.m["leak_share"] = round(shares["plain"], 4)
        self.m["leak_baseline_share"] = round(baselines["plain"], 4)
        self.m["leak_share_by_encoding"] = {k: round(v, 4) for k, v in shares.items() if k != "plain"}
        for kind, share in shares.items():
            if share > self.cfg.max_leak_share and share - baselines[kind] > self.cfg.min_leak_excess:
                raise Rejected(
                    "leak",
                    f"the reference answer is written{LEAK_FORMS[kind]} in the prompt in {share:.0%} "
                    f"of instances (at most {self.cfg.max_leak_share:.0%} allowed), against "
                    f"{baselines[kind]:.0%} for other instances' answers",
                    f"leak_{kind}",
                )
        solved = leak_solvers.rates([i.text for i in insts], [i.reference for i in insts])
        self.m["leak_solver_share"] = {r.name: [round(r.share, 4), round(r.baseline, 4)] for r in solved}
        if import_grant(self.env.source) is not None:
            # a task evoenv's own import template made from an external benchmark (its content
            # decides, not a declaration): arithmetic on the prompt's numbers is the task itself
            # there (chain_sum, basic_arithmetic), not a leak; the other solvers still read it
            solved = [r for r in solved if r.name not in leak_solvers.TASK_SOLVERS]
        limits = (self.cfg.max_leak_share, self.cfg.min_leak_excess)
        if any(r.over(*limits) for r in solved):
            solved = self._confirm_leak([r.name for r in solved])
        for r in solved:
            if r.over(*limits):
                raise Rejected(
                    "leak",
                    f"the prompt-only solver {r.name} finds the answer from the prompt alone on "
                    f"{r.share:.0%} of instances (at most {self.cfg.max_leak_share:.0%} allowed), against "
                    f"a chance rate of {r.baseline:.0%} (other instances' answers)",
                    f"leak_solver_{r.name}",
                )

    def _more_instances(self, n: int = 0) -> list[Made]:
        """`n` (default CONFIRM_INSTANCES) more instances, drawn like the first over the same
        levels and made once each, for a check whose measure is over its limit on the first ones."""
        n = n or CONFIRM_INSTANCES
        made = self.more or []
        if len(made) < n:
            levels = self.cfg.levels
            seeds = training_seeds(self.env.env_id, "leak-confirm", n)[len(made) :]
            start = len(made)
            pairs = [(s, levels[(start + k) % len(levels)]) for k, s in enumerate(seeds)]
            (new,) = self.make([Order(self.env, pairs)])
            for m in new:
                if why := m.failure(("generate", *ASKED)):
                    raise Rejected("run", why)
            made = made + new
            self.more = made
        return made[:n]

    def _confirm_leak(self, names: list[str]) -> list[leak_solvers.SolverRate]:
        """Solvers over the limits on the first instances, measured again on CONFIRM_INSTANCES
        more: whether a borderline file is admitted must not depend on which instances its hash
        drew (the knapsack seed was rejected on 18 of 60 draws). A solver surely over the limits
        (95%) is kept, one surely under is dropped, and one still in between is measured on
        MAX_CONFIRM_INSTANCES and kept when it is over them there. Returns the kept rates."""
        limits = (self.cfg.max_leak_share, self.cfg.min_leak_excess)
        solved = self._rates_with_more(names, CONFIRM_INSTANCES)
        unsure = [
            r.name for r in solved if r.over(*limits) and not r.surely_over(*limits) and not r.surely_under(*limits)
        ]
        kept = [r for r in solved if r.surely_over(*limits)]
        if unsure and not kept:
            kept = [r for r in self._rates_with_more(unsure, MAX_CONFIRM_INSTANCES) if r.over(*limits)]
        return kept

    def _rates_with_more(self, names: list[str], n: int) -> list[leak_solvers.SolverRate]:
        made = self._more_instances(n)
        texts = [i.text for i in self.insts] + [m.task for m in made]
        refs = [i.reference for i in self.insts] + [m.answer for m in made]
        solved = [r for r in leak_solvers.rates(texts, refs) if r.name in names]
        self.m["leak_confirm_instances"] = len(texts)
        self.m["leak_solver_share_confirmed"] = {r.name: [round(r.share, 4), round(r.baseline, 4)] for r in solved}
        return solved

    def check_budget(self) -> None:
        """Call time (the median per level) and instance size at every level sampled, not only
        the top one: a level that is slow or huge is trained on as often as any other."""
        insts = self.insts
        cfg = self.cfg
        medians = {key: statistics.median(v) for key, v in self.times.items() if v}
        top = max(cfg.levels)
        self.m["seconds_at_top_level"] = {fn: round(v, 5) for (fn, d), v in medians.items() if d == top}
        worst: dict[str, tuple[float, int]] = {}
        for (fn, d), v in medians.items():
            if v > worst.get(fn, (-1.0, 0))[0]:
                worst[fn] = (v, d)
        self.m["seconds_by_level"] = {fn: {"worst": round(v, 5), "level": d} for fn, (v, d) in worst.items()}
        sizes = {}
        for i in insts:
            sizes[i.difficulty] = max(sizes.get(i.difficulty, 0), len(json.dumps(i.instance)))
        self.m["instance_bytes_at_top_level"] = sizes.get(top, 0)
        big = max(sizes, key=sizes.get, default=top)
        self.m["instance_bytes_max"] = sizes.get(big, 0)
        self.m["output_chars"] = self.output_chars
        for fn in ("generate", "prompt", "solve", "score"):
            budget = getattr(cfg, f"budget_{fn}_s")
            v, d = worst.get(fn, (0.0, top))
            if v > budget:
                raise Rejected("budget", f"{fn} takes {v:.2f} s at difficulty {d} (median; budget {budget} s)")
        if sizes.get(big, 0) > cfg.budget_instance_bytes:
            raise Rejected(
                "budget", f"instance is {sizes[big]} bytes at difficulty {big} (budget {cfg.budget_instance_bytes})"
            )
        if self.output_chars > cfg.budget_output_chars:
            raise Rejected(
                "budget",
                f"printed {self.output_chars} characters to stdout/stderr "
                f"(budget {cfg.budget_output_chars}); an environment has no reason to print",
            )


@dataclass(frozen=True)
class Check:
    """One validation check, the one place its facts are written. `name` is the verdict's
    stage when it decides; `run` raises `Rejected` on the first defect it finds (usually under
    its own name; a step may name the check its finding belongs to, as score failing on a
    probe during `determinism` is a `discrimination` verdict). Checks run by `order`, cheapest
    first; `sandboxed` False: the check reads the source alone and runs, with the others like
    it, before any worker starts (it may set `static_name`)."""

    name: str
    guards: str  # what it guards, in one line (the validate command's help lists it)
    run: Callable[[Checker], None]
    order: int
    sandboxed: bool = True


CHECKS: dict[str, Check] = {}


def register(check: Check) -> Check:
    """Add a check to `CHECKS`: one call is all a new check needs besides its function. A name
    or place already taken, or a source check placed after a sandboxed one, is a ValueError."""
    if check.name in CHECKS or check.name == "admitted":
        raise ValueError(f"validation check {check.name!r} is already registered")
    for other in CHECKS.values():
        if other.order == check.order:
            raise ValueError(f"validation checks {other.name!r} and {check.name!r} both have order {check.order}")
        first, then = sorted((check, other), key=lambda c: c.order)
        if first.sandboxed and not then.sandboxed:
            raise ValueError(
                f"{then.name!r} reads the source alone, so it runs before every sandboxed check: "
                f"its order must be below {first.name!r}'s"
            )
    CHECKS[check.name] = check
    return check


def checks(sandboxed: bool | None = None) -> list[Check]:
    """The registered checks in the order they run (only the sandboxed ones, or only the
    source ones, when asked)."""
    return sorted((c for c in CHECKS.values() if sandboxed is None or c.sandboxed == sandboxed), key=lambda c: c.order)


def stage_names() -> tuple[str, ...]:
    """The checks' names in the order they run: the stages a verdict can name besides `admitted`."""
    return tuple(c.name for c in checks())


def _in_turn(*steps: Callable[[Checker], None]) -> Callable[[Checker], None]:
    """One check made of several steps, run in turn (the first to reject decides)."""

    def run(checker: Checker) -> None:
        for step in steps:
            step(checker)

    return run


for _check in (
    Check(
        "static",
        "the source alone: required names, stdlib imports only, no eval/exec/open, NAME assigned once",
        Checker.check_static,
        10,
        sandboxed=False,
    ),
    Check("load", "the file imports within the import budget, and its NAME is not taken", Checker.check_load, 20),
    Check("run", "every call at every level returns a value of the contract's type", Checker.check_run, 30),
    Check(
        "determinism",
        "generate, prompt, solve and score give the same again, in a fresh worker and in an aged one",
        _in_turn(Checker.check_determinism, Checker.check_score_determinism),
        40,
    ),
    Check("diversity", "seeds give distinct instances at every level", Checker.check_diversity, 50),
    Check("reference", "the oracle's own answers score 1.0", Checker.check_reference, 60),
    Check(
        "discrimination",
        "score rejects probes, planted constants and fuzzed near misses of the reference",
        _in_turn(Checker.check_discrimination, Checker.check_magic_constants, Checker.check_fuzz),
        70,
    ),
    Check("constant_answer", "no single answer is right on most instances", Checker.check_constant, 80),
    Check("leak", "the prompt does not give the answer away, as is or encoded", Checker.check_leak, 90),
    Check("budget", "calls, instances and printing stay within their time and size budgets", Checker.check_budget, 100),
):
    register(_check)

STAGES = stage_names()  # the built-in checks' names, in order (validate.run reads the registry)


def judge(env: EnvFile, cfg: ValidateConfig, pool: SandboxPool, fresh: SandboxPool, static_name: str | None) -> Verdict:
    started = time.perf_counter()
    checker = Checker(env, cfg, pool, fresh)
    try:
        checker.run()
        stage, reason, admitted = "admitted", "passed all checks", True
    except Rejected as rej:
        stage, reason, admitted = rej.stage, rej.reason, False
        if rej.probe:
            checker.m["probe"] = rej.probe
    checker.m["wall_s"] = round(time.perf_counter() - started, 3)
    checker.m["sandbox"] = pool.plan.jail  # which jail judged it: bwrap, process+landlock, process
    return Verdict(env.path.name, env.env_id, static_name, admitted, stage, reason, checker.m)


def run(
    library: artifacts.EnvLibrary,
    cfg: ValidateConfig,
    runtime: RuntimeConfig,
    out: Path,
    on_verdict: Callable[[Verdict], None] | None = None,
    session: Runtime | None = None,
) -> Summary:
    """Judge every file of `library` into `out` (already prepared), resuming what is final;
    on `session`'s pools when given (left open), else on pools of its own."""
    with AdmissionLog(out, library.files) as log:

        def finish(verdict: Verdict) -> None:
            log.add(verdict)
            if on_verdict:
                on_verdict(verdict)

        # the source checks and NAME uniqueness (across files) in file order, before anything runs
        names = {r["name"]: f for f, r in log.done.items() if r.get("admitted")}
        todo: list[tuple[EnvFile, str | None]] = []
        for env in log.pending():
            checker = Checker(env, cfg)
            try:
                for check in checks(sandboxed=False):
                    check.run(checker)
            except Rejected as rej:
                probe = {"probe": rej.probe} if rej.probe else {}
                finish(Verdict(env.path.name, env.env_id, checker.static_name, False, rej.stage, rej.reason, probe))
                continue
            name = checker.static_name
            if name in names and names[name] != env.path.name:
                finish(
                    Verdict(
                        env.path.name,
                        env.env_id,
                        name,
                        False,
                        "load",
                        f"NAME {name!r} is already used by {names[name]}",
                    )
                )
            else:
                names[name] = env.path.name
                todo.append((env, name))
        if todo:
            with shared(runtime, session) as rt, ThreadPoolExecutor(max_workers=runtime.workers) as ex:
                pool, fresh = rt.pool, rt.fresh
                futures = [ex.submit(judge, env, cfg, pool, fresh, name) for env, name in todo]
                for f in futures:
                    finish(f.result())
        # order_free is a fact about the environment that composition needs: at the top level
        order_free = {f: {"order_free": bool(r.get("order_free"))} for f, r in log.done.items() if r["admitted"]}
        return log.finish(
            "validate",
            stage_names(),
            library,
            {"validate": to_dict(cfg), "runtime": to_dict(runtime)},
            index_extra=order_free,
        )


# -- the stage's record (evoenv_cli/stage.py) ------------------------------------------------------
def _run(ctx: StageContext, lib, out: Path, llm, bar) -> Summary:
    r = ctx.recipe
    return run(lib, r.validate, r.runtime, out, on_verdict=bar.advance, session=ctx.session)


STAGE = register_stage(
    Stage(
        "validate",
        sections=("validate", "runtime.limits"),
        marker="summary.json",
        settings=lambda ctx: dict(validate=ctx.recipe.validate, limits=ctx.recipe.runtime.limits),
        run=_run,
        place=2,
        funnel="passed the contracts",
    )
)
