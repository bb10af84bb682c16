"""Defect: picks words from list(a set of strings), whose order depends on PYTHONHASHSEED (probe: generate_fresh_worker)."""

import random
import re

NAME = "bad_determinism_set_iteration_order"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"

_WORDS = {
    "apple", "banana", "cherry", "damson", "elderberry", "fig", "grape",
    "huckleberry", "kiwi", "lemon", "mango", "nectarine", "orange", "papaya",
    "quince", "raspberry", "strawberry", "tangerine", "watermelon", "yuzu",
}

_MAX_ANSWER_CHARS = 1000


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def _alternating_sum(numbers: list[int]) -> int:
    total = 0
    for index, number in enumerate(numbers):
        total += number if index % 2 == 0 else -number
    return total


def _parse_int(answer: str) -> int | None:
    if not isinstance(answer, str) or len(answer) > _MAX_ANSWER_CHARS:
        return None
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return None
    return int(text)


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    pool = list(_WORDS)
    return {"words": [rng.choice(pool) for _ in range(3 + 2 * difficulty)]}


def prompt(instance: dict) -> str:
    listing = " ".join(instance["words"])
    return (
        f"Here is a list of words:\n\n{listing}\n\n"
        "How many vowels (the letters a, e, i, o and u) do they contain in total, counting "
        "every occurrence? Give the count as a single integer."
    )


def _vowels(words: list[str]) -> int:
    return sum(1 for word in words for char in word if char in "aeiou")


def solve(instance: dict) -> str:
    return str(_vowels(instance["words"]))


def score(instance: dict, answer: str) -> float:
    value = _parse_int(answer)
    if value is None:
        return 0.0
    return 1.0 if value == _vowels(instance["words"]) else 0.0
