"""A bake sale's trays carry price tags; pick trays whose prices add up to a donor's exact gift (re-skin of subset_sum_planted)."""

import random
import re

NAME = "bake_sale_trays"
TAGS = ["subset-sum", "planted", "test-corpus"]
ANSWER_TYPE = "list[int]"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    prices = [rng.randint(1, 10 * level + 5) for _ in range(4 + level)]
    chosen = sorted(rng.sample(range(len(prices)), 2 + level // 3))
    return {"currency": "EUR", "tray_prices": prices, "gift": sum(prices[i] for i in chosen), "chosen": chosen}


def prompt(instance: dict) -> str:
    tags = ", ".join(f"tray {i}: {p} {instance['currency']}" for i, p in enumerate(instance["tray_prices"]))
    return (
        f"Trays for sale ({tags}). A donor gives exactly {instance['gift']} {instance['currency']} and wants "
        "trays worth exactly that. Give the tray numbers, increasing, separated by spaces."
    )


def solve(instance: dict) -> str:
    return " ".join(map(str, instance["chosen"]))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or not re.fullmatch(r"\s*\d{1,6}(?:[\s,]+\d{1,6})*\s*", answer):
        return 0.0
    picks = [int(x) for x in re.findall(r"\d+", answer)]
    if picks != sorted(set(picks)) or picks[-1] >= len(instance["tray_prices"]):
        return 0.0
    return 1.0 if sum(instance["tray_prices"][i] for i in picks) == instance["gift"] else 0.0
