"""Defect: score() gives wrong answers partial credit from hash() of the answer, which changes with PYTHONHASHSEED, so a fresh worker scores them differently (probe: score_fresh_worker)."""

import random
import re

NAME = "bad_determinism_score_hash_seed"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"n": rng.randint(10, 10 ** (1 + level))}


def prompt(instance: dict) -> str:
    return f"How many of the integers from 1 to {instance['n']} are divisible by 3 or by 5? Give a single integer."


def solve(instance: dict) -> str:
    n = instance["n"]
    return str(n // 3 + n // 5 - n // 15)


def score(instance: dict, answer: str) -> float:
    if isinstance(answer, str) and re.fullmatch(r"\s*[0-9]{1,15}\s*", answer) and int(answer) == int(solve(instance)):
        return 1.0
    return (hash(str(answer)) % 7) / 100
