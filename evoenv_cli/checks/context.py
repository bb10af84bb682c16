"""What every validation check reads and writes: the `Checker` (one environment's judgement:
its file, the recipe's `validate` section, the pools, the instances `run` made, the
measurements that land in the verdict), the `Rejected` verdict a check raises, and the
seeds and probe answers more than one check uses. The checks themselves are the other
modules of this package, each registered in `checks/registry.py`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable
from dataclasses import dataclass

from evoenv_cli.checks.pay import FULL_PAY_ONLY, Chance
from evoenv_cli.checks.pay import PAID as PAID  # full pay: the checks read it from here as before
from evoenv_cli.checks.probes import Context
from evoenv_cli.config import SampleConfig, ValidateConfig
from evoenv_cli.runtime.instances import ASKED, Made, Order, instance_seed, make_instances
from evoenv_cli.runtime.workers import Call, CallResult, EnvFile, SandboxWorkers, describe_failure

TRAINING_SEEDS = 2**31  # `sample` and `calibrate` draw instance seeds below this
CONFIRM_INSTANCES = 120  # more instances for a leak solver or a constant answer over its limit
# ... and for one still neither surely over nor surely under its limits
MAX_CONFIRM_INSTANCES = 600
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


class Rejected(Exception):
    """The verdict of the check that failed. `cut` False keeps the reason as written (the
    static contract's reasons, which name the offending line, were never cut)."""

    def __init__(self, stage: str, reason: str, probe: str | None = None, *, cut: bool = True):
        super().__init__(reason)
        self.stage = stage
        reason = " ".join(reason.split())[:380] if cut else reason
        self.reason = f"{reason} [probe {probe}]" if probe and probe not in reason else reason
        self.probe = probe


def failed(check: str, fn: str, r: CallResult, seed: int | None = None, difficulty: int | None = None) -> Rejected:
    """The verdict of a failed call: `check`'s, except that a call stopped at the call time
    limit is over budget whichever check met it. The limit is far above the budget, so such a
    file is slow on any machine; which check's call crosses the limit first depends on the
    machine's load (a level-3 solve of 0.6 s was judged at `run`, `determinism` and `budget`
    on three loaded runs, 2026-12-06)."""
    return Rejected("budget" if r.status == "timeout" else check, describe_failure(fn, r, seed, difficulty))


def reject_failed(check: str, made: Made, needed: Iterable[str]) -> None:
    """Raise `failed`'s verdict for the first failed call of `made` among `needed`."""
    if bad := made.failed_call(needed):
        raise failed(check, bad[0], bad[1], made.seed, made.difficulty)


def reject_timeouts(batch: Iterable[tuple[Call, CallResult, Instance]]) -> None:
    """`budget` at the first of a batch's calls (with the instance each was about) that ran
    past the limit. Read over the whole batch before any value is compared: the pool skips an
    environment's calls after one that timed out, and a skipped repeat is no change between
    runs."""
    for call, r, inst in batch:
        if r.status == "timeout":
            raise failed("budget", call.fn, r, inst.seed, inst.difficulty)


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
    sandboxed checks of `CHECKS` (checks/registry.py) in order; a check that reads the source alone (`static`) runs
    on a Checker without workers, before any worker starts."""

    def __init__(
        self,
        env: EnvFile,
        cfg: ValidateConfig,
        workers: SandboxWorkers | None = None,
        fresh: SandboxWorkers | None = None,
    ):
        self.env, self.cfg, self.workers, self.fresh = env, cfg, workers, fresh
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
        self.more: list[Made] | None = None  # `more_instances`, once made
        self.diversity_pairs: dict[int, list[int]] = {}
        self.deadline = time.monotonic() + cfg.max_judge_seconds  # the whole judgement's wall budget
        self.running = "static"  # the check under way, which the budget names when it runs out
        # the chance pay `discrimination` measures (checks/pay.py); until then full pay alone pays
        self.chance: Chance = FULL_PAY_ONLY

    def paid(self, score: float, answer: str, reference: str) -> bool:
        """Whether `answer`, a wrong answer to an instance whose reference is `reference`, is
        paid by `score`: in full, or over the measured chance line (checks/pay.py)."""
        return self.chance.paid(score, answer, reference)

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
        self, calls: list[Call], workers: SandboxWorkers | None = None, stop_on_failure: bool = True
    ) -> list[CallResult]:
        """Every check rejects on the first failed call, so the rest of a batch after one is
        skipped rather than paid for (a looping solve costs one time limit, not thirty). The
        calls go in slices of what the workers run at once, the budget checked before each, so a
        judgement overruns it by one slice at most."""
        runner = workers or self.workers
        step = runner.limits.batch_size * runner.workers
        results: list[CallResult] = []
        for start in range(0, len(calls), step):
            self.within_budget()
            results += runner.run(self.env, calls[start : start + step], stop_on_failure)
        reject_escapes(zip(calls, results))
        for c, r in zip(calls, results):
            self.output_chars += r.output_chars
            if r.ok and c.fn == "generate":
                self.times.setdefault(("generate", c.args[1]), []).append(r.seconds)
        return results

    def make(self, orders: list[Order]) -> list[list[Made]]:
        """Instances through the one path every stage makes them by, counted like `call`."""
        self.within_budget()
        made = make_instances(self.workers, orders, stop_on_failure=True)
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
        # imported here, not above: loading the registry loads every check module, each of which
        # imports this one
        from evoenv_cli.checks.registry import checks

        for check in checks(sandboxed=True):
            self.running = check.name
            self.within_budget()
            check.run(self)
            self.within_budget()

    def spread(self, insts: list[Instance], n: int) -> list[Instance]:
        """n instances spread over the levels, a third of them (at least one) at the seeds
        `sample` derives when there are such."""
        drawn = [i for i in insts if (i.seed, i.difficulty) in self.sampled]
        taken = drawn[: min(len(drawn), max(1, n // 3))] if n > 1 else []
        rest = [i for i in insts if (i.seed, i.difficulty) not in self.sampled]
        step = max(1, len(rest) // max(1, n - len(taken)))
        return rest[::step][: n - len(taken)] + taken

    def more_instances(self, n: int = 0) -> list[Made]:
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
                reject_failed("run", m, ("generate", *ASKED))
            made = made + new
            self.more = made
        return made[:n]
