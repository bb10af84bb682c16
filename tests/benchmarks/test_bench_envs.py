"""The learning benchmark's own environments (benchmarks/envs/): admitted by `evoenv validate`
in the real sandbox like any environment, and number_in_words spells and scores numbers as its
prompt asks. They are trusted, hand-written files, so the spelling checks load them in-process."""

import importlib.util
import json
from pathlib import Path

import pytest

ENVS = Path(__file__).resolve().parents[2] / "benchmarks" / "envs"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_env_{name}", ENVS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_bench_environment_passes_validate(evoenv, tmp_path):
    files = sorted(p.name for p in ENVS.glob("*.py"))
    assert files, "benchmarks/envs/ holds no environment"
    r = evoenv("validate", ENVS, "--out", tmp_path / "validate")
    assert r.returncode == 0, r.stderr
    verdicts = [json.loads(x) for x in (tmp_path / "validate" / "verdicts.jsonl").read_text().splitlines()]
    assert {v["file"]: (v["admitted"], v["stage"]) for v in verdicts} == {f: (True, "admitted") for f in files}


@pytest.mark.parametrize(
    "number, words",
    [
        (0, "zero"),
        (13, "thirteen"),
        (40, "forty"),
        (21, "twenty-one"),
        (105, "one hundred five"),
        (4071, "four thousand seventy-one"),
        (1_000_000, "one million"),
        (12_000_300_019, "twelve billion three hundred thousand nineteen"),
    ],
)
def test_number_in_words_spells_the_number(number, words):
    env = load("number_in_words")
    assert env.solve({"number": number}) == words
    assert env.score({"number": number}, words) == 1.0


def test_number_in_words_scores_spellings_not_digits_or_near_misses():
    env = load("number_in_words")
    inst = {"number": 105}
    for same in ("One hundred and five.", " one  hundred five ", "ONE HUNDRED FIVE"):
        assert env.score(inst, same) == 1.0, same
    for wrong in ("105", "one hundred fifty", "one hundred", "", "five hundred one", "x" * 10_000):
        assert env.score(inst, wrong) == 0.0, wrong
    assert env.score({"number": 42}, "forty two") == env.score({"number": 42}, "Forty-Two") == 1.0


def test_number_in_words_adds_a_digit_a_level():
    env = load("number_in_words")
    digits = [{len(str(env.generate(seed, d)["number"])) for seed in range(20)} for d in range(1, 9)]
    assert digits == [{1, 2}, {2}, {3}, {4}, {5}, {6}, {7}, {8}]
    assert env.generate(7, 3) == env.generate(7, 3) and env.generate(7, 3) != env.generate(8, 3)
