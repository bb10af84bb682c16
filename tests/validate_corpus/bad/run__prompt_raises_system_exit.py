"""Defect: prompt raises SystemExit for instances whose largest number is even, a BaseException that stops a program instead of an error a stage may contain (probe: base_exception)."""

import random
import re

NAME = "bad_run_prompt_raises_system_exit"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"numbers": [rng.randint(1, 10 * level) for _ in range(2 + level)]}


def prompt(instance: dict) -> str:
    if max(instance["numbers"]) % 2 == 0:
        raise SystemExit(3)
    return f"What is the largest of {', '.join(map(str, instance['numbers']))}? Give a single integer."


def solve(instance: dict) -> str:
    return str(max(instance["numbers"]))


def score(instance: dict, answer: str) -> float:
    text = answer.strip() if isinstance(answer, str) else ""
    return 1.0 if re.fullmatch(r"[0-9]{1,30}", text) and int(text) == max(instance["numbers"]) else 0.0
