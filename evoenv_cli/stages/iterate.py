"""`evoenv iterate` (and `make iterate`): the self-evolving loop, one round after another, as one
program.

Round r, in RUN/round-NN/<stage>/:
  synthesize (policy = round r-1's checkpoint; round 1 = MODEL) -> validate -> review
  compose (on the pool, no LLM; composites are code built from admitted parts, so they skip
  the LLM review) -> candidates (review + compose, merged) -> dedupe (--against the pool: the
  cheap contract first, so no solver call is spent on a copy) -> calibrate -> rotate (pool
  members due for it re-calibrated against the policy) -> pool update (less what an earlier
  round's training quarantined: rewards a fresh worker's re-check disagreed with) -> sample ->
  train -> evaluate.

Every stage but train runs in this process, through the same `run()` its command calls: one
`Runtime` (the sandbox pools) serves them all and the reward, and one backend per policy is
loaded: round r's policy serves synthesize, review, calibrate and rotate, the trained one
serves evaluate and, still loaded, the next round's synthesize. Train is a child process (it
may need `accelerate launch` and a clean GPU); the policy is closed before it starts, and its
output streams to the terminal and to round-NN/train/log.txt. With `backend.kind: vllm_server`
the policy is a server the loop started (llm/served.py): closing it stops the server, so the
GPUs are free for training, and the trained checkpoint gets a server of its own.

Evaluation compares across rounds: RUN/eval-set/ is the starting pool, fixed at round 1 after
its calibration (its environments at the levels calibrated in band for the starting model;
one with none is left out), plus the recipe's benchmark files; the baseline (the starting
model) is measured once on it into RUN/baseline/ and reused by every round.

One level rule: a pool member never calibrated (every seed, at round 1) is due for rotation
at once, so it is calibrated before it trains; `sample`, `evaluate` and the rotation's kept
levels all read the calibrated levels through `conversations.levels_for`, and a member
measured with no level in band stays in the pool (until it retires) but is not drawn.

A stage is finished when its marker file exists (summary.json, metrics.json, ...). Killed at
any point and run again, the loop skips finished stages and resumes the one it was in, so
nothing finished is redone or lost. The pool lives in RUN/pool/ and is replaced by a plan
written first (round-NN/pool-next/ then round-NN/pool-update.json) and applied after; a rerun
finishes or undoes a swap a kill interrupted, then applies the plan again if it must.

RUN/log.txt: every line the loop prints, timed, and a line as each stage starts (what a log
file of the console lacks: the progress bars draw nothing there).

RUN/round-NN/loop.json: per stage its wall seconds, model loads (and their seconds), tokens
generated and sandbox calls, with the round's totals.

RUN/run-config.json keeps every resolved recipe the run was started with: rerun after an
edit, the loop says what changed and goes on with the new settings for the stages still to
run (a partly done stage refuses to resume under settings of its own that changed).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoenv_cli import artifacts
from evoenv_cli import config as cfgmod
from evoenv_cli.config import IterateConfig
from evoenv_cli.envfile import EnvFile
from evoenv_cli.reward_audit import QUARANTINE_FILE, quarantined_ids
from evoenv_cli.stages.train_progress import TRAIN_LOG

MARKERS = {
    "baseline": "metrics.json",
    "synthesize": "summary.json",
    "validate": "summary.json",
    "review": "summary.json",
    "compose": "summary.json",
    "calibrate": "summary.json",
    "dedupe": "summary.json",
    "rotate": "summary.json",
    "sample": "train.jsonl",
    "train": "train-manifest.json",
    "evaluate": "metrics.json",
}
LOOP_FILE = "loop.json"
LOG_FILE = "log.txt"  # RUN/log.txt: the loop's lines with their times, a start line per stage


class StageFailed(RuntimeError):
    pass


class Interrupted(KeyboardInterrupt):
    """Ctrl-C in the loop, with where it was (the stage and its partial results)."""

    def __init__(self, where: str):
        super().__init__(where)
        self.where = where


class _Quiet:
    """No progress display (a library caller, a test): the CLI passes a rich one."""

    def __init__(self, total: int | None = None, label: str = "", llm=None):
        pass

    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def advance(self, verdict) -> None:
        pass


class Policy:
    """The one loaded model of the loop: built when a stage first needs a model, kept while
    the next stage asks for the same one, closed when another is asked for (or before train)."""

    def __init__(self, make: Callable[[str], Any]):
        self.make = make
        self.name: str | None = None
        self.backend = None
        self.loads = 0
        self.load_s = 0.0
        self._tokens_before = 0  # generated by backends already closed

    def get(self, model: str):
        if self.backend is not None and self.name == model:
            return self.backend
        self.close()
        started = time.perf_counter()
        self.backend = self.make(model)
        self.load_s += time.perf_counter() - started
        self.loads += 1
        self.name = model
        return self.backend

    @property
    def tokens(self) -> int:
        return self._tokens_before + (getattr(self.backend, "generated_tokens", 0) if self.backend else 0)

    def close(self) -> None:
        if self.backend is not None:
            self._tokens_before += getattr(self.backend, "generated_tokens", 0)
            backend, self.backend, self.name = self.backend, None, None
            backend.close()


@dataclass
class Loop:
    run_dir: Path
    recipe: Path
    model: str
    cfg: IterateConfig
    seeds: Path
    log: Callable[[str], None] = print
    # (total, label, llm=None) -> a context manager with advance(verdict): the CLI's rich bars
    progress: Callable[..., Any] = _Quiet
    # model name -> an open Backend; default: the recipe's backend section with that model
    backend_factory: Callable[[str], Any] | None = None
    # the console is not a terminal (a log file): its progress bars draw nothing there, so each
    # stage's start line, otherwise only in RUN/log.txt, goes to the console too
    echo_notes: bool = False
    spec: Any = field(init=False)
    where: str = field(init=False, default="the loop's start")

    def __post_init__(self) -> None:
        self.spec = cfgmod.load_recipe(self.recipe)
        self.policy = Policy(self.backend_factory or self._make_backend)
        self.runtime = None
        self._benches = None
        self._say, self.log = self.log, self._log

    def _log(self, message: str) -> None:
        """A line on the console, and with its time in RUN/log.txt."""
        self._say(message)
        self._write_log(message)

    def note(self, message: str) -> None:
        """A progress line for RUN/log.txt (and the console when it is a log file)."""
        if self.echo_notes:
            self._say(message)
        self._write_log(message)

    def _write_log(self, message: str) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with (self.run_dir / LOG_FILE).open("a", encoding="utf-8") as f:
            f.writelines(f"{stamp} {line}\n" for line in message.splitlines())

    def _make_backend(self, model: str):
        from evoenv_cli.llm import backend_from_config

        cfg = self.spec.backend
        if cfg.kind == "vllm_server":  # a server per policy (llm/served.py): its log beside the rounds
            cfg = dataclasses.replace(cfg, options={"log_dir": str(self.run_dir / "serve"), **cfg.options})
        return backend_from_config(cfg, model=model)

    # -- folders ------------------------------------------------------------------------------------
    @property
    def pool(self) -> Path:
        return self.run_dir / "pool"

    @property
    def eval_set(self) -> Path:
        return self.run_dir / "eval-set"

    def init_pool(self) -> None:
        """RUN/pool/ as the last applied plan left it; from the seeds on a new run."""
        recover(self.pool)
        recover(self.eval_set)
        if (self.pool / "index.jsonl").exists():
            return
        plans = sorted(self.run_dir.glob("round-*/pool-next/index.jsonl"))
        if plans:  # a pool lost outside the loop: the last plan is what it was
            write_pool(self.pool, library_members(plans[-1].parent))
            return
        write_pool(self.pool, seed_members(self.seeds))

    def freeze_eval_set(self) -> None:
        """RUN/eval-set/: the starting pool (the seeds) at the levels round 1 calibrated them
        to, kept apart so that every round is measured on the same items (written once)."""
        if (self.eval_set / "index.jsonl").exists():
            return
        seeds = {e.env_id for e, _ in seed_members(self.seeds)}
        write_pool(self.eval_set, [(e, rec) for e, rec in library_members(self.pool) if e.env_id in seeds])

    # -- one stage -----------------------------------------------------------------------------------
    def stage(self, name: str, out: Path, book: RoundBook, body: Callable[..., Any], *args: Any) -> Path:
        """Run `body(*args)` unless the stage's marker says it is finished; book its costs."""
        if (out / MARKERS[name]).exists():
            self.log(f"  {name}: done")
            book.keep(name)
            return out
        self.where = f"{book.label} at {name} (partial results in {out})"
        self.note(f"  {name}: started ({out})")
        out.parent.mkdir(parents=True, exist_ok=True)
        before = self._counters()
        started = time.perf_counter()
        body(*args)
        book.add(name, time.perf_counter() - started, before, self._counters())
        return out

    def _counters(self) -> tuple[int, float, int, int]:
        calls = self.runtime.calls if self.runtime is not None else 0
        return self.policy.loads, self.policy.load_s, self.policy.tokens, calls

    def _admit(
        self, label: str, out: Path, total: int | None, settings: dict, run, llm=None, envs: bool = True
    ) -> dict:
        out_dir = artifacts.prepare_out_dir(
            out, resume=artifacts.holds_results(out), clean=False, envs=envs, settings=settings
        )
        with self.progress(total, label, llm=llm) as bar:
            record = run(out_dir, bar.advance).record()
        self.log(funnel_line(label, record, out_dir))
        return record

    # -- the stages, as their commands run them ------------------------------------------------------
    def synthesize(self, out: Path, policy: str, r: int) -> None:
        from evoenv_cli.stages import synthesize as stage

        s = self.spec
        cfg = cfgmod.override(s.synthesize, seed=r)
        wanted = {k: v for k, v in cfgmod.to_dict(cfg).items() if k not in ("n", "max_requests")}
        settings = cfgmod.stage_settings(
            synthesize=wanted, backend=cfgmod.llm_settings(s, None, policy), seeds=self.seeds, pools=[self.pool]
        )
        out_dir = artifacts.prepare_out_dir(out, resume=artifacts.holds_results(out), clean=False, settings=settings)
        seeds = artifacts.EnvLibrary.open(self.seeds)
        pools = [artifacts.EnvLibrary.open(self.pool, allow_empty=True)]
        llm = self.policy.get(policy)
        with self.progress(None, "synthesize", llm=llm):
            summary = stage.run(
                seeds,
                pools,
                cfg,
                llm,
                out_dir,
                policy,
                on_round=lambda have, asked: self.log(
                    f"  synthesize: {have} candidates from {asked} requests so far, asking for more"
                ),
            )
        self.log(f"  synthesize: {summary['candidates']} candidates from {summary['requests']} requests -> {out_dir}")

    def validate(self, lib_dir: Path, out: Path) -> None:
        from evoenv_cli.stages import validate as stage

        s = self.spec
        lib = artifacts.EnvLibrary.open(lib_dir, allow_empty=True)
        self._admit(
            "validate",
            out,
            len(lib.files),
            cfgmod.stage_settings(validate=s.validate, limits=s.runtime.limits),
            lambda o, adv: stage.run(lib, s.validate, s.runtime, o, on_verdict=adv, session=self.runtime),
        )

    def review(self, lib_dir: Path, out: Path, policy: str) -> None:
        from evoenv_cli.stages import review as stage

        s = self.spec
        lib = artifacts.EnvLibrary.open(lib_dir, allow_empty=True)
        settings = cfgmod.stage_settings(
            review=s.review, backend=cfgmod.llm_settings(s, None, policy), limits=s.runtime.limits
        )
        llm = self.policy.get(policy)
        self._admit(
            "review",
            out,
            len(lib.files),
            settings,
            lambda o, adv: stage.run(lib, s.review, s.runtime, llm, o, policy, on_verdict=adv, session=self.runtime),
            llm=llm,
        )

    def compose(self, out: Path, r: int) -> None:
        from evoenv_cli.stages import compose as stage

        s = self.spec
        cfg = cfgmod.override(s.compose, seed=r)
        lib = artifacts.EnvLibrary.open(self.pool)
        self._admit(
            "compose",
            out,
            cfg.n,
            cfgmod.stage_settings(compose=cfg, validate=s.validate, limits=s.runtime.limits),
            lambda o, adv: stage.run(lib, cfg, s.validate, s.runtime, o, on_verdict=adv, session=self.runtime),
        )

    def dedupe(self, lib_dir: Path, out: Path) -> None:
        from evoenv_cli.stages import dedupe as stage

        s = self.spec
        stage.check_config(s.dedupe)
        lib = artifacts.EnvLibrary.open(lib_dir, allow_empty=True)
        pools = [artifacts.EnvLibrary.open(self.pool, allow_empty=True)]
        self._admit(
            "dedupe",
            out,
            len(lib.files),
            cfgmod.stage_settings(dedupe=s.dedupe, limits=s.runtime.limits, against=[self.pool]),
            lambda o, adv: stage.run(
                lib, s.dedupe, s.runtime, o, pools, on_verdict=adv, note=self.note, session=self.runtime
            ),
        )

    def calibrate(self, label: str, lib_dir: Path, out: Path, policy: str) -> None:
        from evoenv_cli.stages import calibrate as stage

        s = self.spec
        lib = artifacts.EnvLibrary.open(lib_dir, allow_empty=True)
        settings = cfgmod.stage_settings(
            calibrate=s.calibrate,
            prompts=cfgmod.prompt_settings(s),
            backend=cfgmod.llm_settings(s, None, policy),
            limits=s.runtime.limits,
        )
        llm = self.policy.get(policy)
        self._admit(
            label,
            out,
            len(lib.files),
            settings,
            lambda o, adv: stage.run(
                lib,
                s.calibrate,
                s.sample,
                s.runtime,
                llm,
                o,
                policy,
                on_verdict=adv,
                session=self.runtime,
                answer=s.answer,
            ),
            llm=llm,
        )

    def sample(self, out: Path, r: int) -> None:
        from evoenv_cli.stages import sample as stage

        cfg = cfgmod.override(self.spec.sample, difficulty_from="index", seed=r)
        lib = artifacts.EnvLibrary.open(self.pool)
        lib.check_python()
        stage.check_config(cfg, lib)
        out.mkdir(parents=True, exist_ok=True)
        report = stage.run(
            lib, cfg, self.runtime.pool, answer=self.spec.answer, format_weight=self.spec.reward.format_weight
        )
        if not report.rows:  # an empty train.jsonl: the round trains nothing (see skip_training)
            artifacts.write_jsonl_atomic(out / "train.jsonl", [])
            self.log(
                f"  sample: no pool environment has a level calibrated in band and above chance for this "
                f"policy ({len(report.skipped)} skipped; their calibration is in {self.pool / 'index.jsonl'}): "
                "nothing to train on this round"
            )
            return
        rows = (stage.to_format(row, cfg.format, i, cfg.split) for i, row in enumerate(report.rows))
        n = artifacts.write_jsonl_atomic(out / "train.jsonl", rows)
        self.log(
            f"  sample: {n} rows from {len(report.per_env)} environments ({len(report.skipped)} skipped) "
            f"-> {out / 'train.jsonl'}"
        )

    def train(self, data: Path, out: Path, policy: str) -> None:
        """The child process, its output shown here and kept in out/log.txt."""
        self.policy.close()  # the trainer gets the memory (and the GPU) the policy held
        argv = [
            *self.train_launch(),
            "-m",
            "evoenv_cli",
            "train",
            str(data),
            "--library",
            str(self.pool),
            "--model",
            policy,
            "--out",
            str(out),
            "--config",
            str(self.recipe),
            "--resume",
            # the next round's policy must be a model vLLM and transformers load, not an adapter
            *(["--merge-lora"] if self.spec.train.lora else []),
        ]  # a folder with no checkpoint yet (log.txt only) starts from the start
        out.mkdir(parents=True, exist_ok=True)
        log_path = out / TRAIN_LOG  # where the child appends TRL's raw numbers too
        self.log(f"  train: started, a line per step (TRL's numbers in {log_path})")
        self.note(f"  $ {shlex.join(argv)}")
        # torch's threads as this process has them: every core unless OMP_NUM_THREADS is set
        code = stream(argv, log_path, self.train_env())
        if code != 0:
            raise StageFailed(f"train failed (exit {code}); its output is in {log_path}")

    def train_launch(self) -> list[str]:
        """The train command's prefix: this interpreter, or the recipe's launcher (`accelerate
        launch ...`) taken from beside this interpreter first, where the environment evoenv is
        installed in keeps it even when that environment is not on PATH. With
        `train.accelerate_config`, accelerate gets that file (`--config_file`)."""
        config = self.spec.train.accelerate_config
        if not self.cfg.train_launch:
            if config:
                raise artifacts.InputError(
                    f"{self.recipe}: train.accelerate_config needs iterate.train_launch: "
                    "'accelerate launch --num_processes N' (N: the GPUs to train on)"
                )
            return [sys.executable]
        words = shlex.split(self.cfg.train_launch)
        if config:
            if words[:2] != ["accelerate", "launch"] and Path(words[0]).name != "accelerate":
                raise artifacts.InputError(
                    f"{self.recipe}: train.accelerate_config is a config for `accelerate launch`, "
                    f"but iterate.train_launch runs {words[0]!r}"
                )
            from evoenv_cli.accelerate_configs import config_path

            at = words.index("launch") + 1 if "launch" in words else len(words)
            words[at:at] = ["--config_file", str(config_path(config))]
        if "/" not in words[0] and Path(sys.executable).with_name(words[0]).is_file():
            return [str(Path(sys.executable).with_name(words[0])), *words[1:]]
        if shutil.which(words[0]) is None:
            raise artifacts.InputError(
                f"{self.recipe}: iterate.train_launch: {words[0]!r} is neither beside "
                f"{sys.executable} nor on PATH (install it where evoenv is installed)"
            )
        return words

    def train_env(self) -> dict[str, str]:
        """The train child's environment: this one, pinned to one GPU when training is one
        process (no launcher, or `--num_processes 1`), so a single-GPU recipe on a box with
        several cards uses the first visible one instead of spreading the model over all."""
        env = dict(os.environ)
        if launch_processes(self.cfg.train_launch) == 1:
            visible = env.get("CUDA_VISIBLE_DEVICES")
            env["CUDA_VISIBLE_DEVICES"] = visible.split(",")[0].strip() if visible else "0"
        return env

    def benches(self) -> list:
        from evoenv_cli.stages import evaluate as stage

        if self._benches is None:
            stage.check_config(self.spec.evaluate)
            self._benches = stage.load_benches(self.cfg.bench, seed=self.spec.evaluate.seed)
        return self._benches

    def evaluate(self, out: Path, policy: str, baseline: dict | None, role: str = "evaluate") -> None:
        from evoenv_cli.stages import evaluate as stage

        s = self.spec
        benches = self.benches()
        settings = cfgmod.stage_settings(
            evaluate=s.evaluate,
            prompts=cfgmod.prompt_settings(s),
            backend=cfgmod.llm_settings(s, None, policy),
            baseline=(baseline or {}).get("model"),
            library=self.eval_set,
            bench=list(self.cfg.bench),
            limits=s.runtime.limits,
        )
        out_dir = artifacts.prepare_out_dir(
            out, resume=False, clean=artifacts.holds_results(out), envs=False, settings=settings
        )
        lib = artifacts.EnvLibrary.open(self.eval_set)
        llm = self.policy.get(policy)
        with self.progress(None, role, llm=llm):
            metrics = stage.run(
                out_dir,
                s.evaluate,
                stage.ModelSpec(policy, backend=llm),
                library=lib,
                benches=benches,
                sample_cfg=s.sample,
                answer=s.answer,
                runtime=s.runtime,
                note=self.log,
                session=self.runtime,
                baseline_results=baseline,
            )
        shown = " ".join(f"{k}={v:.3f}" for k, v in headline(metrics).items() if isinstance(v, float))
        self.log(f"  {role}: {shown or '-'} -> {out_dir}")

    def baseline(self, book: RoundBook) -> dict | None:
        """The starting model's numbers on the evaluation set, measured once per run."""
        if not self.cfg.baseline:
            return None
        out = self.run_dir / "baseline"
        if not (out / MARKERS["baseline"]).exists():
            self.stage("baseline", out, book, self.evaluate, out, self.model, None, "baseline")
        metrics = read_json(out / "metrics.json")
        return {k: metrics.get(k) for k in ("model", "overall", "environments", "benchmarks")}

    # -- the pool ------------------------------------------------------------------------------------
    def quarantined(self) -> dict[str, dict]:
        """Environments whose rewards disagreed with a re-check in a fresh worker, in any
        round's training so far: never in the pool again."""
        return quarantined_ids(sorted(self.run_dir.glob(f"round-*/train/{QUARANTINE_FILE}")))

    def plan_pool(self, d: Path, rotated: Path | None, admitted: Path, r: int) -> dict:
        """round-NN/pool-next/ (the pool after this round) and pool-update.json, written before
        anything in RUN/pool/ changes: pool members the rotation did not retire, plus the
        round's admitted newcomers, less the environments an earlier round's training
        quarantined."""
        plan = d / "pool-update.json"
        if plan.exists():
            return read_json(plan)
        old = artifacts.EnvLibrary.open(self.pool, allow_empty=True)
        quarantine = self.quarantined()
        verdicts = {v["env_id"]: v for v in artifacts.read_jsonl(rotated / "verdicts.jsonl")} if rotated else {}
        rot_index = {x["env_id"]: x for x in artifacts.read_jsonl(rotated / "index.jsonl")} if rotated else {}
        members, retired, dropped = [], [], []
        for env in old.files:
            if env.env_id in quarantine:
                dropped.append({"name": env.name, "reason": quarantine[env.env_id].get("reason")})
                continue
            v = verdicts.get(env.env_id, {})
            if str(v.get("stage", "")).startswith("retired_"):
                retired.append({"name": env.name, "stage": v["stage"], "reason": v.get("reason")})
                continue
            record = old.index.get(env.env_id, {})
            if env.env_id in rot_index:
                record = dict(rot_index[env.env_id], measured_round=r)
            elif v.get("curve"):  # measured out of band, not retired yet: kept, but not drawn (no level)
                calibration = {"curve": v["curve"], "levels": [], "band": v.get("band"), "misses": v.get("misses", 1)}
                record = dict(record, calibration=calibration, measured_round=r)
            # a member the solver could not be measured on (no answers, a failed call) stays as it was
            members.append((env, record))
        new = artifacts.EnvLibrary.open(admitted, allow_empty=True)
        have = {e.env_id for e, _ in members}
        joined = []
        for env in new.files:
            if env.env_id not in have and env.env_id not in quarantine:
                members.append((env, dict(new.index.get(env.env_id, {}), joined_round=r, measured_round=r)))
                joined.append(env.name)
        write_pool(d / "pool-next", members)
        change = {"pool_size": len(members), "joined": joined, "retired": retired, "quarantined": dropped}
        artifacts.write_json_atomic(plan, change)
        return change

    def apply_pool(self, d: Path) -> None:
        """RUN/pool/ made what round-NN/pool-next/ says (a no-op when it already is)."""
        planned = d / "pool-next"
        if not (planned / "index.jsonl").exists():  # a run from before plans were kept: applied then
            return
        if (self.pool / "index.jsonl").exists() and (self.pool / "index.jsonl").read_bytes() == (
            planned / "index.jsonl"
        ).read_bytes():
            return
        write_pool(self.pool, library_members(planned))

    def rotation_due(self, d: Path, r: int) -> Path | None:
        """The pool members never calibrated (the seeds, at round 1) and those whose last
        measurement is `iterate.rotate_every` rounds old or more, as a library
        (round-NN/rotate-due/); None when none is due."""
        out = d / "rotate-due"
        if (out / "index.jsonl").exists():
            return out if artifacts.EnvLibrary.open(out, allow_empty=True).files else None
        lib = artifacts.EnvLibrary.open(self.pool, allow_empty=True)
        every = self.cfg.rotate_every
        due = [
            (e, lib.index.get(e.env_id, {}))
            for e in lib.files
            if not calibrated(lib.index.get(e.env_id, {}))  # never calibrated: before it trains
            or r - int(lib.index.get(e.env_id, {}).get("measured_round", 0)) >= every
        ]
        write_pool(out, due)
        return out if due else None


@dataclass
class RoundBook:
    """RUN/round-NN/loop.json: what each stage of a round cost, kept over restarts."""

    path: Path
    label: str
    stages: dict = field(default_factory=dict)

    @classmethod
    def open(cls, d: Path, label: str) -> RoundBook:
        return cls(d / LOOP_FILE, label, read_json(d / LOOP_FILE).get("stages", {}))

    def keep(self, name: str) -> None:
        self.stages.setdefault(name, {"wall_s": None, "note": "finished before this run"})

    def add(self, name: str, wall: float, before: tuple, after: tuple) -> None:
        loads, load_s, tokens, calls = (a - b for a, b in zip(after, before))
        self.stages[name] = {
            "wall_s": round(wall, 3),
            "model_loads": loads,
            "load_s": round(load_s, 3),
            "tokens": tokens,
            "sandbox_calls": calls,
        }
        self.write()

    def add_child(self, name: str, wall: float, manifest: dict) -> None:
        """A stage that ran as a child process: one model load, its seconds as it measured them."""
        timings = manifest.get("timings") or {}
        self.stages[name] = {
            "wall_s": round(wall, 3),
            "model_loads": 1,
            "load_s": timings.get("load_s"),
            "tokens": None,
            "sandbox_calls": timings.get("sandbox_calls"),
            "process": "child",
        }
        self.write()

    def totals(self) -> dict:
        measured = [s for s in self.stages.values() if s.get("wall_s") is not None]

        def total(key: str):
            return sum(s.get(key) or 0 for s in measured)

        wall, load = total("wall_s"), total("load_s")
        return {
            "wall_s": round(wall, 3),
            "model_loads": total("model_loads"),
            "load_s": round(load, 3),
            "load_share": round(load / wall, 4) if wall else None,
            "tokens": total("tokens"),
            "sandbox_calls": total("sandbox_calls"),
            "stages_finished_before": sum(s.get("wall_s") is None for s in self.stages.values()),
        }

    def write(self) -> None:
        artifacts.write_json_atomic(self.path, {"stages": self.stages, "totals": self.totals()})


def launch_processes(train_launch: str) -> int | None:
    """How many training processes a train_launch prefix starts: 1 for none (a plain child),
    the `--num_processes` it names, or None when the launcher decides (every visible GPU)."""
    if not train_launch:
        return 1
    words = shlex.split(train_launch)
    for i, w in enumerate(words):
        for flag in ("--num_processes", "--num-processes", "--nproc_per_node", "--nproc-per-node"):
            if w == flag and i + 1 < len(words) and words[i + 1].isdigit():
                return int(words[i + 1])
            if w.startswith(flag + "=") and w.split("=", 1)[1].isdigit():
                return int(w.split("=", 1)[1])
    return None


def drop_checkpoints(train_dir: Path) -> None:
    """A finished round's trainer checkpoints (weights again, plus optimizer and scheduler
    state, several times the model's size) go once its final model is written: they serve
    only to resume that round's training, and the next round starts from the final model."""
    checkpoints = train_dir / "checkpoints"
    if (train_dir / MARKERS["train"]).exists() and checkpoints.is_dir():
        shutil.rmtree(checkpoints)


def stream(argv: list[str], log_path: Path, env: dict) -> int:
    """Run `argv`, its output (stdout and stderr together) copied as it comes to this stderr
    and appended to `log_path`. Ctrl-C reaches the child too (same process group); this waits
    for it to stop, then raises KeyboardInterrupt."""
    with log_path.open("ab") as log:
        log.write(f"$ {shlex.join(argv)}\n".encode())
        log.flush()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        try:
            while chunk := proc.stdout.read1(1 << 16):
                log.write(chunk)
                log.flush()
                sys.stderr.buffer.write(chunk)
                sys.stderr.flush()
            return proc.wait()
        except KeyboardInterrupt:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise
        finally:
            proc.stdout.close()


# -- pool folders ------------------------------------------------------------------------------------
def recover(pool: Path) -> None:
    """Finish or undo a `write_pool` swap a kill interrupted. The new copy is complete once its
    index.jsonl exists (written last): with no `pool` left, that copy rolls forward, else the
    old one rolls back. Leftovers beside a pool that exists are dropped."""
    new, old = pool.with_name(pool.name + ".new"), pool.with_name(pool.name + ".old")
    if not pool.exists():
        if (new / "index.jsonl").exists():
            new.rename(pool)
        elif old.exists():
            old.rename(pool)
    shutil.rmtree(new, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)


def write_pool(pool: Path, members: list[tuple[EnvFile, dict]]) -> None:
    """Replace a library folder: build it complete beside (pool.new, index.jsonl last), move
    the old one aside (pool.old), move the new one in, drop the old. A kill at any step leaves
    what `recover` completes or undoes."""
    recover(pool)
    tmp = pool.with_name(pool.name + ".new")
    (tmp / "envs").mkdir(parents=True)
    index = []
    for env, record in members:
        (tmp / "envs" / env.path.name).write_bytes(env.source)
        index.append({**record, "file": env.path.name, "env_id": env.env_id, "name": record.get("name") or env.name})
    artifacts.write_jsonl_atomic(tmp / "index.jsonl", index)
    old = pool.with_name(pool.name + ".old")
    if pool.exists():
        pool.rename(old)
    tmp.rename(pool)
    shutil.rmtree(old, ignore_errors=True)


def calibrated(record: dict) -> bool:
    """Whether a pool member's levels were measured (its calibration has a curve)."""
    return bool((record.get("calibration") or {}).get("curve"))


def library_members(lib_dir: Path) -> list[tuple[EnvFile, dict]]:
    lib = artifacts.EnvLibrary.open(lib_dir, allow_empty=True)
    return [(e, lib.index.get(e.env_id, {})) for e in lib.files]


def seed_members(seeds: Path) -> list[tuple[EnvFile, dict]]:
    lib = artifacts.EnvLibrary.open(seeds)
    return [
        (
            e,
            {
                "file": e.path.name,
                "env_id": e.env_id,
                "name": e.name,
                "origin": "seed",
            },
        )
        for e in lib.files
    ]


def merge_libraries(out: Path, sources: list[Path]) -> Path:
    """One library (envs/ + index.jsonl) from several stage outputs; first source wins a name."""
    recover(out)
    if (out / "index.jsonl").exists():
        return out
    members, names = [], set()
    for src in sources:
        lib = artifacts.EnvLibrary.open(src, allow_empty=True)
        for env in lib.files:
            if env.path.name not in names:
                names.add(env.path.name)
                members.append((env, lib.index.get(env.env_id, {})))
    write_pool(out, members)
    return out


def skip_training(train_dir: Path, policy: str) -> None:
    """A round whose sample drew nothing (no pool environment in band and above chance for this
    policy) trains nothing: its marker says so and names the policy that carries over, so the
    evaluation, the next round and a resumed run all use it. Training on levels where the policy
    answers no better than guessing would teach noise (calibrate's chance test)."""
    train_dir.mkdir(parents=True, exist_ok=True)
    summary = {
        "stage": "train",
        "steps": 0,
        "skipped": "no environment drawable",
        "policy": policy,
        "signal": "skipped",
    }
    artifacts.write_json_atomic(train_dir / MARKERS["train"], {"summary": summary})


def policy_of(train_dir: Path) -> str:
    summary = read_json(train_dir / MARKERS["train"]).get("summary", {})  # {} when there is no marker yet
    if summary.get("skipped"):
        return summary["policy"]
    merged = train_dir / "merged"
    return str(merged if (merged / "config.json").exists() else train_dir)


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def record_recipe(loop: Loop, from_round: int) -> str:
    """Add the resolved recipe to RUN/run-config.json unless it is the one recorded last;
    say what changed. Returns its hash."""
    settings = {"recipe": cfgmod.to_dict(loop.spec), "model": loop.model, "seeds": str(loop.seeds)}
    digest = artifacts.config_hash(settings)
    path = loop.run_dir / artifacts.RUN_CONFIG
    history = read_json(path).get("history", [])
    if history and history[-1].get("config_hash") == digest:
        return digest
    if history:
        changes = artifacts.settings_changes(history[-1].get("settings", {}), settings)
        shown = "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")
        loop.log(
            f"the settings changed since this run was started ({shown}): finished stages keep "
            f"their results, the stages still to run use the new ones (both are recorded in {path})"
        )
    history.append(
        {"config_hash": digest, "from_round": from_round, "recorded": artifacts.now_iso(), "settings": settings}
    )
    artifacts.write_json_atomic(path, {"config_hash": digest, "history": history})
    return digest


def run(loop: Loop, rounds: int) -> list[dict]:
    """Rounds 1..`rounds`, each finished one skipped. Ctrl-C raises `Interrupted` (saying
    where); the sandbox pools and the policy are closed on every way out."""
    from evoenv_cli.runtime.session import Runtime

    loop.run_dir.mkdir(parents=True, exist_ok=True)
    loop.runtime = Runtime(loop.spec.runtime)
    try:
        return _rounds(loop, rounds)
    except KeyboardInterrupt:
        raise Interrupted(loop.where) from None
    finally:
        loop.policy.close()
        loop.runtime.close()


def _rounds(loop: Loop, rounds: int) -> list[dict]:
    cfg = loop.cfg
    loop.init_pool()
    summaries = artifacts.read_jsonl_tolerant(loop.run_dir / "rounds.jsonl")
    done_rounds = {s["round"] for s in summaries}
    digest = record_recipe(loop, min(set(range(1, rounds + 2)) - done_rounds))
    policy = loop.model
    for r in range(1, rounds + 1):
        d = loop.run_dir / f"round-{r:02d}"
        if r in done_rounds:
            policy = policy_of(d / "train")
            loop.log(f"round {r}: done")
            continue
        loop.log(f"round {r}: policy {policy}")
        book = RoundBook.open(d, f"round {r}")
        d.mkdir(parents=True, exist_ok=True)
        syn = loop.stage("synthesize", d / "synthesize", book, loop.synthesize, d / "synthesize", policy, r)
        val = loop.stage("validate", d / "validate", book, loop.validate, syn, d / "validate")
        rev = loop.stage("review", d / "review", book, loop.review, val, d / "review", policy)
        comp = loop.stage("compose", d / "compose", book, loop.compose, d / "compose", r)
        cands = merge_libraries(d / "candidates", [rev, comp])
        ded = loop.stage("dedupe", d / "dedupe", book, loop.dedupe, cands, d / "dedupe")
        cal = loop.stage("calibrate", d / "calibrate", book, loop.calibrate, "calibrate", ded, d / "calibrate", policy)
        rotated = None
        if not (d / "pool-update.json").exists():
            due = loop.rotation_due(d, r)
            if due is not None:
                rotated = loop.stage("rotate", d / "rotate", book, loop.calibrate, "rotate", due, d / "rotate", policy)
            else:
                loop.log(f"  rotate: no pool member is due (iterate.rotate_every={cfg.rotate_every})")
        pool_change = loop.plan_pool(d, rotated, cal, r)
        loop.apply_pool(d)
        dropped = len(pool_change.get("quarantined", []))
        loop.log(
            f"  pool: {pool_change['pool_size']} environments (+{len(pool_change['joined'])} "
            f"-{len(pool_change['retired'])}{f', {dropped} quarantined dropped' if dropped else ''}) "
            f"-> {loop.pool}"
        )
        loop.freeze_eval_set()  # round 1: the seeds are calibrated now
        baseline = loop.baseline(book)
        data = d / "sample" / "train.jsonl"
        loop.stage("sample", d / "sample", book, loop.sample, d / "sample", r)
        train = d / "train"
        if (train / MARKERS["train"]).exists():
            loop.log("  train: done")
            book.keep("train")
        elif data.stat().st_size == 0:
            skip_training(train, policy)
            loop.log(f"  train: skipped, no environment to train on; the policy carries over ({policy})")
        else:
            loop.where = f"round {r} at train (partial results in {train})"
            started = time.perf_counter()
            loop.train(data, train, policy)
            book.add_child("train", time.perf_counter() - started, read_json(train / MARKERS["train"]))
        drop_checkpoints(train)
        policy = policy_of(train)
        loop.stage("evaluate", d / "evaluate", book, loop.evaluate, d / "evaluate", policy, baseline)
        book.write()
        summary = round_summary(r, d, pool_change, digest)
        artifacts.JsonlAppender(loop.run_dir / "rounds.jsonl").append(summary)
        loop.log(round_line(summary, book.totals(), str(loop.run_dir / "rounds.jsonl")))
        if summary["candidates"] == 0:
            loop.log(
                f"  round {r}: the policy wrote no usable environment (a small or random "
                "model rarely does); the pool's seeds and composites carried the round"
            )
    return artifacts.read_jsonl_tolerant(loop.run_dir / "rounds.jsonl")


def funnel_line(label: str, record: dict, out: Path) -> str:
    """An admission stage's result in one line: entered, admitted, what rejected the rest."""
    rejected = ", ".join(f"{k}={v}" for k, v in record.get("rejected_by_stage", {}).items() if v)
    unc = record.get("admitted_uncalibrated")
    return (
        f"  {label}: {record['entered']} entered, {record['admitted']} admitted"
        + (f" ({unc} uncalibrated)" if unc else "")
        + (f"; rejected {rejected}" if rejected else "")
        + f" -> {out}"
    )


def round_summary(r: int, d: Path, pool_change: dict, config_hash: str | None = None) -> dict:
    """The round's numbers (no timings: those are in loop.json). `admitted.calibrate` counts
    what the difficulty contract measured in band; `admitted.uncalibrated`, what it let
    through unmeasured (no answers to score)."""
    syn = read_json(d / "synthesize" / "summary.json")
    admitted = {}
    for s in ("validate", "review", "compose", "dedupe", "calibrate"):
        summary = read_json(d / s / "summary.json")
        admitted[s] = summary.get("admitted")
        if s == "calibrate" and admitted[s] is not None:
            admitted["uncalibrated"] = summary.get("admitted_uncalibrated", 0)
            admitted[s] -= admitted["uncalibrated"]
    train = read_json(d / "train" / "train-manifest.json").get("summary", {})
    metrics = read_json(d / "evaluate" / "metrics.json")
    return {
        "round": r,
        "candidates": syn.get("candidates", 0),
        "admitted": admitted,
        "pool_size": pool_change.get("pool_size"),
        "joined": len(pool_change.get("joined", [])),
        "retired": len(pool_change.get("retired", [])),
        "quarantined": len(pool_change.get("quarantined", [])),
        "train_steps": train.get("steps"),
        "mean_train_reward": train.get("mean_reward"),
        "train_weights_unchanged": bool(train.get("all_groups_zero_variance")),
        # "score" | "format only" (every environment score tied) | "none" (the weights did not change)
        # | "skipped" (nothing to train on: skip_training)
        "signal": train.get("signal") or ("none" if train.get("all_groups_zero_variance") else None),
        "evaluation": headline(metrics),
        "config_hash": config_hash,
    }


def headline(metrics: dict) -> dict:
    """The evaluation numbers worth a line: pass@1 overall with its item count and 95%
    interval, on held-out environment instances and on benchmark files, and the overall change
    against the baseline."""
    overall = metrics.get("overall") or {}
    out = {
        "pass@1": overall.get("pass@1"),
        "items": overall.get("items"),
        "ci95": overall.get("ci95"),
        "env_pass@1": overall.get("env_mean"),
        "bench_pass@1": overall.get("bench_mean"),
    }
    delta = metrics.get("delta") or {}
    if isinstance(delta, dict) and "overall pass@1" in delta:
        out["delta_vs_baseline"] = delta["overall pass@1"]
    return {k: v for k, v in out.items() if v is not None}


def round_line(s: dict, totals: dict | None = None, where: str = "rounds.jsonl") -> str:
    """The round in words a newcomer can read without the README: did the policy get better,
    where the new environments came from, what training had to learn from. Three short
    lines; every number and the machine costs stay in rounds.jsonl and loop.json."""
    from evoenv_cli.stages.train_progress import duration

    ev = s.get("evaluation") or {}
    took = f" in {duration(totals['wall_s'])}" if totals and totals.get("wall_s") else ""
    p, ci, delta = ev.get("pass@1"), ev.get("ci95"), ev.get("delta_vs_baseline")
    if isinstance(p, float):
        result = f"held-out pass@1 {p:.3f}"
        if ci:
            result += f" (95% interval {ci[0]:.3f}-{ci[1]:.3f}, {ev.get('items')} items)"
        if isinstance(delta, float):
            result += f", {p - delta:.3f} before training: {delta:+.3f}"
    else:
        result = "no evaluation"
    adm = s.get("admitted") or {}

    def count(key: str) -> str:
        return "-" if adm.get(key) is None else str(adm[key])

    unmeasured = f" ({adm['uncalibrated']} let in unmeasured)" if adm.get("uncalibrated") else ""
    gone = "".join(
        f", -{n} {what}" for what, n in (("retired", s.get("retired")), ("quarantined", s.get("quarantined"))) if n
    )
    envs = (
        f"  new environments: the model wrote {s.get('candidates', 0)} that parsed "
        f"({count('review')} passed review), composition made {count('compose')}; "
        f"{count('dedupe')} were new, {count('calibrate')} had the right difficulty{unmeasured}; "
        f"pool {s.get('pool_size')} (+{s.get('joined', 0)} joined{gone})"
    )
    signal = s.get("signal") or ("none" if s.get("train_weights_unchanged") else None)
    reward = s.get("mean_train_reward")
    learned = {
        "none": "nothing to learn from: every group's answers scored the same (weights unchanged)",
        "format only": "format only: the scores tied in every group, so at most it learned the answer format",
        "score": "the scores differed within groups, so it learned from them",
        "skipped": "no training: no environment in band and above chance for this policy, which carries over",
    }.get(signal or "", "")
    train = (
        f"  training: {s.get('train_steps') if s.get('train_steps') is not None else '-'} steps, "
        f"mean reward {reward if reward is not None else '-'}{'; ' + learned if learned else ''}"
        f" (all numbers: {where})"
    )
    return f"round {s['round']} done{took}: {result}\n{envs}\n{train}"


__all__ = [
    "Interrupted",
    "Loop",
    "Policy",
    "RoundBook",
    "StageFailed",
    "merge_libraries",
    "recover",
    "round_line",
    "round_summary",
    "run",
    "write_pool",
]
