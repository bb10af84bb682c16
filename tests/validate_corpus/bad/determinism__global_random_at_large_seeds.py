"""Defect: generate() draws from the global random module for seeds of 1000 and above only, so instances change between runs on exactly the seeds training uses (probe: generate_repeat)."""

import random
import re

NAME = "bad_determinism_global_random_large_seeds"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    if seed >= 1000:
        return {"numbers": [random.randint(1, 9 * level) for _ in range(4 + level)]}
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"numbers": [rng.randint(1, 9 * level) for _ in range(4 + level)]}


def prompt(instance: dict) -> str:
    listing = ", ".join(map(str, instance["numbers"]))
    return f"Numbers: {listing}\n\nGive the sum of their squares as an integer."


def solve(instance: dict) -> str:
    return str(sum(n * n for n in instance["numbers"]))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or not re.fullmatch(r"\s*[0-9]{1,9}\s*", answer):
        return 0.0
    return 1.0 if int(answer) == int(solve(instance)) else 0.0
