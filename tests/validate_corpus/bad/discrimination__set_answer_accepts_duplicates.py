"""Defect: a planted subset-sum whose score() reads the chosen indices as a set, so an index given twice still counts once and a repeated item passes (probe: near_miss_duplicate)."""

import random
import re

NAME = "bad_discrimination_set_accepts_duplicates"
TAGS = ["planted", "search", "test-corpus"]
ANSWER_TYPE = "list[int]"


def generate(seed: int, difficulty: int) -> dict:
    d = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{d}")
    count = 6 + 2 * d
    numbers = [rng.randint(1, 2 ** (4 + d)) for _ in range(count)]
    chosen = sorted(rng.sample(range(count), count // 2))
    return {"numbers": numbers, "target": sum(numbers[i] for i in chosen), "planted": chosen}


def prompt(instance: dict) -> str:
    listing = "\n".join(f"{i}: {v}" for i, v in enumerate(instance["numbers"]))
    return (
        f"Numbers, each after its index:\n\n{listing}\n\nChoose some of them, each at most once, "
        f"that add up to exactly {instance['target']}. Any such choice is accepted, in any "
        "order. Give the chosen indices separated by single spaces."
    )


def solve(instance: dict) -> str:
    return " ".join(map(str, instance["planted"]))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 5000:
        return 0.0
    tokens = answer.split()
    if not tokens or not all(re.fullmatch(r"[0-9]{1,4}", t) for t in tokens):
        return 0.0
    chosen = {int(t) for t in tokens}
    if any(i >= len(instance["numbers"]) for i in chosen):
        return 0.0
    return 1.0 if sum(instance["numbers"][i] for i in chosen) == instance["target"] else 0.0
