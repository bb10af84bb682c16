"""Total number of 1 bits over a range of integers: the sum of popcount(x) for every x from a
to b. Code adds bin(x).count("1") in a loop; by hand one must write each number in binary and
count, hundreds of times."""

import random
import re

NAME = "popcount_range_total"
TAGS = ["algorithmic", "bits", "counting"]
ANSWER_TYPE = "int"


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    low = rng.randint(0, 64 * difficulty * difficulty)
    return {"low": low, "high": low + 8 * difficulty + rng.randint(0, 10)}


def prompt(instance: dict) -> str:
    return (
        f"Write every integer from {instance['low']} to {instance['high']} (both included) in "
        "binary and count the digits that are 1. How many 1 digits are there in total? Give "
        "the total as a single integer."
    )


def solve(instance: dict) -> str:
    return str(sum(bin(x).count("1") for x in range(instance["low"], instance["high"] + 1)))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
