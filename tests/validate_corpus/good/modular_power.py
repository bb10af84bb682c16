"""Compute a modular power: a base raised to a large exponent, reduced modulo an odd modulus
that shares no factor with the base. Square-and-multiply (Python's three-argument pow) does
it instantly, but by hand the exponent has several digits, so one needs dozens of exact
multiplications of multi-digit numbers and reductions, and a single slip changes the answer."""

import math
import random
import re

NAME = "modular_power"
TAGS = ["arithmetic", "number-theory", "test-corpus"]
ANSWER_TYPE = "int"
INPUT_TYPE = "int"

_MAX_ANSWER_CHARS = 1000


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def _modulus_and_base(rng: random.Random, difficulty: int) -> tuple[int, int]:
    low, high = 10 ** (1 + difficulty), 10 ** (2 + difficulty)
    modulus = rng.randrange(low + 1, high, 2)
    while True:
        base = rng.randint(2, modulus - 2)
        if math.gcd(base, modulus) == 1:
            return modulus, base


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    modulus, base = _modulus_and_base(rng, difficulty)
    exponent = rng.randint(10 ** difficulty, 10 ** (difficulty + 1))
    return {"base": base, "exponent": exponent, "modulus": modulus}


def generate_from(value: int, seed: int, difficulty: int) -> dict:
    """An instance whose exponent is 2 + (|value| mod 10^(difficulty + 1)), so any int gives
    a positive exponent of at most difficulty + 1 digits."""
    if not isinstance(value, int):
        raise TypeError(f"value must be an int, not {type(value).__name__}")
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:from:{seed}:{difficulty}")
    modulus, base = _modulus_and_base(rng, difficulty)
    exponent = 2 + abs(int(value)) % 10 ** (difficulty + 1)
    return {"base": base, "exponent": exponent, "modulus": modulus}


def prompt(instance: dict) -> str:
    return (
        f"Let b = {instance['base']}, e = {instance['exponent']} and m = {instance['modulus']}.\n\n"
        "Compute b raised to the power e, reduced modulo m: the remainder of b^e divided by m, "
        "a whole number at least zero and smaller than m. Give that remainder as a single "
        "integer in decimal notation."
    )


def solve(instance: dict) -> str:
    return str(pow(instance["base"], instance["exponent"], instance["modulus"]))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > _MAX_ANSWER_CHARS:
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,40}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
