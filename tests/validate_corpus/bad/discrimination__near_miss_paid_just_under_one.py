"""Defect: score() pays an answer one off the total 0.9999, which a policy earns as full pay (probe: near_miss_number)."""

import random

NAME = "bad_discrimination_near_miss_paid_just_under_one"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"prices": [rng.randint(3, 97) for _ in range(3 + 2 * level)], "coupon": rng.randint(1, 9), "level": level}


def _total(instance: dict) -> int:
    return sum(p for p in instance["prices"] if p % instance["coupon"]) * 3 + len(instance["prices"])


def prompt(instance: dict) -> str:
    prices = ", ".join(map(str, instance["prices"]))
    return (
        f"Prices: {prices}. Drop every price divisible by {instance['coupon']}, triple the sum of the rest, "
        "and add the number of prices (all of them). Give the result as an integer."
    )


def solve(instance: dict) -> str:
    return str(_total(instance))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 40:
        return 0.0
    text = answer.strip()
    if not text.lstrip("-").isdigit():
        return 0.0
    off = abs(int(text) - _total(instance))
    return 1.0 if off == 0 else 0.9999 if off == 1 else 0.0
