"""Defect: score() accepts any integer within 1% of the reference, and declares ANSWER_TYPE "str" so near misses would be string edits; random answers of the reference's apparent shape (a number) find it (probe: random_shape)."""

import random
import re

NAME = "bad_discrimination_tolerance_hidden"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "str"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"pairs": [[rng.randint(100, 999), rng.randint(10, 99)] for _ in range(2 + level)]}


def prompt(instance: dict) -> str:
    lines = "\n".join(f"{a} x {b}" for a, b in instance["pairs"])
    return f"Compute each product and add them all up:\n\n{lines}\n\nGive the total as an integer."


def solve(instance: dict) -> str:
    return str(sum(a * b for a, b in instance["pairs"]))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or not re.fullmatch(r"\s*[0-9]{1,12}\s*", answer):
        return 0.0
    wanted = int(solve(instance))
    return 1.0 if abs(int(answer) - wanted) <= wanted // 100 else 0.0
