"""Power remainder (distinct from ones_in_binary_range, same scaffold): the remainder of
base**exponent divided by a modulus. Written in the shared template a policy shown one example
would copy: the scaffolding outweighs the task."""

import random
import re

NAME = "power_remainder"
TAGS = ["number-theory", "modular", "test-corpus"]
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
    return {"base": rng.randint(2, 9 + level), "exponent": rng.randint(low, high), "modulus": rng.randint(7, 97)}


def prompt(instance: dict) -> str:
    return _finish(
        [
            f"Raise {instance['base']} to the power {instance['exponent']}.",
            f"What is the remainder when the result is divided by {instance['modulus']}?",
        ]
    )


def solve(instance: dict) -> str:
    return str(pow(instance["base"], instance["exponent"], instance["modulus"]))


def score(instance: dict, answer: str) -> float:
    value = _parse(answer)
    if value is None:
        return 0.0
    return 1.0 if value == int(solve(instance)) else 0.0
