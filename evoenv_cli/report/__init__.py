"""`evoenv report`: a run a researcher can look at. Reads a run folder (finished, still going
or killed part way), computes the numbers behind each figure (`numbers`), draws them
(`figures`, matplotlib's Agg canvas) and writes a static index.html that tables the numbers
beside each figure (`page`), with example pages for rejected candidates and numbers.json.

The report folder is built beside its destination and swapped in whole, so a report being
rewritten is never half old, half new; a destination that holds anything but an earlier
report is refused. The run itself is only read.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from evoenv_cli import artifacts
from evoenv_cli.errors import InputError
from evoenv_cli.report import figures, numbers, page
from evoenv_cli.report.run_files import RunFiles

MARKER = "numbers.json"  # what makes a folder an earlier report, safe to replace


@dataclass
class Report:
    index: Path
    numbers: dict


def check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise InputError(f"{out}: holds files that are not an evoenv report; pass another --out")
    artifacts.check_writable_parent(out)


def build(run_dir: str | Path, out: str | Path | None = None, generated: str | None = None) -> Report:
    run = RunFiles(run_dir)
    out = Path(out) if out is not None else run.root / "report"
    check_out(out)
    nums = numbers.compute(run)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        (tmp / "figures").mkdir(parents=True)
        (tmp / "examples").mkdir()
        drawn = draw(nums, tmp / "figures")
        links = page.Links(run, out)
        example_links = page.Links(run, out / "examples")
        pages: dict[tuple, str] = {}

        def example_page(ex: dict, r: int, stage: str) -> str:
            key = (r, stage, ex["verdicts"], ex["line"])
            if key not in pages:
                name = f"r{r:02d}-{stage}-{len(pages) + 1:03d}.html"
                pages[key] = f"examples/{name}"
                (tmp / "examples" / name).write_text(
                    page.example_body(run, example_links, ex, r, stage), encoding="utf-8"
                )
            return pages[key]

        def fig_src(name: str) -> str | None:
            return f"figures/{name}" if name in drawn else None

        html_text = page.index_page(nums, links, fig_src, example_page, generated or artifacts.now_iso())
        nums["report"] = str(out / "index.html")
        (tmp / "index.html").write_text(html_text, encoding="utf-8")
        (tmp / MARKER).write_text(json.dumps(nums, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        swap(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Report(out / "index.html", nums)


def draw(nums: dict, folder: Path) -> set[str]:
    """Every figure there is data for; the names of the files written."""
    jobs = [(f"funnel-round-{f['round']:02d}.png", figures.funnel, f) for f in nums["funnel"]]
    jobs += [
        ("learning.png", figures.learning, nums["learning"]),
        ("pool.png", figures.pool, nums["pool"]),
        ("calibration.png", figures.calibration, nums["calibration"]),
        ("training.png", figures.training, nums["training"]),
        ("evaluation.png", figures.evaluation, nums["evaluation"]),
        ("synthesis.png", figures.synthesis, nums["synthesis"]),
    ]
    return {name for name, fn, data in jobs if fn(data, folder / name)}


def swap(tmp: Path, out: Path) -> None:
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)
