"""Find the length of the longest strictly increasing subsequence of a list of integers (the
numbers kept in their original order, not necessarily adjacent). Patience sorting with a
binary search gets it in a few lines of code, but by eye one must weigh a great many
candidate subsequences against each other, and repeated values and a downward or upward drift
in the list make a plausible guess easy and wrong."""

import bisect
import random
import re

NAME = "longest_increasing_subsequence"
TAGS = ["algorithmic", "dp", "sequence"]
ANSWER_TYPE = "int"
INPUT_TYPE = "list[int]"

# Values given to generate_from are folded into -_BOUND.._BOUND to keep instances small.
_BOUND = 10**6


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


# The typical list length by difficulty 1 to 10, growing geometrically.
_MIDDLES = (4, 6, 9, 14, 21, 31, 47, 71, 106, 160)


def _length(rng: random.Random, difficulty: int) -> int:
    """About 4 numbers at difficulty 1 (3 to 5) growing geometrically to about 160 at 10
    (120 to 200): a quarter either side of the typical length."""
    middle = _MIDDLES[difficulty - 1]
    return rng.randint(middle - middle // 4, middle + middle // 4)


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    length = _length(rng, difficulty)
    spread = 2 * length
    # A random drift, up or down, spreads the answers: a list that falls has a short one.
    drift = rng.uniform(-3.0, 3.0) * spread / length
    raw = [rng.randint(0, spread) + round(drift * index) for index in range(length)]
    # Every value exceeds the length, so the answer never appears in the list itself.
    shift = rng.randint(length + 1, 4 * length) - min(raw)
    return {"sequence": [value + shift for value in raw]}


def generate_from(value: list[int], seed: int, difficulty: int) -> dict:
    """An instance whose sequence starts with value's first numbers (as many as the
    difficulty's length; each folded into -10**6..10**6) and is padded with seeded random
    numbers from the same range when value is shorter."""
    if not isinstance(value, list):
        raise TypeError(f"value must be a list of ints, not {type(value).__name__}")
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:from:{seed}:{difficulty}")
    length = _length(rng, difficulty)
    given = value[:length]
    if not all(isinstance(number, int) for number in given):
        raise TypeError("value must be a list of ints")
    sequence = [(int(number) + _BOUND) % (2 * _BOUND + 1) - _BOUND for number in given]
    low = min(sequence, default=0)
    high = max(max(sequence, default=0), low + 2 * length)
    sequence += [rng.randint(low, high) for _ in range(length - len(sequence))]
    return {"sequence": sequence}


def prompt(instance: dict) -> str:
    numbers = ", ".join(str(number) for number in instance["sequence"])
    return (
        "Find the length of the longest strictly increasing subsequence of this list of "
        f"integers:\n\n{numbers}\n\n"
        "A subsequence keeps some of the numbers in their original order, not necessarily "
        "next to each other. Strictly increasing means each chosen number is larger than the "
        "one chosen before it, so equal numbers cannot both be used.\n\n"
        "Give the length as a single integer."
    )


def solve(instance: dict) -> str:
    tails: list[int] = []
    for number in instance["sequence"]:
        position = bisect.bisect_left(tails, number)
        if position == len(tails):
            tails.append(number)
        else:
            tails[position] = number
    return str(len(tails))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"\+?[0-9]{1,9}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
