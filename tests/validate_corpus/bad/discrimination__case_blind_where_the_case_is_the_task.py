"""Defect: the task is to reverse a word and swap its letters' case, and score() compares without case, paying the word with its case left unswapped (probe: fuzz_case)."""

import random

NAME = "bad_discrimination_case_blind_where_the_case_is_the_task"
TAGS = ["strings", "test-corpus"]
ANSWER_TYPE = "str"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    letters = [rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(4 + level)]
    return {"word": "".join(c.upper() if rng.random() < 0.5 else c for c in letters), "level": level}


def prompt(instance: dict) -> str:
    return (
        f"Write the word {instance['word']} backwards, then swap the case of every letter "
        "(upper case becomes lower case and lower case becomes upper case). Give the resulting word."
    )


def solve(instance: dict) -> str:
    return instance["word"][::-1].swapcase()


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 60:
        return 0.0
    return 1.0 if answer.strip().lower() == solve(instance).lower() else 0.0
