"""Defect: score() accepts any answer that contains the reference somewhere, so a response listing every number from 0 to 1000 earns full reward (probe: flood)."""

import random
import re

NAME = "bad_discrimination_flood_accepts_containing"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"prices": [rng.randint(10, 99) for _ in range(3 + level)], "coupon": rng.randint(1, 9)}


def prompt(instance: dict) -> str:
    listing = ", ".join(map(str, instance["prices"]))
    return (
        f"A basket holds items priced {listing}. A coupon takes {instance['coupon']} off every "
        "item priced above 50. What does the basket cost? Give a single integer."
    )


def solve(instance: dict) -> str:
    return str(sum(p - instance["coupon"] if p > 50 else p for p in instance["prices"]))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 100_000:
        return 0.0
    wanted = solve(instance)
    return 1.0 if re.search(rf"(?<![0-9]){wanted}(?![0-9])", answer) else 0.0
