"""`make bench`, validate section: the seeds plus the defective corpus of tests/ with default
settings on 2 workers; the median wall time per admitted environment, and what the defective
ones cost (each at most its time limits)."""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

from evoenv_cli.artifacts import EnvLibrary, prepare_out_dir, read_jsonl
from evoenv_cli.config import RuntimeConfig, ValidateConfig
from evoenv_cli.stages import validate

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "validate_corpus"


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="evoenv-bench-") as tmp:
        lib = Path(tmp) / "lib"
        lib.mkdir()
        sources = list((ROOT / "seeds").glob("*.py")) + list(CORPUS.glob("*/*.py"))
        for f in sources:
            shutil.copy(f, lib / f.name)
        out = prepare_out_dir(Path(tmp) / "out", resume=False, clean=False)
        t = time.perf_counter()
        summary = validate.run(EnvLibrary.open(lib), ValidateConfig(), RuntimeConfig(workers=2), out)
        wall = time.perf_counter() - t
        records = list(read_jsonl(out / "verdicts.jsonl"))
    good = [r["wall_s"] for r in records if r["admitted"]]
    bad = [r for r in records if not r["admitted"] and "wall_s" in r]
    worst = max(bad, key=lambda r: r["wall_s"], default=None)
    print(f"validate: {summary.entered} entered, {summary.admitted} admitted, rejected by stage "
          + ", ".join(f"{k}={v}" for k, v in summary.rejected_by_stage.items() if v))
    if worst:
        print(f"slowest defective: {worst['file']} ({worst['stage']}) {worst['wall_s']:.2f} s")
    print(f"bench validate: envs={summary.entered} wall_s={wall:.1f} "
          f"per_good_env_s={statistics.median(good):.2f}")


if __name__ == "__main__":
    main()
