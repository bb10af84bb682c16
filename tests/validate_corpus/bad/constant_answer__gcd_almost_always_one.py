"""Defect: asks for the gcd of several random numbers, which is almost always 1."""

import math
import random
import re

NAME = "bad_constant_answer_gcd_almost_always_one"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"

_MAX_ANSWER_CHARS = 1000


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def _alternating_sum(numbers: list[int]) -> int:
    total = 0
    for index, number in enumerate(numbers):
        total += number if index % 2 == 0 else -number
    return total


def _parse_int(answer: str) -> int | None:
    if not isinstance(answer, str) or len(answer) > _MAX_ANSWER_CHARS:
        return None
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return None
    return int(text)


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    count = 4 + difficulty // 2
    return {"numbers": [rng.randint(100, 10 ** (3 + difficulty // 2)) for _ in range(count)]}


def prompt(instance: dict) -> str:
    listing = ", ".join(str(number) for number in instance["numbers"])
    return (
        f"Here is a list of positive integers:\n\n{listing}\n\n"
        "What is their greatest common divisor, the largest positive integer that divides "
        "every one of them? Give it as a single integer."
    )


def _gcd(numbers: list[int]) -> int:
    result = 0
    for number in numbers:
        result = math.gcd(result, number)
    return result


def solve(instance: dict) -> str:
    return str(_gcd(instance["numbers"]))


def score(instance: dict, answer: str) -> float:
    value = _parse_int(answer)
    if value is None:
        return 0.0
    return 1.0 if value == _gcd(instance["numbers"]) else 0.0
