"""A trader's closing prices as dated records: how many days, in order, can show a strictly rising close at most? (re-skin of longest_increasing_subsequence)."""

import bisect
import random
import re

NAME = "stock_climb_days"
TAGS = ["sequences", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"closes": [{"day": d + 1, "close": rng.randint(10, 99)} for d in range(4 + 3 * level)]}


def prompt(instance: dict) -> str:
    rows = "; ".join(f"day {r['day']}: {r['close']}" for r in instance["closes"])
    return (
        f"Closing prices: {rows}. Choose days in calendar order on which each close is strictly above the "
        "previous chosen one. What is the largest number of days such a choice can have? Give an integer."
    )


def solve(instance: dict) -> str:
    tails: list[int] = []
    for r in sorted(instance["closes"], key=lambda r: r["day"]):
        k = bisect.bisect_left(tails, r["close"])
        tails[k : k + 1] = [r["close"]]
    return str(len(tails))


def score(instance: dict, answer: str) -> float:
    text = answer.strip() if isinstance(answer, str) else ""
    return 1.0 if re.fullmatch(r"\d{1,30}", text) and int(text) == int(solve(instance)) else 0.0
