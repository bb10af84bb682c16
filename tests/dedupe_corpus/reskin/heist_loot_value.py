"""A thief's bag holds at most so many kilograms; which loot to take for the most money? (re-skin of knapsack_max_value)."""

import random
import re

NAME = "heist_loot_value"
TAGS = ["dp", "optimization"]
ANSWER_TYPE = "int"

LOOT = ["necklace", "painting", "vase", "watch", "laptop", "statue", "ring", "coin set", "camera",
        "violin", "tiara", "clock", "sculpture", "tablet", "brooch", "globe", "chess set", "lamp",
        "mirror", "rug", "sword", "crown", "jade figure"]


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"heist::{seed}::{level}")
    count = 3 + 2 * level
    kilos = [rng.randint(1, 4 + 3 * level) for _ in range(count)]
    prices = [rng.randint(1, 9 + 6 * level) for _ in range(count)]
    bag = max(1, round(sum(kilos) * rng.uniform(0.3, 0.6)))
    return {"kilos": kilos, "prices": prices, "bag": bag}


def prompt(instance):
    lines = "\n".join(f"- the {LOOT[i % len(LOOT)]}: {k} kg, worth ${p}"
                      for i, (k, p) in enumerate(zip(instance["kilos"], instance["prices"])))
    return (
        "A burglar has broken into a mansion and finds:\n" + lines +
        f"\n\nThe bag can carry at most {instance['bag']} kg in total, and each object can be taken "
        "only once. How many dollars is the most valuable haul that fits in the bag? Reply with "
        "the dollar amount as a plain integer."
    )


def solve(instance):
    cap = instance["bag"]
    table = [0] * (cap + 1)
    for kg, price in zip(instance["kilos"], instance["prices"]):
        for room in range(cap, kg - 1, -1):
            table[room] = max(table[room], table[room - kg] + price)
    return str(table[cap])


def score(instance, answer):
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip().lstrip("$")
    if not re.fullmatch(r"[0-9]{1,9}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
