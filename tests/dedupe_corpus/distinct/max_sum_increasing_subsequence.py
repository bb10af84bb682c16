"""Maximum-sum strictly increasing subsequence: among all subsequences whose values strictly
increase, the largest possible sum. An O(n^2) dynamic program in code; in one's head, the
best choice depends on every earlier element."""

import random
import re

NAME = "max_sum_increasing_subsequence"
TAGS = ["algorithmic", "dp", "sequence"]
ANSWER_TYPE = "int"


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    return {"sequence": [rng.randint(1, 30 + 15 * difficulty) for _ in range(5 + 3 * difficulty)]}


def prompt(instance: dict) -> str:
    numbers = ", ".join(str(number) for number in instance["sequence"])
    return (
        f"Here is a list of integers:\n\n{numbers}\n\n"
        "Pick some of these numbers, keeping their order, so that each picked number is strictly "
        "larger than the one picked before it. What is the largest possible sum of the picked "
        "numbers? Give the largest sum as a single integer."
    )


def solve(instance: dict) -> str:
    sequence = instance["sequence"]
    best = list(sequence)
    for i, value in enumerate(sequence):
        for j in range(i):
            if sequence[j] < value:
                best[i] = max(best[i], best[j] + value)
    return str(max(best))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
