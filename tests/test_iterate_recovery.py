"""Kill -9 anywhere in the loop, rerun, and get what a run never killed gets: every file of the
run the same (times, logs and the recipe hash aside), the final pool byte for byte. The loop
runs in a child process (tests/support/loop_child.py) with a scripted policy and trainer, so a kill
costs seconds.

A kill in round 1 is rerun to the end of round 1 and compared with a clean one-round run, whose
files are the two-round run's first round, and from which a new process's round 2 writes what the
unbroken run's did (both tested): what a kill in round 1 could change shows in those files, and
a rerun through round 2 as well would double each case's time for nothing more. Round 2's kills
run both rounds."""

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

CHILD = ROOT / "tests" / "support" / "loop_child.py"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
ROUNDS = 2
SEED_NAMES = ("coin_change_ways", "edit_distance", "subset_sum_planted", "topological_order")

# the call limits ten times the defaults, as in tests/recipes/tiny.yaml: a rerun is compared
# file for file with the clean run, and a call stalled on a loaded machine must not be judged at
# `budget` in one and not the other
RECIPE = """\
runtime:
  workers: 2
  limits: {{generate_s: 10, generate_from_s: 10, prompt_s: 10, solve_s: 20, score_s: 10, grace_s: 2}}
backend:
  kind: hf
  model: scripted-policy
sample:
  per_env: 1
synthesize:
  n: 1
  max_requests: 2
  batch: 2
compose:
  n: 2
review:
  votes: 1
calibrate:
  coarse_levels: [1, 5]
  instances: 1
  samples: 2
  on_no_answers: admit
evaluate:
  instances: 1
  samples: 1
iterate:
  bench: [{bench}]
  baseline: true
  train_launch: {python} {train}
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("loop")
    seeds = root / "seeds"
    seeds.mkdir()
    for name in SEED_NAMES:
        shutil.copy(ROOT / "seeds" / f"{name}.py", seeds)
    recipe = root / "recipe.yaml"
    recipe.write_text(
        RECIPE.format(
            bench=ROOT / "recipes" / "bench" / "tiny-arithmetic.jsonl",
            python=sys.executable,
            train=ROOT / "tests" / "support" / "scripted_train.py",
        )
    )
    clean = root / "clean"
    counts = json.loads(child(clean, recipe, seeds).stdout.splitlines()[-1])
    one = json.loads(child(root / "clean-1", recipe, seeds, rounds=1).stdout.splitlines()[-1])
    return root, recipe, seeds, final_state(clean), counts, one


def clean_of(root: Path, rounds: int) -> Path:
    """The unkilled run a rerun of `rounds` rounds is compared with."""
    return root / ("clean" if rounds == ROUNDS else f"clean-{rounds}")


def child(
    run: Path,
    recipe: Path,
    seeds: Path,
    *kill: str,
    expect_killed: bool = False,
    env: dict = ENV,
    rounds: int = ROUNDS,
):
    p = subprocess.run(
        [sys.executable, str(CHILD), str(run), str(recipe), str(seeds), str(rounds), *kill],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if expect_killed:
        assert p.returncode == -9, f"not killed (exit {p.returncode}): {p.stderr[-2000:]}"
    else:
        assert p.returncode == 0, p.stderr[-3000:]
    return p


def final_state(run: Path) -> dict:
    """What must not depend on a kill; the run folder's own path (in the policy's name) aside."""
    pool = run / "pool"
    return {
        "rounds": (run / "rounds.jsonl").read_text().replace(str(run), "RUN"),
        "pool_index": (pool / "index.jsonl").read_bytes().replace(str(run).encode(), b"RUN"),
        "pool_files": {f.name: f.read_bytes() for f in sorted((pool / "envs").iterdir())},
        "leftovers": sorted(p.name for p in run.iterdir() if p.name.startswith("pool.")),
    }


# what differs between two runs by design: when things happened and how long they took, the
# logs that record each attempt, and the hash of the recipe file the run was started from
TIMES = {"started", "finished", "recorded", "wall_s", "load_s", "seconds", "elapsed_s", "config_hash"}
LOGS = {"log.txt", "loop.json"}


def timeless(value):
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items() if k not in TIMES and "seconds" not in k}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


def every_file(run: Path) -> dict:
    """Every file of the run, its path and its content with the run's own folder as RUN;
    JSON read without its times."""
    out = {}
    for f in sorted(p for p in run.rglob("*") if p.is_file() and p.name not in LOGS):
        text = f.read_bytes().replace(str(run).encode(), b"RUN")
        if f.suffix == ".json":
            text = timeless(json.loads(text))
        elif f.suffix == ".jsonl":
            text = [timeless(json.loads(line)) for line in text.splitlines()]
        out[str(f.relative_to(run))] = text
    return out


def same_files(run: Path, clean: Path) -> None:
    got, want = every_file(run), every_file(clean)
    assert sorted(got) == sorted(want)
    assert [k for k in want if got[k] != want[k]] == []


@pytest.mark.slow
def test_a_clean_run_changes_the_pool_and_measures_against_one_baseline(setup):
    root, _, _, state, counts, _ = setup
    rounds = [json.loads(x) for x in state["rounds"].splitlines()]
    assert [r["round"] for r in rounds] == [1, 2]
    assert sum(r["joined"] for r in rounds) > 0  # composites joined: the swaps had work to do
    assert counts["swaps"] >= 2 and state["leftovers"] == []
    assert all("delta_vs_baseline" in r["evaluation"] and r["evaluation"]["items"] > 0 for r in rounds)
    for r in (1, 2):
        book = json.loads((root / "clean" / f"round-{r:02d}" / "loop.json").read_text())
        assert {"synthesize", "calibrate", "train", "evaluate"} <= set(book["stages"])
        assert book["totals"]["sandbox_calls"] > 0 and book["totals"]["wall_s"] > 0
        assert "scripted train: " in (root / "clean" / f"round-{r:02d}" / "train" / "log.txt").read_text()
    # one policy load per round at most, plus the baseline's at the start (the scripted trainer counts one)
    loads = [
        json.loads((root / "clean" / f"round-{r:02d}" / "loop.json").read_text())["totals"]["model_loads"]
        for r in (1, 2)
    ]
    assert loads == [3, 2]
    # no timings in what the pool is made of
    assert b"wall_s" not in state["pool_index"] and b"import_seconds" not in state["pool_index"]


@pytest.mark.slow
def test_a_one_round_run_writes_the_two_round_run_s_first_round(setup):
    """What the round-1 kills are compared with: every file of the one-round run is the two-round
    run's, but the pool's index (round 2 rotated it) and rounds.jsonl (one line of its two); and
    round 2 run by a new process from those files alone writes what the unbroken run wrote."""
    root, recipe, seeds, _, counts, one = setup
    got, want = every_file(clean_of(root, 1)), every_file(clean_of(root, 2))
    assert len(got) > 50 and set(got) <= set(want)
    assert [k for k in got if got[k] != want[k]] == ["pool/index.jsonl", "rounds.jsonl"]
    assert got["rounds.jsonl"] == want["rounds.jsonl"][:1]
    assert one["steps"] == {k: v for k, v in counts["steps"].items() if k.startswith("1/")}
    continued = root / "continued"  # a run of its own: the files hold their run's path
    child(continued, recipe, seeds, rounds=1)
    child(continued, recipe, seeds, rounds=2)
    same_files(continued, clean_of(root, 2))


ROUND_STEPS = ("synthesize", "validate", "review", "compose", "dedupe", "calibrate", "rotate", "sample", "train")


@pytest.mark.slow
@pytest.mark.parametrize("step", ["1/baseline", *(f"1/{s}" for s in ROUND_STEPS), "1/evaluate", "2/train"])
def test_a_kill_at_a_random_point_of_each_step_then_a_rerun_writes_every_file_the_unkilled_run_does(setup, step):
    """Every point of the loop lies in one step's range, so a random point in each step covers
    what a kill at fixed fractions of the run (0.03 to 0.97 of its changes, a test of its own
    before) covered, and compares every file, not only the pool and the rounds."""
    root, recipe, seeds, _, counts, one = setup
    rng = random.Random(step)  # random, and the same on every run of the test
    run = root / f"step-{step.replace('/', '-')}"
    rounds = int(step.split("/")[0])  # through the kill's round (module docstring)
    if step.endswith("/train"):  # the child's steps: tests/support/scripted_train.py kills the loop and itself
        where = f"round-{rounds:02d}:{rng.randint(1, 4)}"
        child(run, recipe, seeds, expect_killed=True, env={**ENV, "SCRIPTED_TRAIN_KILL": where}, rounds=rounds)
    else:
        first, last = (one if rounds == 1 else counts)["steps"][step]
        assert first <= last, f"{step} changed nothing on disk: nothing to kill it in"
        child(run, recipe, seeds, "--kill-at", str(rng.randint(first, last)), expect_killed=True, rounds=rounds)
    child(run, recipe, seeds, rounds=rounds)
    same_files(run, clean_of(root, rounds))
    assert final_state(run)["leftovers"] == []  # no pool.new / pool.old folder left behind


@pytest.mark.slow
@pytest.mark.parametrize("swap", [1, 2])
def test_kill_between_the_two_renames_of_a_pool_swap_loses_nothing(setup, swap):
    root, recipe, seeds, *_ = setup
    run = root / f"swap-{swap}"
    # swap K is round K's (one a round): through that round, as the step kills
    child(run, recipe, seeds, "--kill-in-swap", str(swap), expect_killed=True, rounds=swap)
    assert not (run / "pool").exists() and (run / "pool.new" / "index.jsonl").exists()
    child(run, recipe, seeds, rounds=swap)
    assert final_state(run) == final_state(clean_of(root, swap))


def _library(tmp_path: Path, name: str, files: dict[str, str]) -> list:
    from evoenv_cli.envfile import EnvFile

    src = tmp_path / f"src-{name}"
    src.mkdir()
    out = []
    for fname, text in files.items():
        (src / fname).write_text(text)
        out.append((EnvFile.from_path(src / fname), {"origin": name}))
    return out


def test_recover_rolls_a_complete_new_copy_forward_and_an_incomplete_one_back(tmp_path):
    from evoenv_cli.loop import recover, write_pool

    pool = tmp_path / "pool"
    write_pool(pool, _library(tmp_path, "old", {"a.py": "A = 1\n"}))
    write_pool(pool.with_name("pool.new"), _library(tmp_path, "new", {"b.py": "B = 2\n"}))
    pool.rename(pool.with_name("pool.old"))  # killed between the two renames of a swap
    recover(pool)
    assert [f.name for f in (pool / "envs").iterdir()] == ["b.py"]
    assert not pool.with_name("pool.old").exists() and not pool.with_name("pool.new").exists()

    (pool.with_name("pool.new") / "envs").mkdir(parents=True)  # killed while the new copy was written
    (pool.with_name("pool.new") / "envs" / "c.py").write_text("C = 3\n")
    pool.rename(pool.with_name("pool.old"))
    recover(pool)
    assert [f.name for f in (pool / "envs").iterdir()] == ["b.py"]
    assert not pool.with_name("pool.new").exists()
