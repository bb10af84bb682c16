"""Defect: score() computes the answer as an arithmetic expression, so the response itself is evaluated instead of read as the number the prompt asks for (probe: expression)."""

import random
import re

NAME = "bad_discrimination_evaluates_arithmetic"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"steps": [rng.choice(["+", "-", "*"]) + str(rng.randint(2, 9)) for _ in range(2 + level)],
            "start": rng.randint(1, 20)}


def prompt(instance: dict) -> str:
    steps = ", then ".join(instance["steps"])
    return (
        f"Start from {instance['start']}. Apply, in order: {steps}. "
        "Give the final value as a single integer."
    )


def solve(instance: dict) -> str:
    value = instance["start"]
    for step in instance["steps"]:
        op, n = step[0], int(step[1:])
        value = value + n if op == "+" else value - n if op == "-" else value * n
    return str(value)


def _evaluate(text: str) -> int | None:
    """A sum of integer terms, '12 + 30 - 4' (a tiny evaluator: the defect)."""
    if not re.fullmatch(r"\s*[+-]?\s*[0-9]{1,12}(\s*[+-]\s*[0-9]{1,12})*\s*", text):
        return None
    total = 0
    for sign, digits in re.findall(r"([+-]?)\s*([0-9]+)", text):
        total += -int(digits) if sign == "-" else int(digits)
    return total


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 1000:
        return 0.0
    value = _evaluate(answer)
    return 1.0 if value is not None and value == int(solve(instance)) else 0.0
