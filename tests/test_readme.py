"""The README's "One stage by hand" block runs as written on a fresh clone: its fenced bash
block is taken from README.md and run line by line (`set -e`) in a folder holding what a
clone has (seeds/, recipes/, tests/recipes/) and nothing built, with this environment's
`evoenv` on PATH. About a minute with the tiny model on 2 cores."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow


def by_hand_block() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("### One stage by hand")
    start = text.index("```bash\n", start) + len("```bash\n")
    return text[start : text.index("```", start)]


def test_the_block_names_every_stage_and_writes_only_under_runs():
    block = by_hand_block()
    commands = [line.split()[1] for line in block.splitlines() if line.startswith("evoenv ")]
    assert commands == [
        "tiny-model",
        "synthesize",
        "validate",
        "review",
        "compose",
        "dedupe",
        "calibrate",
        "sample",
        "train",
        "evaluate",
    ]
    outs = [w for line in block.splitlines() for a, w in zip(line.split(), line.split()[1:]) if a == "--out"]
    assert outs and all(o.startswith("runs/") for o in outs)


def test_one_stage_by_hand_runs_as_written_on_a_fresh_clone(tmp_path):
    clone = tmp_path / "clone"
    for part in ("seeds", "recipes", "tests/recipes"):
        shutil.copytree(ROOT / part, clone / part, ignore=shutil.ignore_patterns("__pycache__"))
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    p = subprocess.run(
        ["bash", "-euxo", "pipefail", "-c", by_hand_block()],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    hand = clone / "runs" / "hand"
    for marker in (
        "synth/summary.json",
        "validate/summary.json",
        "review/summary.json",
        "compose/summary.json",
        "dedupe/summary.json",
        "calibrate/summary.json",
        "train.jsonl",
        "ckpt/train-manifest.json",
        "eval/metrics.json",
    ):
        assert (hand / marker).exists(), marker
    assert list((hand / "calibrate" / "envs").glob("*.py")), "the chain after compose must not be empty"
    assert (hand / "train.jsonl").read_text().strip()
