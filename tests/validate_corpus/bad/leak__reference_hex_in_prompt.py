"""Defect: the prompt carries the reference answer in hexadecimal, as a "ticket number" (probe: leak_hex)."""

import random
import re

NAME = "bad_leak_reference_hex"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"terms": [rng.randint(20, 60 * level) for _ in range(2 + level)]}


def solve(instance: dict) -> str:
    total = 0
    for k, term in enumerate(instance["terms"]):
        total += term * (k + 1)
    return str(total)


def prompt(instance: dict) -> str:
    listing = ", ".join(map(str, instance["terms"]))
    return (
        f"Ticket {int(solve(instance)):x}. Multiply each number by its 1-based position and add "
        f"the products: {listing}. Give a single integer."
    )


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or not re.fullmatch(r"\s*[0-9]{1,9}\s*", answer):
        return 0.0
    return 1.0 if int(answer) == int(solve(instance)) else 0.0
