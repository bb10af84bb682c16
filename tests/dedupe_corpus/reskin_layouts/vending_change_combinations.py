"""A vending machine's designer asks in how many ways a price can be paid in its coin slots, order ignored (re-skin of coin_change_ways)."""

import random
import re

NAME = "vending_change_combinations"
TAGS = ["counting", "test-corpus"]
ANSWER_TYPE = "int"
BIG = 1_000_000_007


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}#{seed}#{level}")
    slots = sorted(rng.sample(range(1, 5 + 2 * level), 2 + level // 2))
    return {"machine": f"VX-{rng.randint(100, 999)}", "price": rng.randint(5 * level, 60 * level), "slot_values": slots, "reduce_by": BIG if level >= 9 else None}


def prompt(instance: dict) -> str:
    tail = f" Report the count modulo {instance['reduce_by']}." if instance["reduce_by"] else ""
    return (
        f"Machine {instance['machine']} accepts coins of {instance['slot_values']} cents, any number of each. "
        f"Counting only which coins are used (not their order), in how many ways can a {instance['price']}-cent snack be paid exactly?{tail} "
        "Answer with one integer."
    )


def solve(instance: dict) -> str:
    table = [1] + [0] * instance["price"]
    for c in instance["slot_values"]:
        for t in range(c, instance["price"] + 1):
            table[t] += table[t - c]
    count = table[instance["price"]]
    return str(count % instance["reduce_by"] if instance["reduce_by"] else count)


def score(instance: dict, answer: str) -> float:
    text = answer.strip() if isinstance(answer, str) else ""
    return 1.0 if re.fullmatch(r"\d{1,60}", text) and int(text) == int(solve(instance)) else 0.0
