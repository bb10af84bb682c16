"""Weighted interval scheduling: pick non-overlapping bookings to earn the most. Sorting by end
time and a dynamic program with binary search solve it exactly; by hand, greedy choices look
right and are not."""

import bisect
import random
import re

NAME = "weighted_interval_schedule"
TAGS = ["algorithmic", "dp", "scheduling"]
ANSWER_TYPE = "int"


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    count = 3 + 2 * difficulty
    horizon = 6 * count
    bookings = []
    for _ in range(count):
        start = rng.randrange(0, horizon - 2)
        end = min(horizon, start + rng.randint(2, max(3, horizon // 4)))
        bookings.append([start, end, rng.randint(5, 60)])
    return {"bookings": bookings}


def prompt(instance: dict) -> str:
    rows = "\n".join(
        f"booking {i + 1}: from hour {start} to hour {end}, pays {fee}"
        for i, (start, end, fee) in enumerate(instance["bookings"])
    )
    return (
        "A studio can host one booking at a time; one booking may start exactly when another "
        f"ends.\n\n{rows}\n\n"
        "Choose bookings whose time ranges do not overlap so that the total pay is as large as "
        "possible. Give the largest total pay as a single integer."
    )


def solve(instance: dict) -> str:
    bookings = sorted(instance["bookings"], key=lambda b: b[1])
    ends = [end for _, end, _ in bookings]
    best = [0] * (len(bookings) + 1)
    for i, (start, _, fee) in enumerate(bookings, start=1):
        j = bisect.bisect_right(ends, start, 0, i - 1)
        best[i] = max(best[i - 1], best[j] + fee)
    return str(best[-1])


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
