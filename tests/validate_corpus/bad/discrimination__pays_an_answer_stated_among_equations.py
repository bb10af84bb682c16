"""Defect: score() reads every `lhs = rhs` equation in the answer and pays when any right-hand side is the answer (probe: fuzz_embedded)."""

import random
import re

NAME = "bad_discrimination_pays_an_answer_stated_among_equations"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {
        "steps": [rng.choice(["+", "*", "-"]) + str(rng.randint(2, 9)) for _ in range(2 + level)],
        "start": rng.randint(1, 30),
    }


def _run(instance: dict) -> int:
    x = instance["start"]
    for step in instance["steps"]:
        op, k = step[0], int(step[1:])
        x = x + k if op == "+" else x * k if op == "*" else x - k
        x %= 10007
    return x


def prompt(instance: dict) -> str:
    return (
        f"Start from {instance['start']}. Apply in order: {' '.join(instance['steps'])}, reducing modulo 10007 "
        "after each step. Give the final value as an integer."
    )


def solve(instance: dict) -> str:
    return str(_run(instance))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 200:
        return 0.0
    want = _run(instance)
    stated = re.findall(r"=\s*(-?\d+)", answer)
    if stated:
        return 1.0 if any(int(v) == want for v in stated) else 0.0
    text = answer.strip()
    return 1.0 if re.fullmatch(r"-?\d+", text) and int(text) == want else 0.0
