"""coin_change_ways: hand-counted instances, the modulus at high difficulty, and
generate_from's amount mapping."""

import importlib.util
from itertools import pairwise
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "seed_coin_change_ways", Path(__file__).parents[2] / "seeds" / "coin_change_ways.py"
)
env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(env)

# 5, 2+2+1, 2+1+1+1, 1+1+1+1+1.
TINY = {"coins": [1, 2, 5], "amount": 5, "modulus": None}


def test_hand_counted_instances():
    assert env.solve(TINY) == "4"
    assert env.solve({"coins": [2], "amount": 3, "modulus": None}) == "0"
    assert env.solve({**TINY, "modulus": 3}) == "1"


@pytest.mark.parametrize("answer", ["3", "5", "24", "4.0", "4 ways", "IV"])
def test_rejects_other_answers(answer):
    assert env.score(TINY, answer) == 0.0


def test_modulus_only_at_high_difficulty():
    assert env.generate(0, 8)["modulus"] is None
    instance = env.generate(0, 10)
    assert instance["modulus"] == env.PRIME
    assert str(env.PRIME) in env.prompt(instance)
    assert "modulo" not in env.prompt(env.generate(0, 1))


def test_the_modulus_matters_at_top_difficulty():
    instances = [env.generate(seed, 10) for seed in range(10)]
    assert sum(env._count(i["coins"], i["amount"]) > env.PRIME for i in instances) >= 5


@pytest.mark.parametrize("value", [0, -1, 99, 10**100, -(10**100)])
def test_generate_from_maps_any_int_into_the_amount_range(value):
    instance = env.generate_from(value, 4, 3)
    low, high = env._amount_range(3)
    expected = value if low <= value <= high else low + value % (high - low + 1)
    assert instance["amount"] == expected
    assert env.score(instance, env.solve(instance)) == 1.0


def test_level_one_is_tiny_and_the_amount_grows_to_level_ten():
    tiny = [env.generate(seed, 1) for seed in range(50)]
    assert all(len(i["coins"]) == 2 and max(i["coins"]) <= 4 for i in tiny)
    assert all(4 <= i["amount"] <= 12 and 1 <= int(env.solve(i)) <= 7 for i in tiny)
    ranges = [env._amount_range(d) for d in range(1, 11)]
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in pairwise(ranges))
    assert ranges[-1] == (5 + 10 * 10**2, 10 + 20 * 10**2)  # level 10 as it always was
    typical = [sorted(env.generate(s, d)["amount"] for s in range(21))[10] for d in range(1, 11)]
    assert typical == sorted(set(typical))
    coin_counts = [len(env.generate(0, d)["coins"]) for d in range(1, 11)]
    assert coin_counts == sorted(coin_counts) and coin_counts[-1] == 8
