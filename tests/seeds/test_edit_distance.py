"""edit_distance: textbook distances, and generate_from's sanitizing of its string."""

import importlib.util
from itertools import pairwise
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "seed_edit_distance", Path(__file__).parents[2] / "seeds" / "edit_distance.py"
)
env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(env)


@pytest.mark.parametrize(
    ("first", "second", "distance"),
    [
        ("kitten", "sitting", 3),
        ("", "abc", 3),
        ("abc", "", 3),
        ("abcd", "abcd", 0),
        ("abcd", "bcda", 2),
    ],
)
def test_textbook_distances(first, second, distance):
    assert env.solve({"first": first, "second": second}) == str(distance)


@pytest.mark.parametrize("answer", ["2", "4", "3.0", "three", "distance: 3"])
def test_rejects_other_answers(answer):
    assert env.score({"first": "kitten", "second": "sitting"}, answer) == 0.0


def test_generate_from_sanitizes_and_truncates():
    instance = env.generate_from("Hello, World! ☃" * 50, 0, 1)
    first = instance["first"]
    assert first == "hell" and env._max_length(1) == 4
    first = env.generate_from("Hello, World! ☃" * 50, 0, 3)["first"]
    assert first.startswith("hello") and len(first) == 6
    assert first.isascii() and first.isalpha() and first.islower()
    assert env.generate_from("", 0, 1)["first"] == ""


def test_generate_from_rejects_a_non_str():
    with pytest.raises(TypeError):
        env.generate_from(["a"], 0, 1)


def test_level_one_is_tiny_and_lengths_grow_to_level_ten():
    tiny = [env.generate(seed, 1) for seed in range(50)]
    assert all(2 <= len(i["first"]) <= 4 and len(i["second"]) <= 9 for i in tiny)
    assert all(int(env.solve(i)) <= 5 for i in tiny)
    longest = [env._max_length(d) for d in range(1, 11)]
    assert all(a < b for a, b in pairwise(longest)) and longest[-1] == 4 + 3 * 10
    lengths = [len(env.generate(seed, 10)["first"]) for seed in range(50)]
    assert min(lengths) >= 32 and max(lengths) <= 34
