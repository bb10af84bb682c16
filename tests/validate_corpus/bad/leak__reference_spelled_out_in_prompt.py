"""Defect: the prompt spells out the digits of the reference answer, as a "hint code" (probe: leak_spelled_out)."""

import random
import re

NAME = "bad_leak_reference_spelled_out"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"

_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"speed": rng.randint(3, 30 * level), "hours": rng.randint(2, 12), "stops": rng.randint(1, 9)}


def solve(instance: dict) -> str:
    return str(instance["speed"] * instance["hours"] - 5 * instance["stops"])


def prompt(instance: dict) -> str:
    code = "-".join(_WORDS[int(d)] for d in solve(instance).lstrip("-"))
    return (
        f"Hint code: {code}.\n\nA train runs at {instance['speed']} km per hour for "
        f"{instance['hours']} hours and loses 5 km at each of its {instance['stops']} stops. "
        "How far does it get, in km? Give a single integer."
    )


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or not re.fullmatch(r"\s*-?[0-9]{1,9}\s*", answer):
        return 0.0
    return 1.0 if int(answer) == int(solve(instance)) else 0.0
