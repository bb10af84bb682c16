"""Subset sum with a planted solution: given a list of positive integers and a target, choose
some of the numbers, each at most once, that add up exactly to the target. The target is the
sum of a hidden subset, so a choice always exists, and any choice with the right sum counts.
The values are about as large as two to the number of items, so few subsets share a sum and
finding one means searching an exponential space (or meeting in the middle, in code), while
checking an answer is a single addition."""

import random
import re

NAME = "subset_sum_planted"
TAGS = ["planted", "arithmetic", "search", "np-hard"]
ANSWER_TYPE = "list[int]"
INPUT_TYPE = "int"

_MAX_ANSWER_CHARS = 10_000


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


# How many numbers by difficulty 1 to 10, growing about geometrically.
_COUNTS = (4, 5, 6, 8, 10, 12, 15, 19, 24, 30)


def _shape(difficulty: int) -> tuple[int, int, int, int]:
    """(count, largest value, smallest target, largest target) for a difficulty."""
    count = _COUNTS[difficulty - 1]
    high = 2**count
    # A target in this range needs about 40-60% of the numbers, and always at least two: it
    # exceeds the largest value (which on its own decides only for fewer than 6 numbers).
    low = max(count * high // 5, high + 1)
    return count, high, low, max(3 * count * high // 10, low)


def _plant(rng: random.Random, target: int, high: int, most: int) -> list[int]:
    """Random values in 1..high, at most `most` of them, that add up to target."""
    parts: list[int] = []
    rest = target
    while rest > high:
        later = most - len(parts) - 1
        # Never take so little that the parts still to come could not cover the rest.
        parts.append(rng.randint(max(1, rest - later * high), high))
        rest -= parts[-1]
    parts.append(rest)
    return parts


def _build(rng: random.Random, difficulty: int, target: int) -> dict:
    count, high, _, _ = _shape(difficulty)
    parts = _plant(rng, target, high, count - 1)
    numbers = [rng.randint(1, high) for _ in range(count)]
    positions = sorted(rng.sample(range(count), len(parts)))
    rng.shuffle(parts)
    for position, part in zip(positions, parts, strict=True):
        numbers[position] = part
    return {"numbers": numbers, "target": target, "planted": positions}


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    _, _, low, high = _shape(difficulty)
    return _build(rng, difficulty, rng.randint(low, high))


def generate_from(value: int, seed: int, difficulty: int) -> dict:
    """An instance whose target is |value| when that lies in the difficulty's target range,
    and otherwise |value| folded into that range (smallest target + |value| mod its width)."""
    if not isinstance(value, int):
        raise TypeError(f"value must be an int, not {type(value).__name__}")
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:from:{seed}:{difficulty}")
    _, _, low, high = _shape(difficulty)
    target = abs(int(value))
    if not low <= target <= high:
        target = low + target % (high - low + 1)
    return _build(rng, difficulty, target)


def prompt(instance: dict) -> str:
    numbers = instance["numbers"]
    listing = "\n".join(f"{index}: {number}" for index, number in enumerate(numbers))
    return (
        f"Here are {len(numbers)} positive integers, each shown after its 0-based index:\n\n"
        f"{listing}\n\n"
        f"Choose some of these numbers, each index at most once, whose sum is exactly "
        f"{instance['target']}. At least one such choice exists, and any choice with that "
        "sum is accepted.\n\n"
        "Give the 0-based indices of the numbers you chose, separated by single spaces, in "
        "increasing order."
    )


def solve(instance: dict) -> str:
    return " ".join(str(index) for index in instance["planted"])


def _indices(answer: str) -> list[int] | None:
    """The integers of an answer made of indices separated by spaces and/or commas."""
    if not isinstance(answer, str) or len(answer) > _MAX_ANSWER_CHARS:
        return None
    text = answer.strip()
    if not re.fullmatch(r"[0-9]{1,9}(?:[\s,]+[0-9]{1,9})*", text):
        return None
    return [int(token) for token in re.findall(r"[0-9]+", text)]


def score(instance: dict, answer: str) -> float:
    indices = _indices(answer)
    numbers = instance["numbers"]
    # The stated form is increasing order; that also rules out repeated indices.
    if not indices or indices != sorted(set(indices)) or indices[-1] >= len(numbers):
        return 0.0
    return 1.0 if sum(numbers[index] for index in indices) == instance["target"] else 0.0
