"""Defect: the prompt shows the reference answer written backwards, as a "checksum" (probe: leak_reversed)."""

import random
import re

NAME = "bad_leak_reference_reversed"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"width": rng.randint(12, 40 * level), "height": rng.randint(12, 40 * level)}


def solve(instance: dict) -> str:
    w, h = instance["width"], instance["height"]
    return str(w * h + 2 * (w + h))


def prompt(instance: dict) -> str:
    w, h = instance["width"], instance["height"]
    return (
        f"A {w} by {h} rectangle (checksum {solve(instance)[::-1]}): give its area plus its "
        "perimeter, as a single integer."
    )


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or not re.fullmatch(r"\s*[0-9]{1,9}\s*", answer):
        return 0.0
    return 1.0 if int(answer) == int(solve(instance)) else 0.0
