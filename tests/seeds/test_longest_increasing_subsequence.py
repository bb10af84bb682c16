"""Tests for the longest_increasing_subsequence seed: the oracle agrees with brute force,
scoring is exact, and generate_from builds a valid instance from any list of ints."""

import importlib.util
import json
import time
from itertools import combinations, pairwise
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "seeds" / "longest_increasing_subsequence.py"
_SPEC = importlib.util.spec_from_file_location("seed_longest_increasing_subsequence", _PATH)
env = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(env)


def _brute_force(sequence: list[int]) -> int:
    for size in range(len(sequence), 0, -1):
        for chosen in combinations(sequence, size):
            if all(a < b for a, b in pairwise(chosen)):
                return size
    return 0


@pytest.mark.parametrize(
    ("sequence", "expected"),
    [
        ([10, 9, 2, 5, 3, 7, 101, 18], 4),
        ([5, 5, 5], 1),
        ([1, 2, 2, 3], 3),
        ([4, 3, 2, 1], 1),
        ([-3, -1, -2, 0], 3),
        ([], 0),
    ],
)
def test_hand_made_sequences(sequence, expected):
    instance = {"sequence": sequence}
    assert env.solve(instance) == str(expected)
    assert env.score(instance, str(expected)) == 1.0


def test_oracle_agrees_with_brute_force_on_small_instances():
    for seed in range(40):
        instance = env.generate(seed, 1 + seed % 2)
        assert env.solve(instance) == str(_brute_force(instance["sequence"]))


@pytest.mark.parametrize("answer", ["4", " 4 ", "+4", "\n4\n", "04"])
def test_the_right_integer_scores_one(answer):
    assert env.score({"sequence": [10, 9, 2, 5, 3, 7, 101, 18]}, answer) == 1.0


@pytest.mark.parametrize(
    "answer",
    ["3", "5", "-4", "4.0", "four", "4 4", "", "None", "٤"],
)
def test_wrong_answers_score_zero(answer):
    result = env.score({"sequence": [10, 9, 2, 5, 3, 7, 101, 18]}, answer)
    assert result == 0.0
    assert type(result) is float


@pytest.mark.parametrize("answer", ["9" * 5000, "4" * 1_000_000], ids=["long", "huge"])
def test_oversized_answers_score_zero(answer):
    assert env.score({"sequence": [10, 9, 2, 5, 3, 7, 101, 18]}, answer) == 0.0


@pytest.mark.parametrize("difficulty", [1, 5, 10])
def test_generated_instances_are_deterministic_and_never_show_the_answer(difficulty):
    for seed in range(20):
        instance = env.generate(seed, difficulty)
        assert instance == env.generate(seed, difficulty)
        decoded = json.loads(json.dumps(instance))
        assert env.score(decoded, env.solve(decoded)) == 1.0
        sequence = decoded["sequence"]
        assert min(sequence) > len(sequence) >= int(env.solve(decoded))


@pytest.mark.parametrize("difficulty", [1, 5, 10])
def test_references_vary_across_seeds(difficulty):
    # Level 1 lists have 3 to 5 numbers, so their answers are 1 to 5.
    least = 3 if difficulty == 1 else 5
    assert len({env.solve(env.generate(seed, difficulty)) for seed in range(30)}) >= least


def test_difficulty_scales_the_length_and_is_clamped():
    lengths = [len(env.generate(0, d)["sequence"]) for d in range(1, 11)]
    assert lengths[0] <= 10 and lengths[-1] >= 120
    assert env.generate(3, 0) == env.generate(3, 1)
    assert env.generate(3, 12) == env.generate(3, 10)


def test_generate_from_starts_with_the_value_and_pads_it():
    instance = env.generate_from([7, 1, 8, 2, 9], 0, 3)
    sequence = instance["sequence"]
    assert sequence[:5] == [7, 1, 8, 2, 9] and len(sequence) >= 6
    assert instance == env.generate_from([7, 1, 8, 2, 9], 0, 3)
    short = env.generate_from([7, 1, 8, 2, 9], 0, 1)["sequence"]  # cut to level 1's length
    assert 3 <= len(short) <= 5 and short == [7, 1, 8, 2, 9][: len(short)]


def test_generate_from_cuts_a_long_value_to_the_difficulty_length():
    instance = env.generate_from(list(range(10**6)), 0, 10)
    sequence = instance["sequence"]
    assert sequence == list(range(len(sequence))) and len(sequence) <= 200
    assert env.solve(instance) == str(len(sequence))


@pytest.mark.parametrize("value", [[], [0], [True, False], [10**5000, -(10**5000), 3], [-(2**64)] * 300])
@pytest.mark.parametrize("difficulty", [1, 10])
def test_generate_from_builds_a_valid_instance_from_any_list(value, difficulty):
    instance = env.generate_from(value, 5, difficulty)
    assert instance == env.generate_from(value, 5, difficulty)
    decoded = json.loads(json.dumps(instance))
    assert all(abs(number) <= 10**6 for number in decoded["sequence"])
    assert len(decoded["sequence"]) >= {1: 3, 10: 120}[difficulty]
    assert env.score(decoded, env.solve(decoded)) == 1.0


@pytest.mark.parametrize("value", ["12", None, (1, 2), [1, "2"], [1.5]])
def test_generate_from_rejects_what_is_not_a_list_of_ints(value):
    with pytest.raises(TypeError):
        env.generate_from(value, 0, 1)


def test_calls_at_difficulty_ten_are_fast():
    start = time.perf_counter()
    for seed in range(20):
        instance = env.generate(seed, 10)
        env.prompt(instance)
        env.score(instance, env.solve(instance))
        env.score(instance, "x" * 1_000_000)
    assert (time.perf_counter() - start) / (20 * 5) < 0.05


def test_level_one_is_tiny_and_lengths_grow_to_level_ten():
    assert {len(env.generate(seed, 1)["sequence"]) for seed in range(50)} == {3, 4, 5}
    spans = []
    for difficulty in range(1, 11):
        lengths = [len(env.generate(seed, difficulty)["sequence"]) for seed in range(50)]
        spans.append((min(lengths), max(lengths)))
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in pairwise(spans))
    assert 120 <= spans[-1][0] and spans[-1][1] <= 200
