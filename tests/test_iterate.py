import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow  # two full loops

EXE = Path(sys.executable).with_name("evoenv")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def recipe(tmp_path: Path) -> Path:
    text = (ROOT / "tests" / "recipes" / "tiny.yaml").read_text()
    text = text.replace("build_model: tiny", "build_model: ''")
    text = text.replace("recipes/bench/", str(ROOT / "recipes" / "bench") + "/")
    p = tmp_path / "recipe.yaml"
    p.write_text(text)
    return p


def iterate(tmp_path, model, run, rounds=1, offered=None, **kw):
    argv = [
        str(EXE),
        "iterate",
        "--rounds",
        str(rounds),
        "--recipe",
        str(recipe(tmp_path)),
        "--model",
        str(model),
        "--run",
        str(run),
        "--seeds",
        str(ROOT / "seeds"),
        *(["--offered", str(offered)] if offered else []),
    ]
    return subprocess.Popen(argv, env=ENV, cwd=tmp_path, text=True, **kw)


def test_a_killed_loop_resumes_without_redoing_finished_stages(tiny_model, tmp_path):
    run = tmp_path / "run"
    offered = tmp_path / "offered"  # a file offered by hand enters round 1, once, and joins
    offered.mkdir()
    shutil.copy(ROOT / "benchmarks" / "envs" / "number_in_words.py", offered)
    proc = iterate(
        tmp_path,
        tiny_model,
        run,
        offered=offered,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    marker = run / "round-01" / "compose" / "summary.json"
    deadline = time.monotonic() + 300
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert marker.exists(), "the loop never reached compose"
    synth_manifest = (run / "round-01" / "synthesize" / "manifest.json").read_text()

    done = iterate(tmp_path, tiny_model, run, offered=offered, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = done.communicate(timeout=900)
    assert done.returncode == 0, err[-3000:]
    assert "synthesize: done" in err and "compose: done" in err
    # the baseline is measured after round 1 calibrated the seeds (the evaluation set is frozen
    # at their calibrated levels then), so after the kill at compose: once, in the rerun
    assert (run / "baseline" / "metrics.json").exists() and err.count(
        "\n  baseline: pass@1"
    ) == 1  # its line when done (another says it started)
    assert (run / "round-01" / "synthesize" / "manifest.json").read_text() == synth_manifest
    rounds = [json.loads(x) for x in (run / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [1]
    r = rounds[0]
    assert r["candidates"] == 0 and r["admitted"]["compose"] > 0 and r["train_steps"] == 4
    assert r["pool_size"] >= 10 and "pass@1" in r["evaluation"]
    assert "wrote no usable environment" in err
    # the tiny model never answers: nothing is calibrated and nothing is learned, and the round's lines say so
    assert r["admitted"]["calibrate"] == 0 and r["admitted"]["uncalibrated"] > 0
    assert r["train_weights_unchanged"] is True and len(r["config_hash"]) == 16
    line = "\n".join(err[err.index("round 1 done in ") :].splitlines()[:3])
    assert "held-out pass@1 " in line and "95% interval" in line and "before training: " in line
    assert "new environments: the model wrote 0 that parsed, a person offered 1 (1 passed review)" in line
    assert (
        f"{r['admitted']['dedupe']} were new, 0 had the right difficulty ({r['admitted']['uncalibrated']} let in unmeasured)"
        in line
    )
    assert "nothing to learn from: every group's answers scored the same" in line
    # the cheap contract first: calibrate measured only what dedupe let through
    calibrated = json.loads((run / "round-01" / "calibrate" / "summary.json").read_text())
    assert calibrated["entered"] == r["admitted"]["dedupe"]
    # every stage's cost, and the round line's totals from it; train's output kept and shown
    book = json.loads((run / "round-01" / "loop.json").read_text())
    assert {"evaluate", "train"} <= set(book["stages"]) and book["stages"]["evaluate"]["model_loads"] == 1
    assert book["totals"]["model_loads"] >= 1 and "load_share" in book["totals"] and "model_loads" not in line
    log = (run / "round-01" / "train" / "log.txt").read_text()
    assert "train: 4 steps" in log and "train: 4 steps" in err
    assert r["evaluation"]["items"] > 0 and len(r["evaluation"]["ci95"]) == 2
    pool = [json.loads(x) for x in (run / "pool" / "index.jsonl").read_text().splitlines()]
    assert {p["origin"] for p in pool} >= {"seed", "compose", "offered"}
    [joined] = [p for p in pool if p["origin"] == "offered"]
    assert joined["name"] == "number_in_words" and joined["joined_round"] == 1
    assert "new: number_in_words (offered by a person; joined this round)" in err
    assert [json.loads(x)["round"] for x in (run / "offered.jsonl").read_text().splitlines()] == [1]
    assert len(list((run / "pool" / "envs").iterdir())) == len(pool)
    # a second invocation with the round finished does nothing but say so
    again = iterate(tmp_path, tiny_model, run, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = again.communicate(timeout=300)
    assert again.returncode == 0 and "round 1: done" in err


def test_ctrl_c_in_the_loop_exits_130_and_says_where_the_partial_results_are(tiny_model, tmp_path):
    run = tmp_path / "run"
    proc = iterate(tmp_path, tiny_model, run, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    marker = run / "round-01" / "synthesize" / "run-config.json"
    deadline = time.monotonic() + 300
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    last = err.strip().splitlines()[-1]
    assert (
        last.startswith("interrupted in round 1 at synthesize (partial results in ") and "run the same command" in last
    )
    assert "Traceback" not in err
