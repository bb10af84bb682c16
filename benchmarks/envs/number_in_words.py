"""Write a whole number in English words ("4,071" as "four thousand seventy-one"). A short
recursive function does it for any size, but by hand the groups of three digits, the scale words
and the zeros inside a number are easy to misplace once it has more than a few digits. It is
the learning benchmark's task for a very small model: its low levels (numbers below a hundred)
are within reach of SmolLM2-135M, its answers are many (so guessing scores little), and each
level adds a digit."""

import random
import re

NAME = "number_in_words"
TAGS = ["language", "numbers", "benchmark"]
ANSWER_TYPE = "str"
INPUT_TYPE = "int"

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ((10**9, "billion"), (10**6, "million"), (1000, "thousand"))
# The numbers asked at difficulty 1 to 10: below twenty, then one more digit a level, up to
# hundreds of billions at the top.
_RANGES = (
    (0, 19),
    (20, 99),
    (100, 999),
    (1000, 9999),
    (10**4, 10**5 - 1),
    (10**5, 10**6 - 1),
    (10**6, 10**7 - 1),
    (10**7, 10**8 - 1),
    (10**8, 10**10 - 1),
    (10**10, 10**12 - 1),
)
_LARGEST = _RANGES[-1][1]


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def _words(n: int) -> str:
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("-" + _ONES[n % 10] if n % 10 else "")
    if n < 1000:
        return _ONES[n // 100] + " hundred" + (" " + _words(n % 100) if n % 100 else "")
    for size, name in _SCALES:
        if n >= size:
            return _words(n // size) + " " + name + (" " + _words(n % size) if n % size else "")
    raise ValueError(n)


def _normal(text: str) -> str:
    """One spelling per number: lowercase, hyphens and commas as spaces, "and" dropped, a
    final full stop ignored."""
    text = re.sub(r"[-,]", " ", text.strip().lower().removesuffix("."))
    return " ".join(w for w in text.split() if w != "and")


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    low, high = _RANGES[difficulty - 1]
    return {"number": rng.randint(low, high)}


def generate_from(value: int, seed: int, difficulty: int) -> dict:
    """The value itself when it is a whole number in range, else its magnitude wrapped into it."""
    if not isinstance(value, int):
        raise TypeError(f"value must be an int, not {type(value).__name__}")
    return {"number": abs(value) % (_LARGEST + 1)}


def prompt(instance: dict) -> str:
    # short on purpose: a CPU reads long prompts slowly, and score accepts "forty two",
    # "Forty-Two" and "one hundred and five" alike
    return f"How is the number {instance['number']} written in words? Give it in lowercase English words."


def solve(instance: dict) -> str:
    return _words(instance["number"])


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 500:
        return 0.0
    return 1.0 if _normal(answer) == _normal(solve(instance)) else 0.0
