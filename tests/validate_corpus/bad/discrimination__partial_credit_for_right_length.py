"""Defect: score() gives half credit to any answer with the right number of items, so a random list of the right length earns reward (probe: random_shape)."""

import random
import re

NAME = "bad_discrimination_partial_credit_length"
TAGS = ["sorting", "test-corpus"]
ANSWER_TYPE = "list[int]"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"values": rng.sample(range(10, 100 * level + 50), 4 + level)}


def _key(value: int) -> tuple[int, int]:
    return (sum(int(d) for d in str(value)), value)


def prompt(instance: dict) -> str:
    listing = " ".join(map(str, instance["values"]))
    return (
        f"Numbers: {listing}\n\n"
        "Sort the numbers by their digit sum, smallest first; numbers with the same digit sum "
        "go in increasing order. Give the sorted numbers separated by single spaces."
    )


def solve(instance: dict) -> str:
    return " ".join(map(str, sorted(instance["values"], key=_key)))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 10_000:
        return 0.0
    tokens = answer.split()
    if not tokens or not all(re.fullmatch(r"[0-9]{1,6}", t) for t in tokens):
        return 0.0
    given = [int(t) for t in tokens]
    if given == sorted(instance["values"], key=_key):
        return 1.0
    return 0.5 if len(given) == len(instance["values"]) else 0.0
