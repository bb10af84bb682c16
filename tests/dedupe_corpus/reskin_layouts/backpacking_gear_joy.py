"""A hiker picks gear under a weight limit, each piece bringing some joy; the most joy? (re-skin of knapsack_max_value)."""

import random
import re

NAME = "backpacking_gear_joy"
TAGS = ["optimization", "test-corpus"]
ANSWER_TYPE = "int"
GEAR = ("tent", "stove", "camera", "book", "hammock", "kite", "guitar", "lantern", "binoculars", "chess set", "fishing rod", "drone", "tripod")


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}/{seed}/{level}")
    n = 3 + level
    grams = [100 * rng.randint(1, 3 + level) for _ in range(n)]
    return {"gear": rng.sample(GEAR, n), "grams": grams, "joy": [rng.randint(1, 9 * level) for _ in range(n)], "limit": sum(grams) // 2}


def prompt(instance: dict) -> str:
    rows = ", ".join(f"the {g} ({w} g, joy {j})" for g, w, j in zip(instance["gear"], instance["grams"], instance["joy"]))
    return (
        f"A hiker can carry at most {instance['limit']} g. Gear on offer: {rows}. "
        "Packing each piece at most once, what is the greatest total joy? One integer, please."
    )


def solve(instance: dict) -> str:
    best = {0: 0}
    for w, j in zip(instance["grams"], instance["joy"]):
        for used, got in list(best.items()):
            if used + w <= instance["limit"] and best.get(used + w, -1) < got + j:
                best[used + w] = got + j
    return str(max(best.values()))


def score(instance: dict, answer: str) -> float:
    text = answer.strip() if isinstance(answer, str) else ""
    return 1.0 if re.fullmatch(r"\d{1,30}", text) and int(text) == int(solve(instance)) else 0.0
