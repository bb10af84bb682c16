import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, SEEDS

from evoenv_cli.config import Recipe, load_recipe, override
from evoenv_cli.errors import InputError


def test_default_recipe_file_matches_the_dataclasses():
    path = ROOT / "recipes" / "default.yaml"
    assert load_recipe(path) == Recipe()
    sections = set(yaml.safe_load(path.read_text()))
    assert sections == {f.name for f in dataclasses.fields(Recipe)}


@pytest.mark.parametrize("name", ["cpu-demo", "single-gpu", "paper-8xgpu"])
def test_shipped_recipes_load(name):
    load_recipe(ROOT / "recipes" / f"{name}.yaml")


def test_sections_override_defaults_and_nested_limits_build(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text("runtime:\n  workers: 3\n  limits:\n    score_s: 0.25\nvalidate:\n  max_leak_share: 0.3\n")
    r = load_recipe(p)
    assert r.runtime.workers == 3 and r.runtime.limits.score_s == 0.25
    assert r.runtime.limits.solve_s == 2.0
    assert r.validate.max_leak_share == 0.3
    assert override(r.sample, per_env=5, seed=None).per_env == 5


@pytest.mark.parametrize(
    "text, needle",
    [
        ("validate:\n  max_leek_share: 0.3\n", "did you mean 'max_leak_share'"),
        ("valdate:\n  x: 1\n", "did you mean 'validate'"),
        ("runtime: [1, 2\n", "not valid YAML"),
        ("- 1\n", "expected a mapping"),
        ("train:\n  num_generations: 1\n", "train.num_generations: must be at least 2"),
        ("train:\n  lora_dropout: 1.0\n", "train.lora_dropout: must be less than 1"),
        ("sample:\n  difficulty: 11\n", "sample.difficulty: must be at most 10"),
        ("sample:\n  format: parquet\n", "sample.format: must be one of trl, verl, openrlhf"),
        ("review:\n  levels: [1, true]\n", "review.levels: item 1: expected an integer"),
        ("runtime:\n  limits:\n    score_s: 0\n", "runtime.limits.score_s: must be greater than 0"),
        ("backend:\n  options: [1]\n", "backend.options: expected a mapping"),
        ("iterate:\n  bench: notalist\n", "iterate.bench: expected a list"),
        ("calibrate:\n  band: [0.9, 0.1]\n", "bad.yaml: calibrate.band: must be in ascending order"),
        (
            "answer:\n  tag: final\n  instruction: Answer between <answer> and </answer>.\n",
            "bad.yaml: answer.instruction: must ask for the answer in the tag (<final> and </final> missing",
        ),
    ],
)
def test_bad_recipes_name_the_file_and_the_problem(tmp_path, text, needle):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        load_recipe(p)
    assert needle in str(e.value) and "bad.yaml" in str(e.value)


def test_cli_reports_a_bad_recipe_in_one_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("sample:\n  per_envv: 3\n")
    exe = Path(sys.executable).with_name("evoenv")
    r = subprocess.run(
        [exe, "sample", SEEDS, "-o", tmp_path / "o.jsonl", "--config", p], capture_output=True, text=True
    )
    assert r.returncode == 2 and "per_envv" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_defaults_satisfy_every_field_rule():
    from evoenv_cli.config import check_values

    recipe = Recipe()
    for f in dataclasses.fields(recipe):
        check_values(getattr(recipe, f.name), f.name)
    check_values(recipe.runtime.limits, "runtime.limits")


def test_a_float_yaml_reads_as_a_string_is_taken_as_the_number(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text("train:\n  learning_rate: 1e-6\n  beta: 4e-2\n")
    r = load_recipe(p)
    assert (r.train.learning_rate, r.train.beta) == (1e-6, 0.04)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("iterate:\n  synthesize_n: 8\n", "iterate: unknown key 'synthesize_n' (it is synthesize.n now)"),
        ("iterate:\n  compose_n: 8\n", "iterate: unknown key 'compose_n' (it is compose.n now)"),
        ("iterate:\n  sample_per_env: 8\n", "iterate: unknown key 'sample_per_env' (it is sample.per_env now)"),
        (
            "sample:\n  answer_instruction: x\n",
            "sample: unknown key 'answer_instruction' (it is answer.instruction now)",
        ),
        ("reward:\n  answer_tag: x\n", "reward: unknown key 'answer_tag' (it is answer.tag now)"),
        ("calibrate:\n  answer_tag: x\n", "calibrate: unknown key 'answer_tag' (it is answer.tag now)"),
        ("evaluate:\n  answer_tag: x\n", "evaluate: unknown key 'answer_tag' (it is answer.tag now)"),
        (
            "evaluate:\n  bench_instruction: x\n",
            "evaluate: unknown key 'bench_instruction' (it is answer.bench_instruction now)",
        ),
    ],
)
def test_a_moved_setting_says_where_it_lives_now(tmp_path, text, needle):
    p = tmp_path / "old.yaml"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        load_recipe(p)
    assert str(e.value) == f"{p}: {needle}"


def test_flags_are_checked_by_the_fields_own_rules():
    calibrate = Recipe().calibrate
    with pytest.raises(InputError, match=r"^--band: item 1 \(1.5\) must be at most 1 "):
        override(calibrate, band=[0.1, 1.5])
    with pytest.raises(InputError, match=r"^--band: must be in ascending order"):
        override(calibrate, band=[0.9, 0.1])
    with pytest.raises(InputError, match=r"^--lr: must be at least 0"):
        override(Recipe().train, learning_rate=-1.0)  # the flag is the field's metadata
    assert override(calibrate, band=[0.2, 0.8]).band == [0.2, 0.8]


@pytest.mark.parametrize(
    "band, needle",
    [
        ("0.9,0.1", "--band: must be in ascending order (low first, then high) (got [0.9, 0.1])"),
        ("0.1,1.5", "--band: item 1 (1.5) must be at most 1 (got [0.1, 1.5])"),
        ("0.1", "--band: must hold exactly 2 values (got [0.1])"),
        ("low,high", "--band: expected LO,HI, two numbers (got 'low,high')"),
    ],
)
def test_a_bad_band_flag_is_a_one_line_error(tmp_path, band, needle):
    exe = Path(sys.executable).with_name("evoenv")
    r = subprocess.run(
        [exe, "calibrate", SEEDS, "--out", tmp_path / "o", "--band", band], capture_output=True, text=True
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert needle in r.stderr and not (tmp_path / "o").exists()


def test_one_answer_tag_reaches_sample_reward_calibration_and_evaluation(tmp_path):
    """`answer.tag` alone changed: every prompt asks for <final>, a demonstration answers in it,
    and the reward, calibration and evaluation all read it (and no longer read <answer>)."""
    import json
    import shutil

    from conftest import ROOT, ScriptedBackend

    from evoenv_cli.artifacts import EnvLibrary, prepare_out_dir
    from evoenv_cli.config import prompt_settings
    from evoenv_cli.integrations.rewards import EnvReward
    from evoenv_cli.runtime.workers import SandboxWorkers
    from evoenv_cli.stages import calibrate, evaluate, sample

    p = tmp_path / "r.yaml"
    p.write_text(
        "answer:\n  tag: final\nsample:\n  per_env: 2\n  demonstrations: 1\n"
        "calibrate:\n  coarse_levels: [1]\n  instances: 1\n  samples: 1\n"
        "evaluate:\n  instances: 1\n  samples: 1\n"
    )
    recipe = load_recipe(p)
    assert prompt_settings(recipe) != prompt_settings(Recipe())  # --resume sees the change
    (tmp_path / "lib").mkdir()
    shutil.copy(SEEDS / "register_machine.py", tmp_path / "lib")
    lib = EnvLibrary.open(tmp_path / "lib")
    with SandboxWorkers() as pool:
        rows = sample.run(lib, recipe.sample, pool, answer=recipe.answer).rows
    assert rows and all(r["prompt"][-1]["content"].endswith(recipe.answer.task_text) for r in rows)
    assert "<final>" in recipe.answer.task_text and "<answer>" not in recipe.answer.task_text
    assert all(r["prompt"][1]["content"].startswith("<final>") for r in rows)  # the demonstration

    reward = EnvReward(lib.files, answer_tag=recipe.answer.tag)  # as train and serve-reward build it
    try:
        assert reward.score_rows(rows, [f"<final>{r['answer']}</final>" for r in rows]) == [1.0] * len(rows)
        assert reward.score_rows(rows, [f"<answer>{r['answer']}</answer>" for r in rows]) == [0.0] * len(rows)
    finally:
        reward.close()

    def replies(tag):
        return ScriptedBackend(lambda text, pid, j: f"so <{tag}>7</{tag}>")

    for tag, extracted in (("final", "7"), ("answer", None)):
        out = prepare_out_dir(tmp_path / f"cal-{tag}", False, False)
        backend = replies(tag)
        calibrate.run(lib, recipe.calibrate, recipe.sample, recipe.runtime, backend, out, "m", answer=recipe.answer)
        assert all(c.endswith(recipe.answer.task_text) for call in backend.calls for c in call)
        got = [json.loads(x)["answer"] for x in (out / "responses.jsonl").read_text().splitlines()]
        assert got and all(a == extracted for a in got)

        out = prepare_out_dir(tmp_path / f"eval-{tag}", resume=False, clean=False, envs=False)
        backend = replies(tag)
        evaluate.run(
            out,
            recipe.evaluate,
            evaluate.ModelSpec("p", lambda b=backend: b),
            library=lib,
            benches=evaluate.load_benches([str(ROOT / "tests" / "fixtures" / "bench" / "math.jsonl")]),
            sample_cfg=recipe.sample,
            answer=recipe.answer,
            runtime=recipe.runtime,
        )
        asked = [c for call in backend.calls for c in call]
        assert any(c.endswith(recipe.answer.bench_text) for c in asked)
        assert all(c.endswith((recipe.answer.task_text, recipe.answer.bench_text)) for c in asked)
        got = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
        assert {r["kind"] for r in got} == {"env", "bench"} and all(r["answer"] == extracted for r in got)


def test_a_format_weight_train_would_refuse_is_refused_when_the_recipe_is_read(tmp_path):
    """`format_weight: 1` used to pass the recipe (bound: at most 1), sample with it, and fail at
    train (bound: below 1); one bound now, read at load."""
    from evoenv_cli.config import load_recipe
    from evoenv_cli.errors import InputError

    recipe = tmp_path / "r.yaml"
    recipe.write_text("reward:\n  format_weight: 1\n")
    with pytest.raises(InputError, match=r"reward\.format_weight: must be less than 1"):
        load_recipe(recipe)
