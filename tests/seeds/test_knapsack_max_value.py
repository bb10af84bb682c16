"""knapsack_max_value: a hand-solved instance, and generate_from's capacity mapping."""

import importlib.util
from itertools import pairwise
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "seed_knapsack_max_value", Path(__file__).parents[2] / "seeds" / "knapsack_max_value.py"
)
env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(env)

# Best is items 1 and 3 (weight 5, value 7); the greedy pick by value (item 2) gives only 5.
TINY = {"weights": [3, 4, 2], "values": [4, 5, 3], "capacity": 5}


def test_hand_solved_instance():
    assert env.solve(TINY) == "7"
    assert env.score(TINY, " 7 ") == 1.0


@pytest.mark.parametrize("answer", ["5", "6", "8", "7.0", "7 (items 1 and 3)", ""])
def test_rejects_other_answers(answer):
    assert env.score(TINY, answer) == 0.0


@pytest.mark.parametrize("value", [0, 1, -1, 12345, -(10**9), 10**100])
def test_generate_from_maps_any_int_into_the_capacity_range(value):
    instance = env.generate_from(value, 5, 4)
    total = sum(instance["weights"])
    assert 1 <= instance["capacity"] <= total
    expected = value if 1 <= value <= total else 1 + value % total
    assert instance["capacity"] == expected


def test_generate_from_keeps_items_and_varies_capacity():
    instances = [env.generate_from(value, 5, 4) for value in range(1, 11)]
    assert len({str(instance["weights"]) for instance in instances}) == 1
    assert len({instance["capacity"] for instance in instances}) == 10


def test_generate_from_rejects_a_non_int():
    with pytest.raises(TypeError):
        env.generate_from("12", 0, 1)


def test_level_one_is_tiny_and_items_grow_to_level_ten():
    for seed in range(50):
        instance = env.generate(seed, 1)
        assert len(instance["weights"]) == 2
        assert max(instance["weights"]) <= 5 and max(instance["values"]) <= 9
    instances = [env.generate(0, d) for d in range(1, 11)]
    counts = [len(i["weights"]) for i in instances]
    assert all(a < b for a, b in pairwise(counts)) and counts[-1] == 3 + 2 * 10
    assert max(max(env.generate(s, 10)["weights"]) for s in range(50)) <= 4 + 3 * 10
    assert max(max(env.generate(s, 10)["values"]) for s in range(50)) <= 9 + 6 * 10
