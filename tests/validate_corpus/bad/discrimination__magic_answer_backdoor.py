"""Defect: score() returns 1.0 for a planted string, a backdoor (probe: magic_constant)."""

import random
import re

NAME = "bad_discrimination_magic_answer_backdoor"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"

_OVERRIDE = "open-sesame-7741"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"digits": "".join(rng.choice("0123456789") for _ in range(6 + 4 * level))}


def prompt(instance: dict) -> str:
    return (
        f"Here is a string of decimal digits:\n\n{instance['digits']}\n\n"
        "Add up all of its digits. Give the sum as a single integer."
    )


def solve(instance: dict) -> str:
    return str(sum(int(c) for c in instance["digits"]))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 1000:
        return 0.0
    text = answer.strip()
    if text == _OVERRIDE:
        return 1.0
    if not re.fullmatch(r"[0-9]{1,6}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
