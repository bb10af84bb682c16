"""Defect: score() gives wrong answers a random bit of partial credit from the global random module, so the same answer scores differently each time (probe: score_repeat)."""

import random
import re

NAME = "bad_determinism_score_random"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"base": rng.randint(2, 9), "exponent": rng.randint(2, 4 + 2 * level), "modulus": rng.randint(7, 97)}


def prompt(instance: dict) -> str:
    return (
        f"Compute {instance['base']} to the power {instance['exponent']}, modulo {instance['modulus']}. "
        "Give a single integer."
    )


def solve(instance: dict) -> str:
    return str(pow(instance["base"], instance["exponent"], instance["modulus"]))


def score(instance: dict, answer: str) -> float:
    if isinstance(answer, str) and re.fullmatch(r"\s*[0-9]{1,9}\s*", answer) and int(answer) == int(solve(instance)):
        return 1.0
    return round(random.random() * 0.1, 3)  # "a little encouragement"
