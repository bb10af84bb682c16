"""Defect: importing the file takes seconds (a table built at import), and every new worker pays it again (probe: import_budget)."""

import random
import re

NAME = "bad_load_slow_import"
TAGS = ["number-theory", "test-corpus"]
ANSWER_TYPE = "int"


def _divisor_counts(limit: int) -> list[int]:
    counts = [0] * (limit + 1)
    for d in range(1, limit + 1):
        for multiple in range(d, limit + 1, d):
            counts[multiple] += 1
    return counts


_COUNTS = _divisor_counts(2_500_000)


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"n": rng.randint(10, 1000 * level)}


def prompt(instance: dict) -> str:
    return f"How many positive divisors does {instance['n']} have? Give a single integer."


def solve(instance: dict) -> str:
    return str(_COUNTS[instance["n"]])


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or not re.fullmatch(r"\s*[0-9]{1,9}\s*", answer):
        return 0.0
    return 1.0 if int(answer) == int(solve(instance)) else 0.0
