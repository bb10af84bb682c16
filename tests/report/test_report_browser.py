"""`evoenv report` looked at as a person would: real runs of the CPU demo loop (reported while
it runs round 2, killed there, then resumed to the end), each report opened in a real headless
Chromium (Debian's package; .ci/run installs it). The page must show its figures: every image
loaded and drawn at its size, the screenshot's pixels where each image sits equal to the PNG
file, and the page not blank. The numbers behind the figures are checked against the run's
own files.
"""

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image, ImageChops, ImageStat
from support.headless_chromium import Browser, chromium_path
from test_iterate import iterate  # the CPU demo loop as a subprocess, on the session's tiny model

from evoenv_cli.report import build

pytestmark = pytest.mark.slow
EXE = Path(sys.executable).with_name("evoenv")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
ROUND_1_FIGURES = {
    "learning.png",
    "funnel-round-01.png",
    "pool.png",
    "calibration.png",
    "training.png",
    "evaluation.png",
    "synthesis.png",
}


@pytest.fixture(scope="module")
def runs(tiny_model, tmp_path_factory):
    """(live, killed, finished): the report of the demo loop written while it ran round 2;
    the loop killed then, copied as it was left; and resumed to the end of round 2."""
    tmp = tmp_path_factory.mktemp("report-runs")
    run = tmp / "run"
    proc = iterate(
        tmp, tiny_model, run, rounds=2, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    started = run / "round-02" / "synthesize"
    deadline = time.monotonic() + 600
    while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        live = build(run, tmp / "live-report") if started.exists() else None  # the loop still going
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert started.exists(), "the loop never reached round 2"
    killed = tmp / "killed"
    shutil.copytree(run, killed, symlinks=True)
    done = iterate(tmp, tiny_model, run, rounds=2, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = done.communicate(timeout=900)
    assert done.returncode == 0, err[-3000:]
    return live, killed, run


def look_at(index: Path, shot: Path) -> tuple[list[dict], str, Image.Image]:
    """Open the page in Chromium: its images (src, natural size, place on the page), its text,
    and a full-page screenshot (kept next to the report for a person to look at)."""
    if chromium_path() is None:
        pytest.fail("chromium is not installed: apt-get install chromium (.ci/run does)")
    with Browser(width=1400) as browser:
        browser.open(index)
        png = browser.screenshot()
        images = browser.evaluate(
            "Array.from(document.images).map(i => { const r = i.getBoundingClientRect();"
            " return {src: i.getAttribute('src'), complete: i.complete, w: i.naturalWidth, h: i.naturalHeight,"
            " x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height}; })"
        )
        text = browser.evaluate("document.body.innerText")
    shot.write_bytes(png)
    return images, text, Image.open(io.BytesIO(png)).convert("RGB")


def assert_shows_its_figures(index: Path, images: list[dict], page: Image.Image) -> None:
    assert images, "the page has no image"
    colors = page.getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 200, "the screenshot is nearly blank"
    for img in images:
        assert img["complete"] and img["w"] > 100 and img["h"] > 100, f"broken image: {img}"
        assert (round(img["width"]), round(img["height"])) == (img["w"], img["h"]), f"not drawn at its size: {img}"
        on_screen = page.crop(
            (round(img["x"]), round(img["y"]), round(img["x"]) + img["w"], round(img["y"]) + img["h"])
        )
        on_disk = Image.open(index.parent / img["src"]).convert("RGB")
        assert on_screen.size == on_disk.size
        diff = ImageStat.Stat(ImageChops.difference(on_screen, on_disk)).mean
        assert max(diff) < 4, f"{img['src']} on the page differs from the file (mean |diff| {diff})"
        ink = sum(n for n, c in on_screen.getcolors(maxcolors=1 << 20) if sum(c) < 600)
        assert ink > 0.01 * img["w"] * img["h"], f"{img['src']} is nearly empty"


def test_the_report_of_a_run_still_going(runs):
    live, _, _ = runs
    images, text, page = look_at(live.index, live.index.with_name("screenshot.png"))
    assert_shows_its_figures(live.index, images, page)
    assert {Path(i["src"]).name for i in images} >= ROUND_1_FIGURES
    assert live.numbers["rounds"][0]["finished"] and not live.numbers["rounds"][1]["finished"]


def test_the_report_of_a_run_killed_after_round_1(runs):
    _, killed, _ = runs
    before = {p: p.stat().st_mtime_ns for p in killed.rglob("*") if p.is_file()}
    report = build(killed)
    images, text, page = look_at(report.index, report.index.with_name("screenshot.png"))
    assert_shows_its_figures(report.index, images, page)
    assert {Path(i["src"]).name for i in images} >= ROUND_1_FIGURES
    assert "unfinished: at" in text and "Round 2" in text
    n = report.numbers
    assert [r["finished"] for r in n["rounds"]] == [True, False]
    assert n["funnel"][1]["joined"] is None and n["pool"]["rounds"][1]["pool_size"] is None
    after = {p: p.stat().st_mtime_ns for p in killed.rglob("*") if p.is_file() and "report" not in p.parts}
    assert after == before  # the run is only read


def test_the_report_of_a_finished_demo_run(runs):
    _, _, run = runs
    r = subprocess.run([str(EXE), "report", str(run)], capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    index = Path(r.stdout.strip())
    assert index == run / "report" / "index.html"
    images, text, page = look_at(index, index.with_name("screenshot.png"))
    assert_shows_its_figures(index, images, page)
    assert {Path(i["src"]).name for i in images} == ROUND_1_FIGURES | {"funnel-round-02.png"}
    assert "unfinished" not in text and "problem(s) reading the run" not in text
    # the first question first: pass@1 per round with its interval, the start as round 0
    top = text[: text.index("Admission funnel per round")]
    assert "Did it learn?" in top and "0 (start)" in top and "95% interval" in top
    rows = re.findall(r"^(0 \(start\)|1|2)\t.*?(\d\.\d{3}) – (\d\.\d{3})", top, flags=re.M)
    assert [r[0] for r in rows] == ["0 (start)", "1", "2"], top
    learning = read_json(run / "baseline" / "metrics.json")["overall"]
    assert [float(x) for x in rows[0][1:]] == pytest.approx(learning["ci95"], abs=6e-4)
    y = {Path(i["src"]).name: i["y"] for i in images}
    assert y["learning.png"] < y["funnel-round-01.png"]  # drawn above everything else
    # example pages of rejected candidates open too
    with Browser() as browser:
        for href in sorted({p.name for p in (index.parent / "examples").iterdir()})[:3]:
            browser.open(index.parent / "examples" / href)
            assert "rejected by" in browser.evaluate("document.body.innerText")
    check_numbers_against_the_files(json.loads((index.parent / "numbers.json").read_text()), run)


def read_json(p: Path) -> dict:
    return json.loads(p.read_text())


def check_numbers_against_the_files(n: dict, run: Path) -> None:
    rounds = [json.loads(x) for x in (run / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [1, 2] and [r["round"] for r in n["rounds"]] == [1, 2]
    for summary, funnel, pool, tr_round, ev in zip(
        rounds, n["funnel"], n["pool"]["rounds"], n["training"]["rounds"], n["evaluation"]["rounds"]
    ):
        d = run / f"round-{summary['round']:02d}"
        syn = read_json(d / "synthesize" / "summary.json")
        assert funnel["stages"]["synthesize"]["entered"] == syn["requests"]
        assert funnel["stages"]["synthesize"]["admitted"] == syn["candidates"] == summary["candidates"]
        assert funnel["stages"]["synthesize"]["by_check"] == {k: v for k, v in syn["outcomes"].items() if k != "ok"}
        for stage in ("validate", "review", "compose", "calibrate", "dedupe"):
            s = read_json(d / stage / "summary.json")
            got = funnel["stages"][stage]
            assert (got["entered"], got["admitted"]) == (s["entered"], s["admitted"]), stage
            assert got["by_check"] == {k: v for k, v in s["rejected_by_stage"].items() if v}, stage
            # the round line counts calibrated and uncalibrated admissions apart
            extra = summary["admitted"].get("uncalibrated", 0) if stage == "calibrate" else 0
            assert summary["admitted"][stage] + extra == s["admitted"], stage
        steps = {x["step"]: x for x in funnel["steps"]}
        # the funnel follows the order the loop ran: dedupe first, then calibrate on what it kept
        assert Path(read_json(d / "calibrate" / "manifest.json")["library"]).name == "dedupe"
        assert funnel["contract_order"] == ["dedupe", "calibrate"] and list(steps)[5:7] == ["dedupe", "calibrate"]
        assert steps["candidates"]["composite"] == summary["admitted"]["compose"]
        update = read_json(d / "pool-update.json")
        assert pool["pool_size"] == update["pool_size"] == summary["pool_size"]
        assert pool["joined"] == summary["joined"] == len(update["joined"])
        assert pool["retired_too_easy"] + pool["retired_too_hard"] == summary["retired"]
        assert sum(pool["composition"].values()) == pool["pool_size"]
        assert (steps["joined"]["synthesized"] or 0) + (steps["joined"]["composite"] or 0) == summary["joined"]
        metrics = [json.loads(x) for x in (d / "train" / "metrics.jsonl").read_text().splitlines()]
        mine = [s for s in n["training"]["steps"] if s["round"] == summary["round"]]
        assert [(s["step"], s["reward"], s["reward_std"], s["zero_std_share"]) for s in mine] == [
            (m["step"], m["reward"], m["reward_std"], m["frac_reward_zero_std"]) for m in metrics
        ]
        assert tr_round["steps"] == summary["train_steps"]
        m = read_json(d / "evaluate" / "metrics.json")
        assert ev["headline"]["overall"]["model"] == m["overall"]["pass@1"] == summary["evaluation"]["pass@1"]
        assert ev["headline"]["overall"]["baseline"] == m["baseline"]["overall"]["pass@1"]
        assert ev["headline"]["overall"]["delta"] == m["delta"]["overall pass@1"]
        for name, v in m["environments"].items():
            assert ev["sources"][f"environment:{name}"]["model"] == v["pass@1"]
            assert ev["sources"][f"environment:{name}"]["delta"] == m["delta"][f"env {name}"]
        for name, v in m["benchmarks"].items():
            assert ev["sources"][f"benchmark:{name}"]["model"] == v["pass@1"]
    pool_index = [json.loads(x) for x in (run / "pool" / "index.jsonl").read_text().splitlines()]
    assert [e["name"] for e in n["calibration"]["environments"]] == [p["name"] for p in pool_index]
    assert n["pool"]["rounds"][-1]["pool_size"] == len(pool_index)
    for e, p in zip(n["calibration"]["environments"], pool_index):
        assert e["levels"] == p["calibration"]["levels"]
        assert [c["pass_rate"] for c in e["curve"]] == [
            p["calibration"]["curve"][str(c["level"])]["pass_rate"] for c in e["curve"]
        ]
    generations = sum(
        len((run / f"round-{r:02d}" / "synthesize" / "generations.jsonl").read_text().splitlines()) for r in (1, 2)
    )
    assert n["synthesis"]["total"]["generations"] == generations
    assert sum(t["generations"] for t in n["synthesis"]["by_topic"]) == generations
