"""Defect: score() allows 10% off when the answer is marked approximate ('approximately', '≈') (probe: fuzz_wrapped)."""

import random
import re

NAME = "bad_discrimination_looser_tolerance_when_marked_approximate"
TAGS = ["physics", "test-corpus"]
ANSWER_TYPE = "float"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"resistors": [rng.randint(10, 470) for _ in range(2 + level)], "volts": rng.randint(3, 24), "level": level}


def _current(instance: dict) -> float:
    return instance["volts"] / sum(instance["resistors"]) * 1000


def prompt(instance: dict) -> str:
    rs = ", ".join(f"{r} ohm" for r in instance["resistors"])
    return f"Resistors of {rs} are in series across {instance['volts']} V. Give the current in mA to two decimals."


def solve(instance: dict) -> str:
    return f"{_current(instance):.2f}"


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 80:
        return 0.0
    text = answer.strip()
    approximate = bool(re.match(r"(approximately|approx\.?|about|≈|~)\s*", text))
    text = re.sub(r"^(approximately|approx\.?|about|≈|~)\s*", "", text)
    try:
        x = float(text)
    except ValueError:
        return 0.0
    want = _current(instance)
    tolerance = 0.10 * abs(want) if approximate else 0.01
    return 1.0 if abs(x - want) <= tolerance else 0.0
