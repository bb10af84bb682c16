"""A stand-in for the loop's train child in its kill tests (iterate.train_launch runs it): the
Context the loop wrote, run through `stage.execute` with the train stage's own record (so OUT
is prepared, and a resumed one cut back to its last checkpoint, as the real train's is), with
a scripted `run` in place of TRL's steps: a metrics line per step, a checkpoint every 2, no model. SCRIPTED_TRAIN_KILL=round-NN:S:
SIGKILL the loop and this process just after round NN's step S is logged. The real train stage runs in
tests/stages/test_train.py and in test_iterate.py's loop.

    python tests/support/scripted_train.py -m evoenv_cli run-context round-NN/train-context.json
"""

import dataclasses
import json
import os
import signal
import statistics
import sys
from pathlib import Path

from evoenv_cli import artifacts, stage, stages
from evoenv_cli.stages import train

STEPS = 4


def scripted_run(ctx: stage.Context, lib, out: Path, llm, bar) -> dict:
    rows = [json.loads(line) for line in ctx.inputs["data"].read_text().splitlines() if line.strip()]
    print(f"scripted train: {len(rows)} rows", flush=True)
    done = [int(p.name.rsplit("-", 1)[1]) for p in (out / "checkpoints").glob("checkpoint-*")]
    where, _, at = os.environ.get("SCRIPTED_TRAIN_KILL", "").partition(":")
    kill_at = int(at) if at and out.parent.name == where else None
    for step in range(max(done, default=0) + 1, STEPS + 1):
        with (out / train.METRICS_FILE).open("a", encoding="utf-8") as f:
            f.write(json.dumps({"step": step, "reward": round(step / (len(rows) + STEPS), 4)}) + "\n")
        if step == kill_at:
            os.kill(os.getppid(), signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)
        if step % 2 == 0:
            (out / "checkpoints" / f"checkpoint-{step}").mkdir(parents=True)
    rewards = [r["reward"] for r in artifacts.read_jsonl_tolerant(out / train.METRICS_FILE)]
    summary = {
        "stage": "train",
        "steps": STEPS,
        "rows": len(rows),
        "mean_reward": round(statistics.fmean(rewards), 4),
        "all_groups_zero_variance": True,
    }
    manifest = {"summary": summary, "timings": {"load_s": 0.0, "sandbox_calls": 0}}
    artifacts.write_json_atomic(out / train.STAGE.marker, manifest)
    return summary


path = Path(sys.argv[-1])
_, ctx = stage.context_from_record(json.loads(path.read_text()), str(path), stages.get)
stage.execute(dataclasses.replace(train.STAGE, run=scripted_run, check=None), ctx)
