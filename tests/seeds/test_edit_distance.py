"""edit_distance: textbook distances, and generate_from's sanitizing of its string."""

import importlib.util
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
    assert first.startswith("hello") and len(first) == 7
    assert first.isascii() and first.isalpha() and first.islower()
    assert env.generate_from("", 0, 1)["first"] == ""


def test_generate_from_rejects_a_non_str():
    with pytest.raises(TypeError):
        env.generate_from(["a"], 0, 1)
