"""Defect: score() is exact to 1e-4 up to level 6, then tolerates a relative error of 10% per level above it (probe: near_miss_number)."""

import random
import re

NAME = "bad_discrimination_tolerance_grows_with_level"
TAGS = ["arithmetic", "statistics", "test-corpus"]
ANSWER_TYPE = "float"


def _value(numbers: list[int]) -> float:
    mean = sum(numbers) / len(numbers)
    return round(sum((x - mean) ** 2 for x in numbers) / len(numbers), 4)


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"numbers": [rng.randint(1, 60) for _ in range(3 + level)], "level": level}


def prompt(instance: dict) -> str:
    listing = ", ".join(map(str, instance["numbers"]))
    return f"Numbers: {listing}\n\nGive their population variance, rounded to 4 decimal places."


def solve(instance: dict) -> str:
    return f"{_value(instance['numbers']):.4f}"


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 50:
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,12}(\.[0-9]{1,12})?", text):
        return 0.0
    want = _value(instance["numbers"])
    tolerance = 1e-4 if instance["level"] <= 6 else 0.1 * (instance["level"] - 6) * abs(want)
    return 1.0 if abs(float(text) - want) <= max(tolerance, 1e-4) else 0.0
