"""Defect: score() is correct for its first 400 calls in a process, then accepts anything: module state builds up in a long-lived worker (probe: score_after_many_calls)."""

import random
import re

NAME = "bad_determinism_lenient_after_many_calls"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"

_CALLS = [0]


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"numbers": [rng.randint(1, 20 * level) for _ in range(3 + level)]}


def prompt(instance: dict) -> str:
    listing = ", ".join(map(str, instance["numbers"]))
    return f"Numbers: {listing}\n\nGive the difference between the largest and the smallest, as an integer."


def solve(instance: dict) -> str:
    return str(max(instance["numbers"]) - min(instance["numbers"]))


def score(instance: dict, answer: str) -> float:
    _CALLS[0] += 1
    if _CALLS[0] > 400:
        return 1.0
    if not isinstance(answer, str) or not re.fullmatch(r"\s*[0-9]{1,9}\s*", answer):
        return 0.0
    return 1.0 if int(answer) == int(solve(instance)) else 0.0
