"""The fast lane's guard catches an unmarked slow test: a test run in a pytest of its own that
sleeps past the wall budget, or computes past the CPU budget, fails with a message saying to mark
it slow; marked slow, or with the guard turned off, the same tests pass."""

import os
import subprocess
import sys
from pathlib import Path

SLEEPY = """
import time

import pytest
from support.fast_lane import budget, wall_budget


def sleep_past_the_budget():
    time.sleep(wall_budget() + 0.5)  # the wall budget as the guard computes it, load included


def compute_past_the_budget():
    start = time.process_time()
    while time.process_time() - start < budget() + 0.3:
        pass


def test_unmarked_sleeper():
    sleep_past_the_budget()


def test_unmarked_computer():
    compute_past_the_budget()


@pytest.mark.slow
def test_marked_sleeper():
    sleep_past_the_budget()


@pytest.mark.slow
def test_marked_computer():
    compute_past_the_budget()
"""


def run(tmp_path: Path, budget: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_sleepy.py").write_text(SLEEPY)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    env["EVOENV_FAST_BUDGET_S"] = budget
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "support.fast_lane",
            "-p",
            "no:cacheprovider",
            "-o",
            "markers=slow: s",
            str(tmp_path / "test_sleepy.py"),
            "--rootdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env=env,
    )


def test_an_unmarked_slow_test_fails_and_says_to_mark_it(tmp_path):
    r = run(tmp_path, "0.3")
    assert r.returncode == 1, r.stdout
    assert "2 failed, 2 passed" in r.stdout, r.stdout
    assert "test_unmarked_sleeper: call took" in r.stdout, r.stdout
    assert "test_unmarked_computer: call used" in r.stdout and "mark it @pytest.mark.slow" in r.stdout


def test_the_guard_can_be_turned_off(tmp_path):
    r = run(tmp_path, "0")
    assert r.returncode == 0 and "4 passed" in r.stdout, r.stdout
