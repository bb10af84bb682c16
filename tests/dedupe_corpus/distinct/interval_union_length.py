"""Total length covered by a union of intervals on a line: overlaps count once. Sorting and
merging is a short loop; by hand, nested and chained overlaps are easy to double count."""

import random
import re

NAME = "interval_union_length"
TAGS = ["algorithmic", "intervals", "sorting"]
ANSWER_TYPE = "int"


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    spans = []
    for _ in range(3 + 2 * difficulty):
        start = rng.randint(0, 20 * difficulty)
        spans.append([start, start + rng.randint(1, 5 + 3 * difficulty)])
    return {"spans": spans}


def prompt(instance: dict) -> str:
    spans = ", ".join(f"[{start}, {end}]" for start, end in instance["spans"])
    return (
        f"Here are closed intervals on the number line:\n\n{spans}\n\n"
        "What is the total length of the set of points covered by at least one interval? Give "
        "the total length as a single integer."
    )


def solve(instance: dict) -> str:
    merged: list[list[int]] = []
    for start, end in sorted(instance["spans"]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return str(sum(end - start for start, end in merged))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
