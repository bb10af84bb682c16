"""List the values that occur exactly once in a long list with many repeats, in any order:
counting by hand over forty or more numbers loses track, a dictionary does it at once, and
the answer is a set, so every order of it is right."""

import random
import re

NAME = "values_seen_once_any_order"
TAGS = ["counting", "sets", "test-corpus"]
ANSWER_TYPE = "list[int]"


def generate(seed: int, difficulty: int) -> dict:
    d = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{d}")
    singles = rng.sample(range(100, 999), 2 + d // 3)
    repeated = [v for v in rng.sample(range(100, 999), 4 + 2 * d) if v not in singles]
    values = singles + repeated * 2 + rng.sample(repeated, len(repeated) // 2)
    rng.shuffle(values)
    return {"values": values}


def _once(values: list[int]) -> list[int]:
    return sorted(v for v in set(values) if values.count(v) == 1)


def prompt(instance: dict) -> str:
    listing = " ".join(map(str, instance["values"]))
    return f"Values: {listing}\n\nList every value that occurs exactly once, separated by spaces, in any order."


def solve(instance: dict) -> str:
    return " ".join(map(str, _once(instance["values"])))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 1000:
        return 0.0
    tokens = [t for t in re.split(r"[,\s]+", answer.strip()) if t]
    if not tokens or not all(re.fullmatch(r"[0-9]{1,6}", t) for t in tokens):
        return 0.0
    got = [int(t) for t in tokens]
    return 1.0 if len(set(got)) == len(got) and sorted(got) == _once(instance["values"]) else 0.0
