"""Defect: generate() spends about 0.25 s at difficulty 5 only (the corpus budget is 0.1 s), while the top level is fast."""

import hashlib
import random
import re

NAME = "bad_budget_slow_generate_at_a_middle_level"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def _value(numbers: list[int]) -> int:
    total = 0
    for i, x in enumerate(numbers):
        total = (total * 31 + x * x + i) % 9000
    return 1000 + total


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    if level == 5:
        # A bounded busy loop in C (OpenSSL), so its time hardly depends on the interpreter:
        # 1 million rounds, 0.24 s quiet on the 2-core dev box, about 2.4x over the corpus recipe's
        # 0.1 s budget and 4x under the 1 s limit (500,000 rounds, 0.12 s, sat on the budget).
        rng.seed(hashlib.pbkdf2_hmac("sha256", str(seed).encode(), b"pad", 1_000_000))
    return {"numbers": [rng.randint(10, 99) for _ in range(3 + level)], "level": level}


def prompt(instance: dict) -> str:
    listing = ", ".join(map(str, instance["numbers"]))
    return (
        f"Numbers: {listing}\n\nStart from 0. For each number x at position i (0-based), replace "
        "the total by (31 * total + x * x + i) mod 9000. Give 1000 plus the final total, as an integer."
    )


def solve(instance: dict) -> str:
    return str(_value(instance["numbers"]))


def _parse(answer: str) -> int | None:
    if not isinstance(answer, str) or len(answer) > 200:
        return None
    text = answer.strip()
    return int(text) if re.fullmatch(r"[+-]?[0-9]{1,12}", text) else None


def score(instance: dict, answer: str) -> float:
    value = _parse(answer)
    return 1.0 if value is not None and value == _value(instance["numbers"]) else 0.0
