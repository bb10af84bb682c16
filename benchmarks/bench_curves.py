"""The starter model's pass rate per seed and level, on held-out instances (`make bench-curves`).

Runs `evoenv evaluate` on the seeds with each level of `--levels` (default 1..10) asked
equally often (a library whose index lists those levels), at held-out seeds (bit 31 set), with the CPU demo's prompts
(one demonstration turn, the answer alone in tags) and sampling settings, then prints a
markdown table of pass@1 per seed and level (the README's table) and the share of levels in
the calibration band [0.15, 0.85] per seed.

Run: python benchmarks/bench_curves.py [--levels 1-10 --per-level 3 --n 4 --recipe recipes/cpu-demo.yaml]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).with_name("evoenv")
BAND = (0.15, 0.85)


def library(out: Path, levels: list[int]) -> Path:
    """The seeds as a library whose index asks for each of `levels` equally often."""
    from evoenv_cli.artifacts import EnvLibrary, write_jsonl_atomic

    lib = out / "library"
    shutil.rmtree(lib, ignore_errors=True)
    (lib / "envs").mkdir(parents=True)
    seeds = EnvLibrary.open(ROOT / "seeds")
    index = []
    for env in seeds.files:
        (lib / "envs" / env.path.name).write_bytes(env.source)
        index.append({"file": env.path.name, "env_id": env.env_id, "name": env.name, "calibration": {"levels": levels}})
    write_jsonl_atomic(lib / "index.jsonl", index)
    return lib


def main() -> None:
    sys.path.insert(0, str(ROOT))
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default=str(ROOT / "runs" / "bench-curves"))
    ap.add_argument("--model", default=str(ROOT / "runs" / "starter-model"))
    ap.add_argument("--recipe", default=str(ROOT / "recipes" / "cpu-demo.yaml"))
    ap.add_argument("--per-level", type=int, default=3)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--levels", default="1-10", help="levels to measure: 1-10, or a list such as 1,2,3")
    args = ap.parse_args()
    if "-" in args.levels:
        lo, hi = map(int, args.levels.split("-"))
        levels = list(range(lo, hi + 1))
    else:
        levels = [int(x) for x in args.levels.split(",")]
    run = Path(args.run)
    run.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(EXE), "starter-model", args.model], check=True)
    lib = library(run, levels)
    r = subprocess.run(
        [
            str(EXE),
            "evaluate",
            "--model",
            args.model,
            "--library",
            lib,
            "--out",
            run / "evaluate",
            "--clean",
            "--config",
            args.recipe,
            "--instances",
            str(args.per_level * len(levels)),
            "--n",
            str(args.n),
            "--temperature",
            str(args.temperature),
            "--json",
        ],
        stdout=subprocess.DEVNULL,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    if r.returncode != 0:
        sys.exit(f"bench curves: evaluate failed (exit {r.returncode})")
    cells: dict[tuple[str, int], list[float]] = defaultdict(list)
    tagged: dict[str, list[bool]] = defaultdict(list)
    for line in (run / "evaluate" / "samples.jsonl").read_text().splitlines():
        s = json.loads(line)
        if s["kind"] == "env":
            cells[(s["source"], s["difficulty"])].append(float(s["score"]))
            tagged[s["source"]].append(s["answer"] is not None)
    names = sorted({k[0] for k in cells})
    table = {n: {lv: round(sum(v) / len(v), 2) for (m, lv), v in cells.items() if m == n} for n in names}
    (run / "curves.json").write_text(
        json.dumps(
            {
                "per_level": args.per_level,
                "n": args.n,
                "temperature": args.temperature,
                "levels": levels,
                "table": table,
            },
            indent=2,
        )
    )
    print("| seed | " + " | ".join(f"level {lv}" for lv in levels) + " | tagged | in band |")
    print("| --- |" + " --- |" * (len(levels) + 2))
    in_band_seeds = 0
    for n in names:
        row = table[n]
        band = [lv for lv in levels if lv in row and BAND[0] <= row[lv] <= BAND[1] and 0 < row[lv] < 1]
        in_band_seeds += bool(band)
        share = sum(tagged[n]) / len(tagged[n])
        print(
            f"| {n} | "
            + " | ".join(f"{row.get(lv, float('nan')):.2f}" for lv in levels)
            + f" | {share:.2f} | {','.join(map(str, band)) or '-'} |"
        )
    print(
        f"bench curves: model=SmolLM2-135M-Instruct per_level={args.per_level} n={args.n} "
        f"levels={args.levels} seeds_in_band={in_band_seeds}/{len(names)}",
        flush=True,
    )


if __name__ == "__main__":
    main()
