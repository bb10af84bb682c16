"""Defect: the prompt shows the answer's digits reversed and spaced out (probe: leak_solver_cipher)."""

import random
import re

NAME = "bad_leak_reversed_digits_with_separators"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def _value(numbers: list[int]) -> int:
    total = 0
    for i, x in enumerate(numbers):
        total = (total * 31 + x * x + i) % 9000
    return 1000 + total


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"numbers": [rng.randint(10, 99) for _ in range(3 + level)], "level": level}


def prompt(instance: dict) -> str:
    listing = ", ".join(map(str, instance["numbers"]))
    return (
        f"Numbers: {listing}\n\nStart from 0. For each number x at position i (0-based), replace "
        "the total by (31 * total + x * x + i) mod 9000. Give 1000 plus the final total, as an integer."
        + " Checksum: " + " ".join(str(_value(instance["numbers"]))[::-1])
    )


def solve(instance: dict) -> str:
    return str(_value(instance["numbers"]))


def _parse(answer: str) -> int | None:
    if not isinstance(answer, str) or len(answer) > 200:
        return None
    text = answer.strip()
    return int(text) if re.fullmatch(r"[+-]?[0-9]{1,12}", text) else None


def score(instance: dict, answer: str) -> float:
    value = _parse(answer)
    return 1.0 if value is not None and value == _value(instance["numbers"]) else 0.0
