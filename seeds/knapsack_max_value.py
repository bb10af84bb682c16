"""Choose a subset of items, each with a weight and a value, whose total weight fits a
capacity, and report the largest total value possible (the 0/1 knapsack problem). A
dynamic program over capacities solves it in a few lines, but in one's head the number of
subsets doubles with every item and greedy choices by value or by value per weight are
often wrong."""

import random
import re

NAME = "knapsack_max_value"
TAGS = ["algorithmic", "dp", "optimization"]
ANSWER_TYPE = "int"
INPUT_TYPE = "int"


# By difficulty 1 to 10: how many items, the heaviest weight and the largest value an item may
# have. They grow about geometrically from two single-digit items to 23 items.
_COUNTS = (2, 3, 4, 5, 6, 8, 10, 13, 17, 23)
_MAX_WEIGHTS = (5, 6, 8, 10, 12, 15, 18, 22, 28, 34)
_MAX_VALUES = (9, 11, 14, 18, 22, 28, 35, 44, 55, 69)


def _items(rng: random.Random, difficulty: int) -> tuple[list[int], list[int]]:
    count = _COUNTS[difficulty - 1]
    weights = [rng.randint(1, _MAX_WEIGHTS[difficulty - 1]) for _ in range(count)]
    values = [rng.randint(1, _MAX_VALUES[difficulty - 1]) for _ in range(count)]
    return weights, values


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    weights, values = _items(rng, difficulty)
    capacity = max(1, round(sum(weights) * rng.uniform(0.3, 0.6)))
    return {"weights": weights, "values": values, "capacity": capacity}


def generate_from(value: int, seed: int, difficulty: int) -> dict:
    """An instance whose capacity is value itself when it lies between 1 and the items' total
    weight (so a composed prompt can say "capacity X"), else 1 + (value mod the total weight):
    any int, negative or huge, gives a capacity in that range."""
    if not isinstance(value, int):
        raise TypeError(f"value must be an int, not {type(value).__name__}")
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:from:{seed}:{difficulty}")
    weights, values = _items(rng, difficulty)
    total = sum(weights)
    capacity = value if 1 <= value <= total else 1 + value % total
    return {"weights": weights, "values": values, "capacity": capacity}


def prompt(instance: dict) -> str:
    rows = "\n".join(
        f"item {i + 1}: weight {w}, value {v}"
        for i, (w, v) in enumerate(zip(instance["weights"], instance["values"], strict=True))
    )
    return (
        "You have these items:\n\n"
        f"{rows}\n\n"
        f"Choose any subset of the items (each item at most once) whose total weight is at "
        f"most {instance['capacity']}. What is the largest total value such a subset can "
        "have? Give the largest total value as a single integer."
    )


def solve(instance: dict) -> str:
    capacity = instance["capacity"]
    best = [0] * (capacity + 1)
    for weight, value in zip(instance["weights"], instance["values"], strict=True):
        for room in range(capacity, weight - 1, -1):
            best[room] = max(best[room], best[room - weight] + value)
    return str(best[capacity])


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
