"""The probability that two independent draws from a skewed bag both come out red, to three
decimal places: the products and sums of fractions are easy in code and slippery by hand,
and the rounding the prompt asks for makes a tolerance of half a unit in the last place the
rule the task really needs (the answers are often close to zero)."""

import random
import re

NAME = "small_probability_with_needed_tolerance"
TAGS = ["probability", "test-corpus"]
ANSWER_TYPE = "float"


def generate(seed: int, difficulty: int) -> dict:
    d = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{d}")
    bags = [{"red": rng.randint(1, 3 * d), "blue": rng.randint(5, 40 * d)} for _ in range(2)]
    return {"bags": bags}


def _value(bags: list[dict]) -> float:
    p = 1.0
    for bag in bags:
        p *= bag["red"] / (bag["red"] + bag["blue"])
    return p


def prompt(instance: dict) -> str:
    a, b = instance["bags"]
    return (
        f"Bag A holds {a['red']} red and {a['blue']} blue marbles; bag B holds {b['red']} red and "
        f"{b['blue']} blue. One marble is drawn from each bag. Give the probability that both are "
        "red, rounded to 3 decimal places."
    )


def solve(instance: dict) -> str:
    return f"{_value(instance['bags']):.3f}"


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 40:
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[0-9]{1,3}(\.[0-9]{1,9})?", text):
        return 0.0
    return 1.0 if abs(float(text) - _value(instance["bags"])) <= 0.0005 + 1e-12 else 0.0
