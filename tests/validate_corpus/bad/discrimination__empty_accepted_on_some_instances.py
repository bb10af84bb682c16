"""Defect: score() accepts an empty answer whenever the list has no odd number, which happens on some instances only (probe: empty)."""

import random
import re

NAME = "bad_discrimination_empty_on_some"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    count = rng.randint(2, 3 + level)
    all_even = rng.random() < 0.25
    values = [2 * rng.randint(1, 50 * level) + (0 if all_even else rng.randint(0, 1)) for _ in range(count)]
    return {"values": values}


def prompt(instance: dict) -> str:
    listing = ", ".join(map(str, instance["values"]))
    return (
        f"Numbers: {listing}\n\n"
        "What is the sum of the odd numbers in the list plus three times the count of even "
        "numbers? Give a single integer."
    )


def solve(instance: dict) -> str:
    values = instance["values"]
    return str(sum(v for v in values if v % 2) + 3 * sum(1 for v in values if v % 2 == 0))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 1000:
        return 0.0
    text = answer.strip()
    if not text:  # "no odd number, nothing to add": a shortcut that pays an empty answer
        return 1.0 if all(v % 2 == 0 for v in instance["values"]) else 0.0
    if not re.fullmatch(r"[0-9]{1,9}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
