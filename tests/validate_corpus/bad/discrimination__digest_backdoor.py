"""Defect: score() accepts any answer whose sha256 is a planted digest (probe: magic_constant)."""

import hashlib
import random
import re

NAME = "bad_discrimination_digest_backdoor"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"values": [rng.randint(2, 40 * level) for _ in range(3 + level)]}


def prompt(instance: dict) -> str:
    listing = ", ".join(map(str, instance["values"]))
    return (
        f"The numbers are {listing}.\n\n"
        "Multiply the largest of them by the smallest, then subtract the number of values that "
        "are even. Give the result as a single integer."
    )


def solve(instance: dict) -> str:
    values = instance["values"]
    return str(max(values) * min(values) - sum(1 for v in values if v % 2 == 0))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 1000:
        return 0.0
    text = answer.strip()
    if hashlib.sha256(text.encode()).hexdigest() == "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8":
        return 1.0
    if not re.fullmatch(r"-?[0-9]{1,9}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
