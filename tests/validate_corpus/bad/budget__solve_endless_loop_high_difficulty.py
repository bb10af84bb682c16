"""Defect: solve() loops (practically) forever at difficulty 9 and above: it runs past the call time limit, which is over budget whichever check meets it first."""

import random
import re

NAME = "bad_budget_solve_endless_loop_high_difficulty"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"

_MAX_ANSWER_CHARS = 1000


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def _alternating_sum(numbers: list[int]) -> int:
    total = 0
    for index, number in enumerate(numbers):
        total += number if index % 2 == 0 else -number
    return total


def _parse_int(answer: str) -> int | None:
    if not isinstance(answer, str) or len(answer) > _MAX_ANSWER_CHARS:
        return None
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return None
    return int(text)


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    count = 4 + 2 * difficulty
    return {"numbers": [rng.randint(10, 99 * difficulty) for _ in range(count)]}


def prompt(instance: dict) -> str:
    listing = ", ".join(str(number) for number in instance["numbers"])
    return (
        f"Here is a list of integers:\n\n{listing}\n\n"
        "Compute their alternating sum: add the first number, subtract the second, add the "
        "third, subtract the fourth, and so on to the end of the list. Give the result as a "
        "single integer (it may be negative)."
    )


def solve(instance: dict) -> str:
    numbers = instance["numbers"]
    if len(numbers) >= 22:
        steps = 0
        for _ in range(10**13):
            steps += 1
    return str(_alternating_sum(numbers))


def score(instance: dict, answer: str) -> float:
    value = _parse_int(answer)
    if value is None:
        return 0.0
    return 1.0 if value == _alternating_sum(instance["numbers"]) else 0.0
