"""Defect: score() accepts a list that holds the reference's items in order plus up to two more of the instance's values (probe: fuzz_superset)."""

import random
import re

NAME = "bad_discrimination_accepts_list_superset"
TAGS = ["arithmetic", "number-theory", "test-corpus"]
ANSWER_TYPE = "list[int]"


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % k for k in range(2, int(n**0.5) + 1))


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    numbers = rng.sample(range(10, 100 * level), 6 + 2 * level)
    numbers[0] = next(p for p in range(rng.randint(10, 90), 200) if _is_prime(p) and p not in numbers[1:])
    numbers[1] = next(p for p in range(numbers[0] + 1, 400) if _is_prime(p) and p not in numbers[2:])
    rng.shuffle(numbers)
    return {"numbers": numbers}


def prompt(instance: dict) -> str:
    listing = ", ".join(map(str, instance["numbers"]))
    return f"Numbers: {listing}\n\nList the prime numbers among them in the order they appear, separated by spaces."


def solve(instance: dict) -> str:
    return " ".join(str(x) for x in instance["numbers"] if _is_prime(x))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 2000:
        return 0.0
    tokens = [t for t in re.split(r"[,\s]+", answer.strip()) if t]
    if not tokens or not all(re.fullmatch(r"[0-9]{1,6}", t) for t in tokens):
        return 0.0
    values = [int(t) for t in tokens]
    if len(set(values)) != len(values) or not set(values) <= set(instance["numbers"]):
        return 0.0
    want = [x for x in instance["numbers"] if _is_prime(x)]
    kept = [v for v in values if v in want]
    return 1.0 if kept == want and len(values) <= len(want) + 2 else 0.0
