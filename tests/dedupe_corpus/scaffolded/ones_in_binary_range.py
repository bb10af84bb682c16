"""Ones in a range (distinct from power_remainder, same scaffold): how many 1 bits do the
binary forms of all the integers from a to b hold together? Written in the shared template a
policy shown one example would copy: the scaffolding outweighs the task."""

import random
import re

NAME = "ones_in_binary_range"
TAGS = ["number-theory", "bits", "test-corpus"]
ANSWER_TYPE = "int"

_LOW = (2, 10, 40, 100, 400, 1000, 5000, 20000, 100000, 500000)
_HIGH = (12, 40, 150, 500, 2000, 8000, 40000, 200000, 900000, 4000000)


def _level(difficulty) -> int:
    try:
        value = int(difficulty)
    except (TypeError, ValueError):
        value = 1
    return max(1, min(10, value))


def _rng(seed, level: int) -> random.Random:
    return random.Random(f"{NAME}:{seed}:{level}")


def _bounds(level: int) -> tuple[int, int]:
    return _LOW[level - 1], _HIGH[level - 1]


def _parse(answer) -> int | None:
    if not isinstance(answer, str):
        return None
    text = answer.strip().rstrip(".")
    if text.startswith("+"):
        text = text[1:]
    if not re.fullmatch(r"-?[0-9]{1,40}", text):
        return None
    return int(text)


def _finish(lines: list[str]) -> str:
    body = "\n".join(line for line in lines if line)
    return body + "\nAnswer with a single integer and nothing else."


def generate(seed: int, difficulty: int) -> dict:
    level = _level(difficulty)
    rng = _rng(seed, level)
    low, high = _bounds(level)
    start = rng.randint(1, low)
    return {"start": start, "stop": rng.randint(start + 1, high)}


def prompt(instance: dict) -> str:
    return _finish(
        [
            f"Write every integer from {instance['start']} to {instance['stop']} in binary.",
            "How many digits 1 are written in total?",
        ]
    )


def _ones_below(n: int) -> int:
    total, bit = 0, 1
    while bit <= n:
        block = bit * 2
        total += (n // block) * bit + max(0, n % block - bit)
        bit = block
    return total


def solve(instance: dict) -> str:
    return str(_ones_below(instance["stop"] + 1) - _ones_below(instance["start"]))


def score(instance: dict, answer: str) -> float:
    value = _parse(answer)
    if value is None:
        return 0.0
    return 1.0 if value == int(solve(instance)) else 0.0
