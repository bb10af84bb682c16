"""`make bench`, sample section: `evoenv sample` writes its rows as it draws them, so its memory
is flat in the number of rows. Rows/s and the peak RSS of the `evoenv sample` process (a child of
a child, so its own ru_maxrss is the one read) at 10k and 1M rows, as JSONL and as Parquet, from
one small environment on 2 workers. The 1M lines must stay under 1 GB.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV = '''"""Add two numbers: the cheapest honest environment, so the rows measure evoenv, not a task."""

import random

NAME = "add_two"


def generate(seed, difficulty):
    rng = random.Random(seed)
    return {"a": rng.randint(0, 10**difficulty), "b": rng.randint(0, 10**difficulty)}


def prompt(instance):
    return f"What is {instance['a']} + {instance['b']}?"


def solve(instance):
    return str(instance["a"] + instance["b"])


def score(instance, answer):
    return 1.0 if answer.strip() == solve(instance) else 0.0
'''
# runs `evoenv sample` as its child and prints that child's peak RSS (ru_maxrss is per process:
# the largest of its descendants, here the evoenv process, not the sum with its sandbox workers)
MEASURE = """
import resource, subprocess, sys, time
t = time.perf_counter()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(rc, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""
SIZES = (10_000, 1_000_000)


def measure(lib: Path, out: Path, rows: int) -> tuple[float, float]:
    evoenv = str(Path(sys.executable).with_name("evoenv"))
    cmd = [evoenv, "sample", str(lib), "--out", str(out), "--per-env", str(rows), "--workers", "2"]
    line = subprocess.run([sys.executable, "-c", MEASURE, *cmd], capture_output=True, text=True, check=True).stdout
    rc, wall, rss_kb = line.split()
    assert rc == "0", f"evoenv sample exited {rc}"
    return rows / float(wall), int(rss_kb) / 1024


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="evoenv-bench-sample-") as tmp:
        lib = Path(tmp) / "lib"
        lib.mkdir()
        (lib / "add_two.py").write_text(ENV)
        for suffix in ("jsonl", "parquet"):
            for rows in SIZES:
                out = Path(tmp) / f"rows.{suffix}"
                rate, peak = measure(lib, out, rows)
                if suffix == "jsonl":  # the last row, read back: every row was written
                    with out.open("rb") as f:
                        f.seek(-4096, 2)
                        json.loads(f.read().splitlines()[-1])
                out.unlink()
                print(
                    f"bench sample: format={suffix} rows={rows} rows_per_s={rate:.0f} peak_rss_mb={peak:.0f} "
                    f"under_1gb={peak < 1024}",
                    flush=True,
                )


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"bench sample: wall_s={time.perf_counter() - t:.0f}")
