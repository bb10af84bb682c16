"""`evoenv iterate` (and `make iterate`): the self-evolving loop, one round after another.

Round r, in RUN/round-NN/<stage>/:
  synthesize (policy = round r-1's checkpoint; round 1 = MODEL) -> validate -> review
  compose (on the pool, no LLM; composites are code built from admitted parts, so they skip
  the LLM review) -> candidates (review + compose, merged) -> calibrate -> dedupe (--against
  the pool) -> rotate (the pool re-calibrated against the policy) -> pool update -> sample ->
  train -> evaluate.

Every stage is the same `evoenv <stage>` command a user would run, as a subprocess whose output
(progress bars, messages) goes straight to the terminal. A stage is
finished when its marker file exists (summary.json, metrics.json, train-manifest.json, ...);
killed at any point and run again, the loop skips finished stages and resumes the one it was
in (`--resume`), so nothing finished is redone or lost. The pool lives in RUN/pool/ (the
seeds start it and stay unless retired) and is replaced atomically after each round.

RUN/run-config.json keeps every resolved recipe the run was started with: rerun after an
edit, the loop says what changed and goes on with the new settings for the stages still to
run (a partly done stage refuses to resume under settings of its own that changed).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from evoenv_cli import artifacts
from evoenv_cli.config import IterateConfig
from evoenv_cli.reward_audit import QUARANTINE_FILE, quarantined_ids
from evoenv_cli.runtime.pool import EnvFile

MARKERS = {
    "synthesize": "summary.json", "validate": "summary.json", "review": "summary.json",
    "compose": "summary.json", "calibrate": "summary.json", "dedupe": "summary.json",
    "rotate": "summary.json", "sample": "train.jsonl", "train": "train-manifest.json",
    "evaluate": "metrics.json",
}


class StageFailed(RuntimeError):
    pass


@dataclass
class Loop:
    run_dir: Path
    recipe: Path
    model: str
    cfg: IterateConfig
    seeds: Path
    log: callable = print

    def evoenv(self, *args: str | Path) -> subprocess.CompletedProcess:
        launch = shlex.split(self.cfg.train_launch) if args[0] == "train" and self.cfg.train_launch else [sys.executable]
        argv = [*launch, "-m", "evoenv_cli", *map(str, args)]
        self.log("  $ evoenv " + " ".join(map(str, args)))
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        # The stage writes to this terminal as it goes: its progress bars and messages show live.
        r = subprocess.run(argv, env=env)
        if r.returncode != 0:
            raise StageFailed(f"evoenv {args[0]} failed (exit {r.returncode}); its messages are above")
        return r

    def stage(self, name: str, out: Path, args: list, resumable: bool = True) -> Path:
        """Run one stage unless its marker says it is finished; resume a partial one."""
        if (out / MARKERS[name]).exists():
            self.log(f"  {name}: done")
            return out
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.exists() and any(out.iterdir())
        flag = (["--resume"] if resumable else ["--clean"]) if partial else []
        self.evoenv(*args, *flag)
        return out

    # -- the pool ------------------------------------------------------------------------------------
    @property
    def pool(self) -> Path:
        return self.run_dir / "pool"

    def init_pool(self) -> None:
        if (self.pool / "index.jsonl").exists():
            return
        lib = artifacts.EnvLibrary.open(self.seeds)
        index = [{"file": e.path.name, "env_id": e.env_id, "name": e.name, "origin": "seed",
                  "calibration": {"levels": list(range(1, 11)), "misses": 0}} for e in lib.files]
        write_pool(self.pool, [(e, r) for e, r in zip(lib.files, index)])

    def quarantined(self) -> dict[str, dict]:
        """Environments whose rewards disagreed with a re-check in a fresh worker, in any
        round's training so far: never in the pool again."""
        return quarantined_ids(sorted(self.run_dir.glob(f"round-*/train/{QUARANTINE_FILE}")))

    def update_pool(self, rotated: Path, admitted: Path, round_no: int) -> dict:
        """Pool members the rotation did not retire, plus the round's admitted newcomers, less
        the quarantined."""
        old = artifacts.EnvLibrary.open(self.pool, allow_empty=True)
        quarantine = self.quarantined()
        verdicts = {r["env_id"]: r for r in artifacts.read_jsonl(rotated / "verdicts.jsonl")}
        rot_index = {r["env_id"]: r for r in artifacts.read_jsonl(rotated / "index.jsonl")}
        members, retired, dropped = [], [], []
        for env in old.files:
            if env.env_id in quarantine:
                dropped.append({"name": env.name, "reason": quarantine[env.env_id].get("reason")})
                continue
            v = verdicts.get(env.env_id, {})
            if str(v.get("stage", "")).startswith("retired_"):
                retired.append({"name": env.name, "stage": v["stage"], "reason": v.get("reason")})
                continue
            # a member the solver could not be measured on (no answers, a failed call) stays as it was
            members.append((env, rot_index.get(env.env_id) or old.index.get(env.env_id, {})))
        new = artifacts.EnvLibrary.open(admitted, allow_empty=True)
        have = {e.env_id for e, _ in members}
        joined = []
        for env in new.files:
            if env.env_id not in have and env.env_id not in quarantine:
                record = dict(new.index.get(env.env_id, {}), joined_round=round_no)
                members.append((env, record))
                joined.append(env.name)
        write_pool(self.pool, members)
        return {"pool_size": len(members), "joined": joined, "retired": retired, "quarantined": dropped}


def write_pool(pool: Path, members: list[tuple[EnvFile, dict]]) -> None:
    """Replace the pool folder atomically (build beside it, then swap)."""
    tmp = pool.with_name(pool.name + ".new")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "envs").mkdir(parents=True)
    index = []
    for env, record in members:
        (tmp / "envs" / env.path.name).write_bytes(env.source)
        index.append({**record, "file": env.path.name, "env_id": env.env_id,
                      "name": record.get("name") or env.name})
    artifacts.write_jsonl_atomic(tmp / "index.jsonl", index)
    old = pool.with_name(pool.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if pool.exists():
        pool.rename(old)
    tmp.rename(pool)
    shutil.rmtree(old, ignore_errors=True)


def merge_libraries(out: Path, sources: list[Path]) -> Path:
    """One library (envs/ + index.jsonl) from several stage outputs; first source wins a name."""
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


def policy_of(train_dir: Path) -> str:
    merged = train_dir / "merged"
    return str(merged if (merged / "config.json").exists() else train_dir)


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def record_recipe(loop: Loop, from_round: int) -> str:
    """Add the resolved recipe to RUN/run-config.json unless it is the one recorded last;
    say what changed. Returns its hash."""
    from evoenv_cli.config import load_recipe, to_dict

    settings = {"recipe": to_dict(load_recipe(loop.recipe)), "model": loop.model, "seeds": str(loop.seeds)}
    digest = artifacts.config_hash(settings)
    path = loop.run_dir / artifacts.RUN_CONFIG
    history = read_json(path).get("history", [])
    if history and history[-1].get("config_hash") == digest:
        return digest
    if history:
        changes = artifacts.settings_changes(history[-1].get("settings", {}), settings)
        shown = "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")
        loop.log(f"the settings changed since this run was started ({shown}): finished stages keep "
                 f"their results, the stages still to run use the new ones (both are recorded in {path})")
    history.append({"config_hash": digest, "from_round": from_round, "recorded": artifacts.now_iso(),
                    "settings": settings})
    artifacts.write_json_atomic(path, {"config_hash": digest, "history": history})
    return digest


def run(loop: Loop, rounds: int) -> list[dict]:
    cfg, rc = loop.cfg, ["--config", loop.recipe]
    loop.run_dir.mkdir(parents=True, exist_ok=True)
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
        llm = ["--model", policy, *rc]
        syn = loop.stage("synthesize", d / "synthesize",
                         ["synthesize", "--seeds", loop.seeds, "--pool", loop.pool, "--out", d / "synthesize",
                          "--n", cfg.synthesize_n, "--seed", r, *llm])
        val = loop.stage("validate", d / "validate", ["validate", syn, "--out", d / "validate", *rc])
        rev = loop.stage("review", d / "review", ["review", val, "--out", d / "review", *llm])
        comp = loop.stage("compose", d / "compose",
                          ["compose", loop.pool, "--out", d / "compose", "--n", cfg.compose_n, "--seed", r, *rc])
        cands = merge_libraries(d / "candidates", [rev, comp])
        cal = loop.stage("calibrate", d / "calibrate", ["calibrate", cands, "--out", d / "calibrate", *llm])
        ded = loop.stage("dedupe", d / "dedupe", ["dedupe", cal, "--out", d / "dedupe", "--against", loop.pool, *rc])
        rot = loop.stage("rotate", d / "rotate", ["calibrate", loop.pool, "--out", d / "rotate", *llm])
        pool_change = read_json(d / "pool-update.json")
        if not pool_change:
            pool_change = loop.update_pool(rot, ded, r)
            artifacts.write_json_atomic(d / "pool-update.json", pool_change)
        (d / "sample").mkdir(parents=True, exist_ok=True)
        if not (d / "sample" / "train.jsonl").exists():
            loop.evoenv("sample", loop.pool, "--out", d / "sample" / "train.jsonl", "--per-env", cfg.sample_per_env,
                        "--difficulty-from", "index", "--seed", r, *rc)
        train = loop.stage("train", d / "train",
                           ["train", d / "sample" / "train.jsonl", "--library", loop.pool, "--model", policy,
                            "--out", d / "train", *rc])
        policy = policy_of(train)
        bench = [a for b in cfg.bench for a in ("--bench", b)]
        baseline = ["--baseline", loop.model] if cfg.baseline else []
        loop.stage("evaluate", d / "evaluate",
                   ["evaluate", "--model", policy, "--out", d / "evaluate", "--library", loop.pool,
                    *bench, *baseline, *rc], resumable=False)
        summary = round_summary(r, d, pool_change, digest)
        artifacts.JsonlAppender(loop.run_dir / "rounds.jsonl").append(summary)
        loop.log(round_line(summary))
        if summary["candidates"] == 0:
            loop.log(f"  round {r}: the policy wrote no usable environment (a random tiny model never "
                     "does); the pool's seeds and composites carried the round")
    return artifacts.read_jsonl_tolerant(loop.run_dir / "rounds.jsonl")


def round_summary(r: int, d: Path, pool_change: dict, config_hash: str | None = None) -> dict:
    """The round's numbers. `admitted.calibrate` counts what the difficulty contract measured
    in band; `admitted.uncalibrated`, what it let through unmeasured (no answers to score)."""
    syn = read_json(d / "synthesize" / "summary.json")
    admitted = {}
    for s in ("validate", "review", "compose", "calibrate", "dedupe"):
        summary = read_json(d / s / "summary.json")
        admitted[s] = summary.get("admitted")
        if s == "calibrate" and admitted[s] is not None:
            admitted["uncalibrated"] = summary.get("admitted_uncalibrated", 0)
            admitted[s] -= admitted["uncalibrated"]
    train = read_json(d / "train" / "train-manifest.json").get("summary", {})
    metrics = read_json(d / "evaluate" / "metrics.json")
    return {
        "round": r, "candidates": syn.get("candidates", 0), "admitted": admitted,
        "pool_size": pool_change.get("pool_size"), "joined": len(pool_change.get("joined", [])),
        "retired": len(pool_change.get("retired", [])),
        "quarantined": len(pool_change.get("quarantined", [])), "train_steps": train.get("steps"),
        "mean_train_reward": train.get("mean_reward"),
        "train_weights_unchanged": bool(train.get("all_groups_zero_variance")),
        "evaluation": headline(metrics), "config_hash": config_hash,
    }


def headline(metrics: dict) -> dict:
    """The evaluation numbers worth a line: pass@1 overall, on held-out environment instances
    and on benchmark files, and the overall change against the baseline."""
    overall = metrics.get("overall") or {}
    out = {"pass@1": overall.get("pass@1"), "env_pass@1": overall.get("env_mean"),
           "bench_pass@1": overall.get("bench_mean")}
    delta = metrics.get("delta") or {}
    if isinstance(delta, dict) and "overall pass@1" in delta:
        out["delta_vs_baseline"] = delta["overall pass@1"]
    return {k: v for k, v in out.items() if v is not None}


def round_line(s: dict) -> str:
    adm = s["admitted"]
    contracts = " ".join(f"{k}={v if v is not None else '-'}" for k, v in adm.items())
    ev = " ".join(f"{k}={v:.3f}" for k, v in s["evaluation"].items() if isinstance(v, (int, float)))
    reward = s["mean_train_reward"]
    unchanged = " (weights unchanged: every group zero-variance)" if s.get("train_weights_unchanged") else ""
    return (f"round {s['round']}: candidates={s['candidates']} admitted[{contracts}] "
            f"pool={s['pool_size']} (+{s['joined']} -{s['retired']}) "
            f"train_reward={reward if reward is not None else '-'}{unchanged} eval[{ev or '-'}]")
