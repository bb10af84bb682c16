"""One level rule for the whole loop: `sample` and `evaluate` draw only the levels calibration
measured in band (an environment measured with none is not drawn, one never calibrated is
drawn at every level), in the same way; and in the loop a seed never calibrated is calibrated
before it is sampled, at its first round, and the frozen evaluation set asks it there."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SEEDS

from evoenv_cli import loop as iterate
from evoenv_cli.artifacts import EnvLibrary
from evoenv_cli.config import EvaluateConfig, SampleConfig
from evoenv_cli.envfile import EnvFile
from evoenv_cli.llm.base import BaseBackend, Completion, Generation
from evoenv_cli.runtime.workers import SandboxWorkers
from evoenv_cli.stages import calibrate, evaluate, sample, train

NAMES = ("register_machine", "grid_shortest_path", "edit_distance")


def library(tmp_path: Path) -> EnvLibrary:
    """register_machine calibrated to levels 2 and 3, grid_shortest_path measured with no level
    in band, edit_distance never calibrated."""
    calibrations = {
        "register_machine": {"curve": {"2": {"pass_rate": 0.5}}, "levels": [2, 3], "misses": 0},
        "grid_shortest_path": {"curve": {"1": {"pass_rate": 0.0}}, "levels": [], "misses": 1},
    }
    members = []
    for name in NAMES:
        env = EnvFile.from_path(SEEDS / f"{name}.py")
        members.append(
            (env, {"origin": "seed", **({"calibration": calibrations[name]} if name in calibrations else {})})
        )
    iterate.write_pool(tmp_path / "lib", members)
    return EnvLibrary.open(tmp_path / "lib")


def test_sample_and_evaluate_on_a_calibrated_library_draw_only_calibrated_levels(tmp_path):
    lib = library(tmp_path)
    with SandboxWorkers() as pool:
        rows = sample.run(lib, SampleConfig(per_env=6, difficulty_from="index"), pool)
        cfg = EvaluateConfig(instances=4)
        items, skipped = evaluate.env_items(lib, cfg, SampleConfig(), pool)
    levels = {}
    for row in rows.rows:
        levels.setdefault(row["env_name"], []).append(row["difficulty"])
    assert sorted(levels["register_machine"]) == [2, 2, 2, 3, 3, 3]  # only calibrated levels, each as often
    assert "grid_shortest_path" not in levels  # measured, none in band: not drawn
    assert any(s["env"] == "grid_shortest_path.py" and "no level in band" in s["reason"] for s in rows.skipped)
    assert levels["edit_distance"] == [1, 2, 4, 6, 7, 9]  # never calibrated: every level, spread
    held = {}
    for it in items:
        held.setdefault(it.source, []).append(it.difficulty)
    assert held["register_machine"] == [2, 2, 3, 3] and "grid_shortest_path" not in held
    assert held["edit_distance"] == [1, 3, 6, 8]  # the same draw as sample's, at 4
    assert any(s["env"] == "grid_shortest_path.py" for s in skipped)


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"lr_{name}", SEEDS / f"{name}.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


class LevelSolver(BaseBackend):
    """A policy that solves register_machine's calibration instances below level 5 half the
    time and nothing else (it never writes an environment): a seed the model can learn at low
    levels only."""

    name = "scripted"

    def __init__(self, model: str):
        self.model = model
        self.rm = _module("register_machine")
        self.level_of = {
            calibrate.calibration_seed(0, "register_machine", lv, i): lv for lv in range(1, 11) for i in range(64)
        }

    def generate(self, prompts, sampling, *, prompt_ids=None):
        ids = self._check(prompts, sampling, prompt_ids)
        out = []
        for pid in ids:
            level = self.level_of.get(pid)
            ref = self.rm.solve(self.rm.generate(pid, level)) if level is not None else None
            texts = [
                f"<answer>{ref if ref is not None and level < 5 and j % 2 == 0 else 'no idea'}</answer>"
                for j in range(sampling.n)
            ]
            out.append(Generation([Completion(t, 4, "stop") for t in texts], 10))
        return out


RECIPE = """\
runtime:
  workers: 2
sample:
  per_env: 4
synthesize:
  n: 1
  max_requests: 1
  batch: 1
compose:
  n: 0
review:
  votes: 1
calibrate:
  coarse_levels: [1, 4, 7, 10]
  instances: 4
  samples: 4
evaluate:
  instances: 4
  samples: 1
iterate:
  bench: []
  baseline: true
  train_launch: {python} {train}
"""


@pytest.mark.slow
def test_a_never_calibrated_seed_is_calibrated_before_it_is_sampled_in_the_loop(tmp_path):
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    for name in ("register_machine", "grid_shortest_path"):
        shutil.copy(SEEDS / f"{name}.py", seeds)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE.format(python=sys.executable, train=ROOT / "tests" / "support" / "scripted_train.py"))
    spec = iterate.cfgmod.load_recipe(recipe)
    run = tmp_path / "run"
    loop = iterate.Loop(run, recipe, "scripted", spec.iterate, seeds, log=lambda m: None, backend_factory=LevelSolver)
    iterate.run(loop, 1)
    r1 = run / "round-01"
    rotated = {v["name"]: v for v in map(json.loads, (r1 / "rotate" / "verdicts.jsonl").read_text().splitlines())}
    assert set(rotated) == {"register_machine", "grid_shortest_path"}  # both seeds measured at round 1
    rm = rotated["register_machine"]
    assert rm["admitted"] and rm["levels"] and max(rm["levels"]) < 5
    assert not rotated["grid_shortest_path"]["admitted"]  # never solved: too hard
    rows = [json.loads(x) for x in (r1 / "sample" / "train.jsonl").read_text().splitlines()]
    assert {r["env_name"] for r in rows} == {"register_machine"}
    assert {r["difficulty"] for r in rows} <= set(rm["levels"])
    # the pool keeps the too-hard seed (not retired after one miss) but with no level to draw
    pool = {p["name"]: p for p in map(json.loads, (run / "pool" / "index.jsonl").read_text().splitlines())}
    assert pool["grid_shortest_path"]["calibration"]["levels"] == []
    assert pool["grid_shortest_path"]["calibration"]["misses"] == 1
    # the frozen evaluation set: the seeds at the levels round 1 calibrated
    eval_index = [json.loads(x) for x in (run / "eval-set" / "index.jsonl").read_text().splitlines()]
    assert {e["name"]: e["calibration"]["levels"] for e in eval_index} == {
        "register_machine": rm["levels"],
        "grid_shortest_path": [],
    }
    held = [json.loads(x) for x in (run / "baseline" / "samples.jsonl").read_text().splitlines()]
    assert held and {s["item"].split(":")[0] for s in held if s["kind"] == "env"} == {"register_machine"}


@pytest.mark.slow
def test_a_round_with_nothing_above_chance_trains_nothing_and_the_loop_goes_on(tmp_path):
    """Only a seed the policy never solves: calibration finds no level in band and above chance,
    so the round samples nothing, trains nothing (the policy carries over, named in the train
    marker), is evaluated, and says so on its summary; the run ends with exit 0, not an error."""
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    shutil.copy(SEEDS / "grid_shortest_path.py", seeds)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE.format(python=sys.executable, train=ROOT / "tests" / "support" / "scripted_train.py"))
    spec = iterate.cfgmod.load_recipe(recipe)
    run = tmp_path / "run"
    loop = iterate.Loop(run, recipe, "scripted", spec.iterate, seeds, log=lambda m: None, backend_factory=LevelSolver)
    summaries = iterate.run(loop, 1)
    r1 = run / "round-01"
    assert (r1 / "sample" / "train.jsonl").read_text() == ""
    assert iterate.stage.result_in(train.STAGE, r1 / "train").policy == "scripted"  # carried over
    assert not (r1 / "train" / "metrics.jsonl").exists()  # the trainer never started
    assert (r1 / "evaluate" / "metrics.json").exists()
    assert summaries[-1]["signal"] == "skipped" and summaries[-1]["train_steps"] == 0
    assert "no training" in iterate.round_line(summaries[-1])
