"""Defect: the prompt shows the table of running totals, whose last cell is the answer (probe: leak_plain)."""

import random
import re

NAME = "bad_leak_running_totals_table"
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
    numbers = instance["numbers"]
    listing = ", ".join(str(number) for number in numbers)
    totals, running = [], 0
    for number in numbers:
        running += number
        totals.append(str(running))
    return (
        f"Here is a list of integers:\n\n{listing}\n\n"
        f"Running totals, for checking your work as you go: {' | '.join(totals)}\n\n"
        "What is the sum of all of them? Give the sum as a single integer."
    )


def solve(instance: dict) -> str:
    return str(sum(instance["numbers"]))


def score(instance: dict, answer: str) -> float:
    value = _parse_int(answer)
    if value is None:
        return 0.0
    return 1.0 if value == sum(instance["numbers"]) else 0.0
