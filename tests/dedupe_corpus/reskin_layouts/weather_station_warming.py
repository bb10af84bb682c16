"""A weather station's readings: over how many readings, picked in order, does it get strictly warmer each time at most? (re-skin of longest_increasing_subsequence)."""

import bisect
import random
import re

NAME = "weather_station_warming"
TAGS = ["sequences", "test-corpus"]
ANSWER_TYPE = "int"
STATIONS = ("Tromso", "Arequipa", "Hobart", "Kiruna", "Ushuaia")


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"station": rng.choice(STATIONS), "unit": "C", "readings": [rng.randint(-20, 40) for _ in range(4 + 3 * level)]}


def prompt(instance: dict) -> str:
    return (
        f"The station at {instance['station']} logged these temperatures ({instance['unit']}), in order: "
        f"{', '.join(map(str, instance['readings']))}. Pick readings keeping their order so that each is "
        "strictly warmer than the one before. How many readings can such a pick hold at most? An integer."
    )


def solve(instance: dict) -> str:
    tails: list[int] = []
    for t in instance["readings"]:
        k = bisect.bisect_left(tails, t)
        tails[k : k + 1] = [t]
    return str(len(tails))


def score(instance: dict, answer: str) -> float:
    text = answer.strip() if isinstance(answer, str) else ""
    return 1.0 if re.fullmatch(r"\d{1,30}", text) and int(text) == int(solve(instance)) else 0.0
