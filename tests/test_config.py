import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, SEEDS

from evoenv_cli.artifacts import InputError
from evoenv_cli.config import Recipe, load_recipe, override


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


@pytest.mark.parametrize("text, needle", [
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
])
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
    r = subprocess.run([exe, "sample", SEEDS, "-o", tmp_path / "o.jsonl", "--config", p],
                       capture_output=True, text=True)
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
