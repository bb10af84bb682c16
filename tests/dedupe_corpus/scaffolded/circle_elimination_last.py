"""Circle elimination (distinct from coin_ways_scaffolded, same scaffold): n seats in a ring,
every k-th occupied seat is emptied in turn until one is left; which seat is it? Written in the
shared template a policy shown one example would copy: the scaffolding outweighs the task."""

import random
import re

NAME = "circle_elimination_last"
TAGS = ["algorithmic", "simulation", "test-corpus"]
ANSWER_TYPE = "int"

_LOW = (5, 8, 12, 18, 25, 35, 50, 70, 95, 130)
_HIGH = (9, 14, 20, 28, 40, 55, 80, 110, 150, 200)


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
    return {"seats": rng.randint(low, high), "skip": rng.randint(2, 2 + level)}


def prompt(instance: dict) -> str:
    return _finish(
        [
            f"{instance['seats']} seats stand in a ring, numbered 1 to {instance['seats']}.",
            f"Counting from seat 1, every {instance['skip']}-th occupied seat is emptied,",
            "and counting goes on from the next occupied seat, until one seat is occupied.",
            "Which seat is the last one occupied?",
        ]
    )


def solve(instance: dict) -> str:
    last = 0
    for size in range(2, instance["seats"] + 1):
        last = (last + instance["skip"]) % size
    return str(last + 1)


def score(instance: dict, answer: str) -> float:
    value = _parse(answer)
    if value is None:
        return 0.0
    return 1.0 if value == int(solve(instance)) else 0.0
