"""Digit-product chains: repeatedly replace a number by the product of its nonzero digits
until one digit is left, and report how many steps it took plus the digit. The prompt shows a
worked example, thought through in a think block, on another number: it teaches the method
and is full of numbers, but tells nothing about this instance's answer."""

import random
import re

NAME = "worked_example_in_a_think_block"
TAGS = ["arithmetic", "simulation", "test-corpus"]
ANSWER_TYPE = "list[int]"


def _chain(n: int) -> list[int]:
    out = [n]
    while n >= 10:
        p = 1
        for c in str(n):
            if c != "0":
                p *= int(c)
        n = p
        out.append(n)
    return out


def generate(seed: int, difficulty: int) -> dict:
    d = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{d}")
    return {"n": rng.randint(10 ** (d + 1), 10 ** (d + 2) - 1), "example": rng.randint(1000, 9999)}


def prompt(instance: dict) -> str:
    ex = _chain(instance["example"])
    steps = " -> ".join(map(str, ex))
    return (
        "Replace a number by the product of its nonzero digits until a single digit is left.\n"
        f"Example with {instance['example']}:\n<think>{steps}; that took {len(ex) - 1} steps and "
        f"ended at {ex[-1]}</think>\nAnswer for the example: {len(ex) - 1} {ex[-1]}\n\n"
        f"Now do it for {instance['n']}. Give the number of steps and the final digit, separated by a space."
    )


def solve(instance: dict) -> str:
    c = _chain(instance["n"])
    return f"{len(c) - 1} {c[-1]}"


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 50:
        return 0.0
    tokens = answer.split()
    if len(tokens) != 2 or not all(re.fullmatch(r"[0-9]{1,3}", t) for t in tokens):
        return 0.0
    return 1.0 if " ".join(tokens) == solve(instance) else 0.0
