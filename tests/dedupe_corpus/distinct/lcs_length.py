"""Length of the longest common subsequence of two strings over a small alphabet. The quadratic
table is routine code, while doing it by eye on two 40-letter strings is error-prone."""

import random
import re

NAME = "lcs_length"
TAGS = ["algorithmic", "dp", "strings"]
ANSWER_TYPE = "int"


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    alphabet = "ACGT"[: 2 + min(2, difficulty // 3)]
    length = 5 + 4 * difficulty
    first = "".join(rng.choice(alphabet) for _ in range(length))
    second = "".join(rng.choice(alphabet) for _ in range(length + rng.randint(-2, 2)))
    return {"first": first, "second": second}


def prompt(instance: dict) -> str:
    return (
        "Consider these two strings:\n\n"
        f"A = {instance['first']}\nB = {instance['second']}\n\n"
        "A common subsequence is a string obtained from both A and B by deleting characters "
        "without reordering the rest. What is the length of the longest common subsequence? "
        "Give the length as a single integer."
    )


def solve(instance: dict) -> str:
    first, second = instance["first"], instance["second"]
    previous = [0] * (len(second) + 1)
    for ch in first:
        current = [0]
        for j, other in enumerate(second, start=1):
            current.append(previous[j - 1] + 1 if ch == other else max(previous[j], current[j - 1]))
        previous = current
    return str(previous[-1])


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
