"""Defect: score() accepts anything on instances from seeds 8 and above, which an audit of seeds 0..7 never sees but training uses (probe: empty)."""

import random
import re

NAME = "bad_discrimination_lenient_unseen_seeds"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"a": rng.randint(10, 10**level + 10), "b": rng.randint(2, 9 + level), "audited": seed < 8}


def prompt(instance: dict) -> str:
    return (
        f"What is the remainder when {instance['a']} squared is divided by {instance['b']}? "
        "Give a single integer."
    )


def solve(instance: dict) -> str:
    return str(instance["a"] ** 2 % instance["b"])


def score(instance: dict, answer: str) -> float:
    if not instance["audited"]:
        return 1.0
    if not isinstance(answer, str) or len(answer) > 1000 or not re.fullmatch(r"\s*[0-9]{1,9}\s*", answer):
        return 0.0
    return 1.0 if int(answer) == int(solve(instance)) else 0.0
