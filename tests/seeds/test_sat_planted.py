"""Tests for the sat_planted seed: every satisfying assignment is accepted and nothing else
is, the formula hides its planted assignment, and instances are deterministic."""

import importlib.util
import json
import time
from itertools import pairwise, product
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "seeds" / "sat_planted.py"
_SPEC = importlib.util.spec_from_file_location("seed_sat_planted", _PATH)
env = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(env)

TINY = {
    "variables": 3,
    "clauses": [[1, 2, 3], [-1, -2, 3], [1, -2, -3], [-1, 2, -3]],
    "planted": "001",
}


def _satisfies(bits: str, clauses: list[list[int]]) -> bool:
    return all(any((bits[abs(lit) - 1] == "1") == (lit > 0) for lit in clause) for clause in clauses)


def test_tiny_instance_accepts_exactly_the_satisfying_assignments():
    accepted = {"".join(bits) for bits in product("01", repeat=3) if env.score(TINY, "".join(bits)) == 1.0}
    assert accepted == {"001", "010", "100", "111"}


def test_reference_and_a_different_valid_assignment_score_one():
    assert env.solve(TINY) == "001"
    assert env.score(TINY, "001") == 1.0
    assert env.score(TINY, "111") == 1.0


@pytest.mark.parametrize("answer", [" 001 ", "0 0 1", "0\t0\n1", "\n001\n"])
def test_whitespace_is_tolerated(answer):
    assert env.score(TINY, answer) == 1.0


@pytest.mark.parametrize(
    "answer",
    [
        "000",  # x3 flipped: the first clause has no true literal
        "011",  # x2 flipped: the third clause has no true literal
        "00",
        "0010",
        "0,0,1",
        "002",
        "TFT",
        "",
        "None",
        "1.0",
        "٠٠١",  # Arabic-Indic digits
    ],
)
def test_invalid_answers_score_zero(answer):
    result = env.score(TINY, answer)
    assert result == 0.0
    assert type(result) is float


def test_a_huge_answer_scores_zero():
    assert env.score(TINY, "0" * 1_000_000) == 0.0


def test_flipping_a_critical_bit_of_a_generated_reference_fails():
    instance = env.generate(5, 10)
    bits = env.solve(instance)
    flips = [bits[:i] + "10"[int(bits[i])] + bits[i + 1 :] for i in range(len(bits))]
    broken = [flip for flip in flips if not _satisfies(flip, instance["clauses"])]
    assert broken
    assert all(env.score(instance, flip) == 0.0 for flip in broken)


@pytest.mark.parametrize("difficulty", [1, 5, 10])
def test_generated_formulas_are_well_formed_and_hide_the_assignment(difficulty):
    for seed in range(20):
        instance = env.generate(seed, difficulty)
        count, clauses, planted = instance["variables"], instance["clauses"], instance["planted"]
        assert len(planted) == count
        assert len({tuple(clause) for clause in clauses}) == len(clauses)
        for clause in clauses:
            variables = [abs(lit) for lit in clause]
            assert len(set(variables)) == 3 and all(1 <= v <= count for v in variables)
        complement = "".join("10"[int(bit)] for bit in planted)
        assert env.score(instance, complement) == 1.0


@pytest.mark.parametrize("difficulty", [1, 5, 10])
def test_generated_instances_are_deterministic_and_survive_json(difficulty):
    for seed in range(20):
        instance = env.generate(seed, difficulty)
        assert instance == env.generate(seed, difficulty)
        decoded = json.loads(json.dumps(instance))
        assert env.score(decoded, env.solve(decoded)) == 1.0
        assert env.solve(decoded) not in env.prompt(decoded)


@pytest.mark.parametrize("difficulty", [1, 5, 10])
def test_references_vary_across_seeds(difficulty):
    assert len({env.solve(env.generate(seed, difficulty)) for seed in range(30)}) >= 5


def test_difficulty_scales_the_formula_and_is_clamped():
    sizes = [env.generate(0, d)["variables"] for d in range(1, 11)]
    assert sizes == sorted(sizes) and sizes[0] == 3 and sizes[-1] == 49
    hardest = env.generate(0, 10)
    assert len(hardest["clauses"]) / hardest["variables"] > 4.2
    assert env.generate(3, -4) == env.generate(3, 1)
    assert env.generate(3, 11) == env.generate(3, 10)


def test_calls_at_difficulty_ten_are_fast():
    start = time.perf_counter()
    for seed in range(20):
        instance = env.generate(seed, 10)
        env.prompt(instance)
        env.score(instance, env.solve(instance))
        env.score(instance, "x" * 1_000_000)
    assert (time.perf_counter() - start) / (20 * 5) < 0.05


def test_level_one_is_tiny_and_formulas_grow_to_level_ten():
    for seed in range(30):
        instance = env.generate(seed, 1)
        # Three variables and all six clauses the planted assignment allows: only it and its
        # complement satisfy them.
        assert instance["variables"] == 3 and len(instance["clauses"]) == 6
        accepted = {"".join(bits) for bits in product("01", repeat=3) if env.score(instance, "".join(bits)) == 1.0}
        planted = instance["planted"]
        assert accepted == {planted, "".join("10"[int(bit)] for bit in planted)}
    formulas = [env.generate(0, d) for d in range(1, 11)]
    assert all(a["variables"] < b["variables"] for a, b in pairwise(formulas))
    assert all(len(a["clauses"]) < len(b["clauses"]) for a, b in pairwise(formulas))
