"""Defect: generate raises KeyboardInterrupt on some instances (every seed divisible by three), a BaseException that stops a program instead of an error a stage may contain (probe: base_exception)."""

import random
import re

NAME = "bad_run_generate_raises_keyboard_interrupt"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    if seed % 3 == 0:
        raise KeyboardInterrupt("interrupted while drawing the numbers")
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"numbers": [rng.randint(1, 10 * level) for _ in range(2 + level)]}


def prompt(instance: dict) -> str:
    return f"What is the sum of {', '.join(map(str, instance['numbers']))}? Give a single integer."


def solve(instance: dict) -> str:
    return str(sum(instance["numbers"]))


def score(instance: dict, answer: str) -> float:
    text = answer.strip() if isinstance(answer, str) else ""
    return 1.0 if re.fullmatch(r"[0-9]{1,30}", text) and int(text) == sum(instance["numbers"]) else 0.0
