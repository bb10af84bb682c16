"""Defect: score() pays 0.9, not full pay, for a wrong total marked approximate or boxed within 3 of the right one (probe: fuzz_wrapped)."""

import random
import re

NAME = "bad_discrimination_approximate_answer_paid_nine_tenths"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"
_DRESSED = re.compile(r"(?:approximately|about|≈)\s*(-?[0-9]{1,9})|\\boxed\{(-?[0-9]{1,9})\}", re.IGNORECASE)


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"boxes": [rng.randint(2, 40) for _ in range(2 + level)], "per_box": rng.randint(3, 12), "level": level}


def _total(instance: dict) -> int:
    return sum(instance["boxes"]) * instance["per_box"] - len(instance["boxes"])


def prompt(instance: dict) -> str:
    boxes = ", ".join(map(str, instance["boxes"]))
    return (
        f"Crates hold {boxes} boxes. Each box holds {instance['per_box']} jars, and one jar per crate "
        "is broken. How many whole jars are there? Give the number."
    )


def solve(instance: dict) -> str:
    return str(_total(instance))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 60:
        return 0.0
    text = answer.strip()
    if re.fullmatch(r"-?[0-9]{1,9}", text):
        return 1.0 if int(text) == _total(instance) else 0.0
    m = _DRESSED.fullmatch(text)
    if m is None:
        return 0.0
    value = int(m.group(1) or m.group(2))
    return 1.0 if value == _total(instance) else 0.9 if abs(value - _total(instance)) <= 3 else 0.0
