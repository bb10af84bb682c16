"""Tests for the subset_sum_planted seed: every subset with the target sum is accepted and
nothing else is, instances are deterministic, and generate_from hits the value's target."""

import importlib.util
import json
import time
from itertools import combinations, pairwise
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "seeds" / "subset_sum_planted.py"
_SPEC = importlib.util.spec_from_file_location("seed_subset_sum_planted", _PATH)
env = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(env)

TINY = {"numbers": [3, 5, 8, 13, 21, 8], "target": 16, "planted": [0, 3]}


def _subsets_with_sum(numbers: list[int], target: int) -> list[tuple[int, ...]]:
    indices = range(len(numbers))
    return [
        chosen
        for size in range(1, len(numbers) + 1)
        for chosen in combinations(indices, size)
        if sum(numbers[i] for i in chosen) == target
    ]


def test_tiny_instance_accepts_exactly_the_subsets_with_the_target_sum():
    valid = set(_subsets_with_sum(TINY["numbers"], TINY["target"]))
    assert valid == {(0, 3), (0, 1, 2), (0, 1, 5), (2, 5)}
    for size in range(1, 7):
        for chosen in combinations(range(6), size):
            expected = 1.0 if chosen in valid else 0.0
            assert env.score(TINY, " ".join(map(str, chosen))) == expected


def test_reference_and_a_different_valid_subset_score_one():
    assert env.solve(TINY) == "0 3"
    assert env.score(TINY, env.solve(TINY)) == 1.0
    assert env.score(TINY, "2 5") == 1.0


@pytest.mark.parametrize("answer", ["0, 3", "0,3", "  0   3\n", "0 1 5"])
def test_separators_and_surrounding_space_are_tolerated(answer):
    assert env.score(TINY, answer) == 1.0


@pytest.mark.parametrize("answer", ["3 0", "5 1 0"])
def test_the_stated_increasing_order_is_required(answer):
    assert env.score(TINY, answer) == 0.0


@pytest.mark.parametrize(
    "answer",
    [
        "0",  # an index removed
        "0 3 1",  # an index added
        "2 2",  # 8 + 8 only by using index 2 twice
        "0 3 3",
        "0 6",  # out of range
        "0 -3",
        "",
        "   ",
        "None",
        "1.0",
        "0 3.0",
        "zero three",
        "٠ ٣",  # Arabic-Indic digits
    ],
)
def test_invalid_answers_score_zero(answer):
    result = env.score(TINY, answer)
    assert result == 0.0
    assert type(result) is float


@pytest.mark.parametrize("answer", ["0 3 " + "9" * 5000, "0 " * 500_000], ids=["long", "huge"])
def test_oversized_answers_score_zero(answer):
    assert env.score(TINY, answer) == 0.0


def test_a_near_miss_of_a_generated_reference_fails():
    instance = env.generate(7, 10)
    planted = instance["planted"]
    assert env.score(instance, " ".join(map(str, planted[:-1]))) == 0.0


@pytest.mark.parametrize("difficulty", [1, 5, 10])
def test_generated_instances_are_deterministic_and_survive_json(difficulty):
    for seed in range(20):
        instance = env.generate(seed, difficulty)
        assert instance == env.generate(seed, difficulty)
        decoded = json.loads(json.dumps(instance))
        assert env.score(decoded, env.solve(decoded)) == 1.0
        assert env.solve(decoded) not in env.prompt(decoded)
        assert str(decoded["target"]) in env.prompt(decoded)


@pytest.mark.parametrize("difficulty", [1, 5, 10])
def test_references_vary_across_seeds(difficulty):
    assert len({env.solve(env.generate(seed, difficulty)) for seed in range(30)}) >= 5


def test_difficulty_scales_the_size_and_is_clamped():
    sizes = [len(env.generate(0, d)["numbers"]) for d in range(1, 11)]
    assert sizes == sorted(sizes) and sizes[0] == 4 and sizes[-1] == 30
    assert env.generate(3, 0) == env.generate(3, 1)
    assert env.generate(3, 99) == env.generate(3, 10)


@pytest.mark.parametrize(("value", "difficulty"), [(18, 1), (100, 3)])
def test_generate_from_uses_a_value_in_range_as_the_target(value, difficulty):
    instance = env.generate_from(value, 0, difficulty)
    assert instance["target"] == value
    assert env.score(instance, env.solve(instance)) == 1.0


@pytest.mark.parametrize(
    "value",
    [0, 1, -5, 10**40, -(10**5000), True],
    ids=["zero", "one", "negative", "large", "huge-negative", "bool"],
)
@pytest.mark.parametrize("difficulty", [1, 10])
def test_generate_from_folds_any_int_into_a_valid_instance(value, difficulty):
    instance = env.generate_from(value, 4, difficulty)
    assert instance == env.generate_from(value, 4, difficulty)
    decoded = json.loads(json.dumps(instance))
    assert env.score(decoded, env.solve(decoded)) == 1.0
    assert len(env.solve(decoded).split()) >= 2


def test_generate_from_rejects_a_non_int():
    with pytest.raises(TypeError):
        env.generate_from("12", 0, 1)


def test_calls_at_difficulty_ten_are_fast():
    start = time.perf_counter()
    for seed in range(20):
        instance = env.generate(seed, 10)
        env.prompt(instance)
        env.score(instance, env.solve(instance))
        env.score(instance, "x" * 1_000_000)
    assert (time.perf_counter() - start) / (20 * 5) < 0.05


def test_level_one_is_tiny_and_needs_two_numbers():
    for seed in range(50):
        instance = env.generate(seed, 1)
        numbers = instance["numbers"]
        assert len(numbers) == 4 and max(numbers) <= 16
        # No single number reaches the target, so every answer adds up two or more.
        assert instance["target"] > max(numbers) and len(instance["planted"]) >= 2
        assert all(env.score(instance, str(index)) == 0.0 for index in range(4))


def test_sizes_grow_to_level_ten():
    shapes = [env._shape(d) for d in range(1, 11)]
    assert all(a[0] < b[0] and a[2] < b[2] and a[3] < b[3] for a, b in pairwise(shapes))
    assert shapes[-1] == (30, 2**30, 30 * 2**30 // 5, 3 * 30 * 2**30 // 10)
