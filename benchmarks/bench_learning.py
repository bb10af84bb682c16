"""The proof that `evoenv train` makes a real model better, on a CPU, through the project's own
commands (`make bench-learning`):

1. `evoenv starter-model`: SmolLM2-135M-Instruct, offline;
2. `evoenv import reasoning-gym chain_sum` beside the seeds, then `evoenv calibrate`: the
   levels whose pass rate for this model is in band;
3. `evoenv sample --difficulty-from index`: training rows at those levels (seeds < 2**31);
4. `evoenv train`: GRPO for N steps, rewarded by the environments in the sandbox;
5. `evoenv evaluate --model TRAINED --baseline STARTER`: both models asked the same held-out
   instances (seeds with bit 31 set) at the calibrated levels, with the same sampling seeds, and
   an external benchmark nobody here wrote: reasoning-gym tasks generated offline at fixed
   seeds and scored by reasoning-gym's own `score_answer`.

Prints one line:
  bench learning: model=... steps=N before=X after=Y delta=D external_before=A external_after=B wall_s=W
Targets: delta >= +0.15 on held-out environment instances, external no more than 0.02 lower,
W <= 1500 s on 2 cores. Settings live in benchmarks/learning.yaml; the run lands in
runs/bench-learning (kept, so its files can be read).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).with_name("evoenv")
RECIPE = ROOT / "benchmarks" / "learning.yaml"
# The library: the seeds, plus one task the starter model can sometimes answer, imported from
# reasoning-gym by `evoenv import` (its generator and its own score_answer, run in the sandbox):
# at levels 1-3 the seeds' pass rates for this model are 0 to 0.125 (README), so without it
# GRPO would train on near-zero rewards only.
IMPORTED = ["chain_sum"]
# External: reasoning-gym tasks that no training row asks (basic_arithmetic is another
# generator and wording than chain_sum), generated offline at fixed seeds, scored by its own
# score_answer.
EXTERNAL = [
    'rg:basic_arithmetic:32:min_terms=2,max_terms=2,min_digits=1,max_digits=1,operators=["+"]',
    'rg:basic_arithmetic:32:min_terms=2,max_terms=2,min_digits=1,max_digits=1,operators=["-"]',
]


def evoenv(*args, log: Path) -> float:
    """Run one evoenv command (its output to the terminal and to a log); returns its seconds."""
    argv = [str(EXE), *map(str, args)]
    print("$ evoenv " + " ".join(map(str, args)), file=sys.stderr, flush=True)
    start = time.perf_counter()
    with log.open("a") as f:
        f.write("$ " + " ".join(argv) + "\n")
        f.flush()
        r = subprocess.run(argv, stdout=f, env={**os.environ, "HF_HUB_OFFLINE": "1"}, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"bench learning: `evoenv {args[0]}` failed (exit {r.returncode}); see above and {log}")
    return time.perf_counter() - start


def unseen_pass(run: Path) -> dict:
    """pass@1 before and after over the held-out items whose task no training row asks: the
    near-trivial low levels have few distinct instances, so a held-out seed can still draw a
    training instance, and a gain there is not generalization."""
    seen = {json.loads(line)["prompt"][-1]["content"] for line in (run / "train.jsonl").read_text().splitlines()}
    per_item: dict[tuple[str, str], list[float]] = {}
    overlap = set()
    for line in (run / "evaluate" / "samples.jsonl").read_text().splitlines():
        s = json.loads(line)
        if s["kind"] != "env":
            continue
        per_item.setdefault((s["role"], s["item"]), []).append(float(s["score"]))
        if s["prompt"][-1]["content"] in seen:
            overlap.add(s["item"])

    def mean(role: str) -> float:
        means = [sum(v) / len(v) for (r, item), v in per_item.items() if r == role and item not in overlap]
        return sum(means) / len(means) if means else float("nan")

    items = {item for _, item in per_item}
    return {
        "unseen_before": mean("baseline"),
        "unseen_after": mean("model"),
        "unseen_items": len(items - overlap),
        "env_items": len(items),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default=str(ROOT / "runs" / "bench-learning"))
    ap.add_argument("--model", default=str(ROOT / "runs" / "starter-model"))
    ap.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the recipe's train.max_steps)")
    ap.add_argument("--keep", action="store_true", help="reuse a finished calibration in RUN")
    args = ap.parse_args()
    run, model = Path(args.run), Path(args.model)
    if run.exists() and not args.keep:
        shutil.rmtree(run)
    run.mkdir(parents=True, exist_ok=True)
    log = run / "commands.log"
    start = time.perf_counter()
    seconds = {}
    seconds["starter_model"] = evoenv("starter-model", model, log=log)
    library = run / "library"
    if not (run / "calibrate" / "summary.json").exists():
        shutil.rmtree(library, ignore_errors=True)
        shutil.copytree(ROOT / "seeds", library, ignore=shutil.ignore_patterns("__pycache__"))
        seconds["import"] = evoenv("import", "reasoning-gym", *IMPORTED, "--out", library, log=log)
        shutil.rmtree(run / "calibrate", ignore_errors=True)
        seconds["calibrate"] = evoenv(
            "calibrate", library, "--out", run / "calibrate", "--model", model, "--config", RECIPE, log=log
        )
    admitted = [json.loads(x) for x in (run / "calibrate" / "index.jsonl").read_text().splitlines() if x.strip()]
    if not admitted:
        sys.exit("bench learning: calibration admitted no seed (no level in band for this model)")
    seconds["sample"] = evoenv(
        "sample",
        run / "calibrate",
        "--out",
        run / "train.jsonl",
        "--difficulty-from",
        "index",
        "--seed",
        "1",
        "--config",
        RECIPE,
        log=log,
    )
    steps = ["--max-steps", str(args.steps)] if args.steps else []
    seconds["train"] = evoenv(
        "train",
        run / "train.jsonl",
        "--library",
        run / "calibrate",
        "--model",
        model,
        "--out",
        run / "train",
        "--config",
        RECIPE,
        *steps,
        log=log,
    )
    bench = [a for spec in EXTERNAL for a in ("--bench", spec)]
    seconds["evaluate"] = evoenv(
        "evaluate",
        "--model",
        run / "train",
        "--baseline",
        model,
        "--library",
        run / "calibrate",
        *bench,
        "--out",
        run / "evaluate",
        "--config",
        RECIPE,
        log=log,
    )
    wall = time.perf_counter() - start
    metrics = json.loads((run / "evaluate" / "metrics.json").read_text())
    unseen = unseen_pass(run)
    manifest = json.loads((run / "train" / "train-manifest.json").read_text())
    after, before = metrics["overall"], metrics["baseline"]["overall"]
    result = {
        "model": "SmolLM2-135M-Instruct",
        "steps": manifest["summary"]["steps"],
        "envs": len(admitted),
        "levels": {r["name"]: r["calibration"]["levels"] for r in admitted},
        "before": before["env_mean"],
        "after": after["env_mean"],
        "delta": round(after["env_mean"] - before["env_mean"], 4),
        "external_before": before["bench_mean"],
        "external_after": after["bench_mean"],
        "no_answer_before": before.get("no_answer_share"),
        "no_answer_after": after.get("no_answer_share"),
        **unseen,
        "wall_s": round(wall),
        "seconds": {k: round(v) for k, v in seconds.items()},
    }
    (run / "bench-learning.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"bench learning: model={result['model']} steps={result['steps']} envs={result['envs']} "
        f"before={result['before']:.3f} after={result['after']:.3f} delta={result['delta']:+.3f} "
        f"external_before={result['external_before']:.3f} external_after={result['external_after']:.3f} "
        f"unseen_before={result['unseen_before']:.3f} unseen_after={result['unseen_after']:.3f} "
        f"(items={result['unseen_items']}/{result['env_items']}) "
        f"wall_s={result['wall_s']} (calibrate={result['seconds'].get('calibrate', 0)} "
        f"train={result['seconds']['train']} evaluate={result['seconds']['evaluate']})",
        flush=True,
    )


if __name__ == "__main__":
    main()
