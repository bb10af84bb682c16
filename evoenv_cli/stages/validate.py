"""`evoenv validate`: the execution contract. Decides, with no LLM, whether a Python file is
a working environment, by staged checks run cheapest first; the first failing check decides
and names itself in the verdict.

static -> load -> run -> determinism -> diversity -> reference -> discrimination ->
constant_answer -> leak -> budget. Everything that executes environment code goes through the
sandboxed pool, and a broken candidate is a verdict, never a crash.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from evoenv_cli import artifacts
from evoenv_cli.config import RuntimeConfig, ValidateConfig, to_dict
from evoenv_cli.runtime.contract import check_source
from evoenv_cli.runtime.pool import Call, CallResult, EnvFile, EnvLoadError, SandboxPool
from evoenv_cli.runtime.session import Runtime, shared
from evoenv_cli.stages.admission import AdmissionLog, Summary, Verdict

STAGES = ("static", "load", "run", "determinism", "diversity", "reference", "discrimination",
          "constant_answer", "leak", "budget")
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
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")


class Rejected(Exception):
    def __init__(self, stage: str, reason: str):
        super().__init__(reason)
        self.stage = stage
        self.reason = " ".join(reason.split())[:400]


@dataclass
class Instance:
    seed: int
    difficulty: int
    instance: dict
    text: str = ""
    reference: str = ""


def _describe_failure(call: Call, r: CallResult, inst: Instance | None = None) -> str:
    where = f" at seed {inst.seed} difficulty {inst.difficulty}" if inst else ""
    what = {"timeout": "timed out", "crash": "crashed", "invalid": "returned a bad value",
            "error": "raised", "skipped": "was skipped"}.get(r.status, r.status)
    return f"{call.fn}{where} {what}: {r.error}"


def near_misses(reference: str, answer_type: str | None = None) -> list[str]:
    """Answers one small step from the reference: an integer +-1, a list with one element
    changed or reordered, a string with one character changed. ANSWER_TYPE picks the shape
    when the environment declares it; otherwise the reference's looks decide."""
    ref = reference.strip()
    if not ref:
        return []
    if answer_type in (None, "int") and _INT.fullmatch(ref):
        n = int(ref)
        return [str(n + 1), str(n - 1)]
    if answer_type in (None, "float") and _FLOAT.fullmatch(ref):
        x = float(ref)
        return [repr(x + 1.0), repr(x - 1.0)]
    tokens = [t for t in re.split(r"[,\s]+", ref) if t]
    if len(tokens) > 1 and answer_type != "str":
        sep = ", " if ", " in ref else ("," if "," in ref else " ")
        last = tokens[-1]
        changed = tokens[:-1] + [str(int(last) + 1) if _INT.fullmatch(last) else last + "x"]
        out = [sep.join(changed)]
        if tokens[::-1] != tokens:
            out.append(sep.join(tokens[::-1]))
        return out
    mid = len(ref) // 2
    swap = "b" if ref[mid] == "a" else "a"
    if ref[mid] in "01":
        swap = "1" if ref[mid] == "0" else "0"
    out = [ref[:mid] + swap + ref[mid + 1:]]
    if ref[::-1] != ref:
        out.append(ref[::-1])
    return out


def whole_token_in(needle: str, haystack: str) -> bool:
    needle = needle.strip()
    if not needle:
        return False
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(needle)}(?![A-Za-z0-9])", haystack) is not None


class Checker:
    """Runs the ten checks on one environment."""

    def __init__(self, env: EnvFile, cfg: ValidateConfig, pool: SandboxPool, fresh: SandboxPool):
        self.env, self.cfg, self.pool, self.fresh = env, cfg, pool, fresh
        self.m: dict = {}
        self.output_chars = 0
        self.times: dict[str, list[float]] = {}  # seconds per call kind at the top level tested

    def call(self, calls: list[Call], pool: SandboxPool | None = None, stop_on_failure: bool = True) -> list[CallResult]:
        """Every check rejects on the first failed call, so the rest of a batch after one is
        skipped rather than paid for (a looping solve costs one time limit, not thirty)."""
        results = (pool or self.pool).run(self.env, calls, stop_on_failure)
        top = max(self.cfg.levels)
        for c, r in zip(calls, results):
            self.output_chars += r.output_chars
            if r.ok and c.fn == "generate" and c.args[1] == top:
                self.times.setdefault("generate", []).append(r.seconds)
        return results

    def run(self) -> None:
        cfg = self.cfg
        # load
        try:
            meta = self.pool.describe(self.env)
        except EnvLoadError as exc:
            raise Rejected("load", str(exc)) from None
        self.answer_type = meta.get("ANSWER_TYPE")
        self.m["import_seconds"] = round(meta.get("import_seconds", 0.0), 4)
        self.output_chars += meta.get("import_output_chars", 0)

        # run: every call on every (seed, level); values are checked by the pool
        pairs = [(s, d) for d in cfg.levels for s in range(cfg.seeds_per_level)]
        planned = set(pairs)
        extra = [(s, d) for d in cfg.diversity_levels for s in range(cfg.diversity_seeds)
                 if (s, d) not in planned]
        gen_calls = [Call.generate(s, d) for s, d in pairs + extra]
        generated = self.call(gen_calls)
        for c, r in zip(gen_calls, generated):
            if not r.ok:
                raise Rejected("run", _describe_failure(c, r, Instance(c.args[0], c.args[1], {})))
        by_pair = {(c.args[0], c.args[1]): r.value for c, r in zip(gen_calls, generated)}
        insts = [Instance(s, d, by_pair[(s, d)]) for s, d in pairs]
        ps_calls = [c for i in insts for c in (Call.prompt(i.instance), Call.solve(i.instance))]
        ps = self.call(ps_calls)
        top = max(cfg.levels)
        for k, inst in enumerate(insts):
            for j in (0, 1):
                c, r = ps_calls[2 * k + j], ps[2 * k + j]
                if not r.ok:
                    raise Rejected("run", _describe_failure(c, r, inst))
                if inst.difficulty == top:
                    self.times.setdefault(c.fn, []).append(r.seconds)
            inst.text, inst.reference = ps[2 * k].value, ps[2 * k + 1].value
            if not inst.text.strip():
                raise Rejected("run", f"prompt is empty at seed {inst.seed} difficulty {inst.difficulty}")
        ref_calls = [Call.score(i.instance, i.reference) for i in insts]
        ref_scores = self.call(ref_calls)
        for c, r, inst in zip(ref_calls, ref_scores, insts):
            if not r.ok:
                raise Rejected("run", _describe_failure(c, r, inst))
            if inst.difficulty == top:
                self.times.setdefault("score", []).append(r.seconds)
        self.m["instances"] = len(insts)

        self.check_determinism(insts)
        self.check_diversity(by_pair)
        # reference
        bad = [(i, r.value) for i, r in zip(insts, ref_scores) if r.value != 1.0]
        self.m["reference_pass_share"] = round(1 - len(bad) / len(insts), 4)
        if bad:
            i, v = bad[0]
            raise Rejected("reference", f"score(instance, solve(instance)) = {v} at seed {i.seed} "
                           f"difficulty {i.difficulty} ({len(bad)}/{len(insts)} instances), expected 1.0")
        self.check_discrimination(insts)
        self.check_constant(insts)
        self.check_leak(insts)
        self.check_budget(insts)

    def check_determinism(self, insts: list[Instance]) -> None:
        step = max(1, len(insts) // self.cfg.determinism_pairs)
        chosen = insts[::step][: self.cfg.determinism_pairs]
        calls = [Call.generate(i.seed, i.difficulty) for i in chosen]
        twice = self.call(calls + calls)  # one batch: the same worker answers both rounds
        fresh = self.call(calls, pool=self.fresh)  # a new worker, another PYTHONHASHSEED
        for k, inst in enumerate(chosen):
            runs = {"again in one worker": twice[k], "a second time in one worker": twice[len(calls) + k],
                    "in a fresh worker with another hash seed": fresh[k]}
            for label, r in runs.items():
                if not r.ok:
                    raise Rejected("determinism", f"generate {label} failed at seed {inst.seed}: {r.error}")
                if r.value != inst.instance:
                    raise Rejected("determinism", f"generate(seed={inst.seed}, difficulty={inst.difficulty}) "
                                   f"gave a different instance {label}")
        ps_calls = [c for i in chosen for c in (Call.prompt(i.instance), Call.solve(i.instance))]
        again = self.call(ps_calls + ps_calls)
        fresh_ps = self.call(ps_calls, pool=self.fresh)
        n = len(ps_calls)
        for k, inst in enumerate(chosen):
            for j, expected, fn in ((0, inst.text, "prompt"), (1, inst.reference, "solve")):
                for r in (again[2 * k + j], again[n + 2 * k + j], fresh_ps[2 * k + j]):
                    if not r.ok or r.value != expected:
                        raise Rejected("determinism", f"{fn} of the instance at seed {inst.seed} "
                                       f"difficulty {inst.difficulty} changed between runs")
        self.m["determinism_pairs"] = len(chosen)

    def check_diversity(self, by_pair: dict) -> None:
        shares = {}
        for d in self.cfg.diversity_levels:
            seen = [json.dumps(by_pair[(s, d)], sort_keys=True) for s in range(self.cfg.diversity_seeds)]
            shares[d] = round(len(set(seen)) / len(seen), 4)
        self.m["distinct_instance_share"] = {str(d): v for d, v in shares.items()}
        low = [d for d, v in shares.items() if v < self.cfg.min_distinct_share]
        if low:
            d = low[0]
            raise Rejected("diversity", f"only {shares[d]:.0%} distinct instances over "
                           f"{self.cfg.diversity_seeds} seeds at difficulty {d} "
                           f"(need {self.cfg.min_distinct_share:.0%})")

    def check_discrimination(self, insts: list[Instance]) -> None:
        cfg = self.cfg
        probes: list[tuple[str, int, str]] = []  # (kind, instance index, answer)
        for k, inst in enumerate(insts):
            ref = inst.reference.strip()
            for kind, answer in FIXED_PROBES.items():
                if answer.strip() != ref or kind in ("empty", "whitespace"):
                    probes.append((kind, k, answer))
            if k < cfg.huge_probe_instances:
                probes.append(("huge", k, "7" * cfg.huge_probe_chars))
            same_level = [o for o in insts if o.difficulty == inst.difficulty and o is not inst]
            other = next((o.reference for o in same_level if o.reference.strip() != ref), None)
            if other is not None:
                probes.append(("other_reference", k, other))
            for miss in near_misses(inst.reference, self.answer_type):
                if miss.strip() != ref:
                    probes.append(("near_miss", k, miss))
        results = self.call([Call.score(insts[k].instance, a) for _, k, a in probes])
        tried: Counter = Counter()
        accepted: Counter = Counter()
        for (kind, k, _), r in zip(probes, results):
            if not r.ok:
                raise Rejected("discrimination", f"score failed on the {kind} probe at seed "
                               f"{insts[k].seed} difficulty {insts[k].difficulty} ({r.status}: {r.error}); "
                               "score must return a number for any string")
            tried[kind] += 1
            accepted[kind] += r.value >= 1.0
        shares = {kind: round(accepted[kind] / tried[kind], 4) for kind in tried}
        self.m["probe_accept_share"] = shares
        for kind, share in shares.items():
            limit = cfg.max_near_miss_accept_share if kind in ("near_miss", "other_reference") \
                else cfg.max_probe_accept_share
            if share > limit:
                raise Rejected("discrimination", f"score accepts the {kind} probe on {share:.0%} of "
                               f"instances (at most {limit:.0%} allowed)")

    def check_constant(self, insts: list[Instance]) -> None:
        common = [a for a, _ in Counter(i.reference for i in insts).most_common(3)]
        calls = [Call.score(i.instance, a) for a in common for i in insts]
        results = self.call(calls, stop_on_failure=False)
        best, best_share = "", 0.0
        for j, answer in enumerate(common):
            chunk = results[j * len(insts):(j + 1) * len(insts)]
            share = sum(1 for r in chunk if r.ok and r.value >= 1.0) / len(insts)
            if share > best_share:
                best, best_share = answer, share
        self.m["constant_answer_share"] = round(best_share, 4)
        if best_share > self.cfg.max_constant_share:
            shown = best if len(best) <= 40 else best[:37] + "..."
            raise Rejected("constant_answer", f"the answer {shown!r} is right on {best_share:.0%} of "
                           f"instances (at most {self.cfg.max_constant_share:.0%} allowed)")

    def check_leak(self, insts: list[Instance]) -> None:
        """The reference written in most prompts, and more often than other instances'
        references are: an answer that is one of the prompt's own labels (a SELECT composite's
        "B") appears in every prompt but tells the solver nothing."""
        leaked = sum(whole_token_in(i.reference, i.text) for i in insts)
        share = leaked / len(insts)
        others = [(i, o) for k, i in enumerate(insts) for o in insts[k + 1:k + 6]
                  if o.reference.strip() != i.reference.strip()]
        baseline = sum(whole_token_in(o.reference, i.text) for i, o in others) / len(others) if others else 0.0
        self.m["leak_share"] = round(share, 4)
        self.m["leak_baseline_share"] = round(baseline, 4)
        if share > self.cfg.max_leak_share and share - baseline > self.cfg.min_leak_excess:
            raise Rejected("leak", f"the reference answer is written in the prompt in {share:.0%} of "
                           f"instances (at most {self.cfg.max_leak_share:.0%} allowed), against "
                           f"{baseline:.0%} for other instances' answers")

    def check_budget(self, insts: list[Instance]) -> None:
        cfg = self.cfg
        medians = {fn: statistics.median(v) for fn, v in self.times.items() if v}
        self.m["seconds_at_top_level"] = {fn: round(v, 5) for fn, v in medians.items()}
        top = max(cfg.levels)
        size = max((len(json.dumps(i.instance)) for i in insts if i.difficulty == top), default=0)
        self.m["instance_bytes_at_top_level"] = size
        self.m["output_chars"] = self.output_chars
        for fn in ("generate", "prompt", "solve", "score"):
            budget = getattr(cfg, f"budget_{fn}_s")
            if medians.get(fn, 0.0) > budget:
                raise Rejected("budget", f"{fn} takes {medians[fn]:.2f} s at difficulty {top} "
                               f"(budget {budget} s)")
        if size > cfg.budget_instance_bytes:
            raise Rejected("budget", f"instance is {size} bytes at difficulty {top} "
                           f"(budget {cfg.budget_instance_bytes})")
        if self.output_chars > cfg.budget_output_chars:
            raise Rejected("budget", f"printed {self.output_chars} characters to stdout/stderr "
                           f"(budget {cfg.budget_output_chars}); an environment has no reason to print")


def judge(env: EnvFile, cfg: ValidateConfig, pool: SandboxPool, fresh: SandboxPool,
          static_name: str | None) -> Verdict:
    started = time.perf_counter()
    checker = Checker(env, cfg, pool, fresh)
    try:
        checker.run()
        stage, reason, admitted = "admitted", "passed all checks", True
    except Rejected as rej:
        stage, reason, admitted = rej.stage, rej.reason, False
    checker.m["wall_s"] = round(time.perf_counter() - started, 3)
    checker.m["sandbox"] = pool.plan.jail  # which jail judged it: bwrap, process+landlock, process
    return Verdict(env.path.name, env.env_id, static_name, admitted, stage, reason, checker.m)


def run(library: artifacts.EnvLibrary, cfg: ValidateConfig, runtime: RuntimeConfig, out: Path,
        on_verdict: Callable[[Verdict], None] | None = None, session: Runtime | None = None) -> Summary:
    """Judge every file of `library` into `out` (already prepared), resuming what is final;
    on `session`'s pools when given (left open), else on pools of its own."""
    with AdmissionLog(out, library.files) as log:
        def finish(verdict: Verdict) -> None:
            log.add(verdict)
            if on_verdict:
                on_verdict(verdict)

        # static checks and NAME uniqueness in file order, before anything runs
        names = {r["name"]: f for f, r in log.done.items() if r.get("admitted")}
        todo: list[tuple[EnvFile, str | None]] = []
        for env in log.pending():
            report = check_source(env.source, max_bytes=cfg.max_source_bytes)
            if not report.ok:
                finish(Verdict(env.path.name, env.env_id, report.name, False, "static", report.reason))
            elif report.name in names and names[report.name] != env.path.name:
                finish(Verdict(env.path.name, env.env_id, report.name, False, "load",
                               f"NAME {report.name!r} is already used by {names[report.name]}"))
            else:
                names[report.name] = env.path.name
                todo.append((env, report.name))
        if todo:
            with shared(runtime, session) as rt, ThreadPoolExecutor(max_workers=runtime.workers) as ex:
                pool, fresh = rt.pool, rt.fresh
                futures = [ex.submit(judge, env, cfg, pool, fresh, name) for env, name in todo]
                for f in futures:
                    finish(f.result())
        return log.finish("validate", STAGES, library,
                          {"validate": to_dict(cfg), "runtime": to_dict(runtime)})
