"""Reasoning Arena against plain GRPO, side by side in one run (`make bench-arena`): the same
rows, seeds and steps through `evoenv train` twice, `--zero-variance skip` and `--zero-variance
judge` (the policy judging itself in-process), then both checkpoints asked the same held-out
instances (seeds with bit 31 set) by one `evoenv evaluate --baseline`.

1. the model: `evoenv starter-model` (SmolLM2-135M-Instruct, offline), or `--tiny`;
2. a library of the seeds at one level (`--level`, written as their calibrated level);
3. `evoenv sample --difficulty-from index`: the training rows, once, for both runs;
4. `evoenv train` with the arena off and on;
5. `evoenv evaluate --model ON --baseline OFF`.

Prints one line:
  bench arena: steps=N zero_var_share=Z rescued_share=R agreement=G[lo,hi] n=D p=P judge=J steps_off=O pass@1_off=A ...
zero_var_share is the arena run's share of zero-variance groups before the judge, rescued_share
the share of all groups the judge gave a non-zero advantage, both averaged over its steps;
agreement the share of the judge's decisive verdicts, on groups the verifier separates, that
name the verifier's better trace (chance: 1/2), with its 95% interval, sign-test p-value and
whether the arena trusted it (an arena at chance stands aside: rescued_share 0, no judge calls
on the zero-variance groups);
step_s the mean seconds per step (TRL's step_time, judging included). Settings live in
benchmarks/arena.yaml; the run lands in runs/bench-arena (kept, so its files can be read).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).with_name("evoenv")
RECIPE = ROOT / "benchmarks" / "arena.yaml"


def evoenv(*args, log: Path) -> float:
    """Run one evoenv command (its messages to the terminal, its stdout to a log); its seconds."""
    print("$ evoenv " + " ".join(map(str, args)), file=sys.stderr, flush=True)
    start = time.perf_counter()
    with log.open("a") as f:
        f.write("$ evoenv " + " ".join(map(str, args)) + "\n")
        f.flush()
        r = subprocess.run([str(EXE), *map(str, args)], stdout=f, env={**os.environ, "HF_HUB_OFFLINE": "1"}, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"bench arena: `evoenv {args[0]}` failed (exit {r.returncode}); see above and {log}")
    return time.perf_counter() - start


def level_library(run: Path, level: int) -> Path:
    """The seeds, each with `level` as its calibrated level (what sample and evaluate read)."""
    sys.path.insert(0, str(ROOT))
    from evoenv_cli.artifacts import EnvLibrary

    lib = run / "library"
    shutil.rmtree(lib, ignore_errors=True)
    (lib / "envs").mkdir(parents=True)
    records = []
    for env in EnvLibrary.open(ROOT / "seeds").files:
        (lib / "envs" / env.path.name).write_bytes(env.source)
        records.append(
            {"file": env.path.name, "env_id": env.env_id, "name": env.name, "calibration": {"levels": [level]}}
        )
    (lib / "index.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return lib


def mean(records: list[dict], key: str) -> float | None:
    values = [r[key] for r in records if isinstance(r.get(key), (int, float))]
    return statistics.fmean(values) if values else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default=str(ROOT / "runs" / "bench-arena"))
    ap.add_argument("--model", default=str(ROOT / "runs" / "starter-model"))
    ap.add_argument("--tiny", action="store_true", help="the tiny random model instead (a quick check of the plumbing)")
    ap.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the recipe's train.max_steps)")
    ap.add_argument("--level", type=int, default=1, help="the seeds' difficulty level for training and evaluation")
    ap.add_argument("--recipe", default=str(RECIPE))
    args = ap.parse_args()
    run = Path(args.run)
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    log = run / "commands.log"
    start = time.perf_counter()
    if args.tiny:
        model = run / "tiny"
        evoenv("tiny-model", model, log=log)
    else:
        model = Path(args.model)
        evoenv("starter-model", model, log=log)
    lib = level_library(run, args.level)
    evoenv(
        "sample",
        lib,
        "--out",
        run / "train.jsonl",
        "--difficulty-from",
        "index",
        "--seed",
        "1",
        "--config",
        args.recipe,
        log=log,
    )
    steps = ["--max-steps", str(args.steps)] if args.steps else []
    seconds = {}
    for mode in ("skip", "judge"):
        seconds[mode] = evoenv(
            "train",
            run / "train.jsonl",
            "--library",
            lib,
            "--model",
            model,
            "--out",
            run / f"train-{mode}",
            "--config",
            args.recipe,
            "--zero-variance",
            mode,
            *steps,
            log=log,
        )
    seconds["evaluate"] = evoenv(
        "evaluate",
        "--model",
        run / "train-judge",
        "--baseline",
        run / "train-skip",
        "--library",
        lib,
        "--out",
        run / "evaluate",
        "--config",
        args.recipe,
        log=log,
    )
    off = [json.loads(x) for x in (run / "train-skip" / "metrics.jsonl").read_text().splitlines()]
    on = [json.loads(x) for x in (run / "train-judge" / "metrics.jsonl").read_text().splitlines()]
    metrics = json.loads((run / "evaluate" / "metrics.json").read_text())
    arena = json.loads((run / "train-judge" / "train-manifest.json").read_text())["summary"]["arena"]
    result = {
        "model": "tiny" if args.tiny else "SmolLM2-135M-Instruct",
        "steps": len(on),
        "level": args.level,
        "zero_var_share": mean(on, "arena/zero_variance_share"),
        "rescued_share": mean(on, "arena/rescued_share"),
        "zero_var_share_off": mean(off, "frac_reward_zero_std"),
        "pass@1_off": metrics["baseline"]["overall"]["env_mean"],
        "pass@1_on": metrics["overall"]["env_mean"],
        "step_s_off": mean(off, "step_time"),
        "step_s_on": mean(on, "step_time"),
        "judge_s_per_step": mean(on, "arena/judge_seconds"),
        "arena": arena,
        "wall_s": round(time.perf_counter() - start),
        "seconds": {k: round(v) for k, v in seconds.items()},
    }
    (run / "bench-arena.json").write_text(json.dumps(result, indent=2) + "\n")
    calls = max(arena["judge_calls"], 1)
    print(
        f"bench arena: steps={result['steps']} zero_var_share={result['zero_var_share']:.3f} "
        f"rescued_share={result['rescued_share']:.3f} {agreement_text(arena)} pass@1_off={result['pass@1_off']:.3f} "
        f"pass@1_on={result['pass@1_on']:.3f} step_s_off={result['step_s_off']:.1f} "
        f"step_s_on={result['step_s_on']:.1f} (model={result['model']} level={args.level} "
        f"zero_var_share_off={result['zero_var_share_off']:.3f} judge_calls={arena['judge_calls']} "
        f"unparseable={arena['unparseable'] / calls:.2f} wall_s={result['wall_s']})",
        flush=True,
    )


def agreement_text(arena: dict) -> str:
    """The judge's agreement with the verifier on the groups it separates, beside whether the
    arena used it: `agreement=0.50[0.31,0.69] n=20 p=0.59 judge=at_chance steps_off=2`."""
    a = arena.get("judge_agreement") or {}
    verdict = "trusted" if a.get("trusted") else "at_chance"
    if a.get("agreement") is None:
        return f"agreement=- n=0 judge={verdict} steps_off={arena.get('steps_off', 0)}"
    lo, hi = a["ci95"]
    return (
        f"agreement={a['agreement']:.2f}[{lo:.2f},{hi:.2f}] n={a['decisive']} p={a['p_value']:.2g} "
        f"judge={verdict} steps_off={arena.get('steps_off', 0)}"
    )


if __name__ == "__main__":
    main()
