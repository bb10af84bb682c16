"""Count the inversions (pairs out of order) in a table of three-digit numbers: the prompt is
full of numbers of the answer's size, a few lines of code count the pairs, and by hand one
loses count long before the end."""

import random
import re

NAME = "inversions_in_a_table_of_numbers"
TAGS = ["counting", "sorting", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    d = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{d}")
    return {"rows": [[rng.randint(100, 999) for _ in range(6)] for _ in range(2 + d)]}


def _inversions(values: list[int]) -> int:
    return sum(1 for i, a in enumerate(values) for b in values[i + 1 :] if a > b)


def prompt(instance: dict) -> str:
    table = "\n".join(" | ".join(map(str, row)) for row in instance["rows"])
    return (
        f"Reading this table row by row, left to right:\n\n{table}\n\nHow many pairs of entries "
        "are out of order (an earlier entry larger than a later one)? Give an integer."
    )


def solve(instance: dict) -> str:
    return str(_inversions([v for row in instance["rows"] for v in row]))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 50 or not re.fullmatch(r"\s*[0-9]{1,9}\s*", answer):
        return 0.0
    return 1.0 if int(answer) == _inversions([v for row in instance["rows"] for v in row]) else 0.0
