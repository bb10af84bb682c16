"""`make bench`, loop section: one round of `evoenv iterate` as one program, and the share of
its wall time spent loading models (the policy in-process, the trainer's in its child), read
from the round's loop.json. Target: at most 10%. The tiny recipe by default (fast); pass
`--recipe recipes/cpu-demo.yaml` for the starter model.

    python benchmarks/bench_loop.py [--recipe tests/recipes/tiny.yaml]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipe", default=str(ROOT / "tests" / "recipes" / "tiny.yaml"))
    args = ap.parse_args()
    exe = Path(sys.executable).with_name("evoenv")
    with tempfile.TemporaryDirectory(prefix="bench-loop-") as tmp:
        run = Path(tmp) / "run"
        started = time.perf_counter()
        p = subprocess.run(
            [str(exe), "iterate", "--rounds", "1", "--recipe", args.recipe, "--run", str(run)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )  # every core unless OMP_NUM_THREADS is set
        total = time.perf_counter() - started
        if p.returncode != 0:
            sys.exit(f"bench loop: iterate failed (exit {p.returncode}): {p.stderr.strip().splitlines()[-1:]}")
        book = json.loads((run / "round-01" / "loop.json").read_text())
    t = book["totals"]
    per_stage = " ".join(f"{k}={v['wall_s']:.1f}s" for k, v in book["stages"].items() if v.get("wall_s"))
    print(
        f"bench loop: rounds=1 wall_s={t['wall_s']:.1f} load_share={t['load_share']:.3f} "
        f"model_loads={t['model_loads']} load_s={t['load_s']:.2f} process_s={total:.1f} "
        f"recipe={Path(args.recipe).name} threads={os.environ.get('OMP_NUM_THREADS', 'all')} ({per_stage})"
    )


if __name__ == "__main__":
    main()
