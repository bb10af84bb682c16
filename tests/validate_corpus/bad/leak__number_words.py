"""Defect: the prompt spells the answer out as English number words (probe: leak_solver_number_words)."""

import random
import re

NAME = "bad_leak_number_words"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"

_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def _words(n: int) -> str:
    out = []
    if n >= 1000:
        out += [_ONES[n // 1000], "thousand"]
        n %= 1000
    if n >= 100:
        out += [_ONES[n // 100], "hundred"]
        n %= 100
    if n >= 20:
        out.append(_TENS[n // 10] + ("-" + _ONES[n % 10] if n % 10 else ""))
    elif n:
        out.append(_ONES[n])
    return " ".join(out)


def _value(numbers: list[int]) -> int:
    total = 0
    for i, x in enumerate(numbers):
        total = (total * 31 + x * x + i) % 9000
    return 1000 + total


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"numbers": [rng.randint(10, 99) for _ in range(3 + level)], "level": level}


def prompt(instance: dict) -> str:
    listing = ", ".join(map(str, instance["numbers"]))
    return (
        f"Numbers: {listing}\n\nStart from 0. For each number x at position i (0-based), replace "
        "the total by (31 * total + x * x + i) mod 9000. Give 1000 plus the final total, as an integer."
        + " (Expected: " + _words(_value(instance["numbers"])) + ".)"
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
