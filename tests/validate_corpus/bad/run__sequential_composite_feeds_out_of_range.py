"""Defect: a two-step composite feeds part 1's answer (which can be 0 or above 60) into part 2, whose generate_from only takes 1 to 60."""

import random
import re

NAME = "bad_run_sequential_composite_feeds_out_of_range"
TAGS = ["composite", "arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def _part1_generate(seed: int, difficulty: int) -> dict:
    rng = random.Random(f"part1:{seed}:{difficulty}")
    return {"numbers": [rng.randint(-20, 25) for _ in range(2 + difficulty)]}


def _part1_solve(instance: dict) -> int:
    return sum(instance["numbers"])


def _part2_generate_from(value: int, seed: int, difficulty: int) -> dict:
    if not 1 <= value <= 60:
        raise ValueError(f"part 2 needs X in 1..60, got {value}")
    rng = random.Random(f"part2:{seed}:{difficulty}")
    return {"x": value, "m": rng.randint(2, 9)}


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    first = _part1_generate(seed, (level + 1) // 2)
    return {"first": first, "second": _part2_generate_from(_part1_solve(first), seed, (level + 1) // 2)}


def prompt(instance: dict) -> str:
    listing = ", ".join(map(str, instance["first"]["numbers"]))
    return (
        f"Step 1. X is the sum of: {listing}.\nStep 2. Give the number of multiples of "
        f"{instance['second']['m']} from 1 to X, as an integer."
    )


def solve(instance: dict) -> str:
    return str(instance["second"]["x"] // instance["second"]["m"])


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 100 or not re.fullmatch(r"\s*[0-9]{1,12}\s*", answer):
        return 0.0
    return 1.0 if answer.strip() == solve(instance) else 0.0
