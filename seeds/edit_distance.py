"""Find the Levenshtein distance between two strings: the fewest single-character
insertions, deletions and substitutions that turn the first into the second. The
textbook dynamic program is a few lines of code, but by eye it is easy to settle for a
plausible alignment that is not the cheapest, especially over a small alphabet where
many alignments look alike."""

import random
import re

NAME = "edit_distance"
TAGS = ["algorithmic", "dp", "strings"]
ANSWER_TYPE = "int"
INPUT_TYPE = "str"

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_ALPHABET = "abcd"  # few letters, so many alignments look alike
# The first string's greatest length by difficulty 1 to 10, growing about geometrically; a
# generated one is at most two letters shorter.
_MAX_LENGTHS = (4, 5, 6, 8, 10, 13, 17, 21, 27, 34)


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def _max_length(difficulty: int) -> int:
    return _MAX_LENGTHS[difficulty - 1]


def _mutate(rng: random.Random, text: str, edits: int) -> str:
    """Applies up to `edits` single-character edits at distinct positions of text, so they
    rarely cancel out; an insertion goes before the character at its position."""
    positions = set(rng.sample(range(len(text) + 1), min(edits, len(text) + 1)))
    out = []
    for i in range(len(text) + 1):
        ch = text[i] if i < len(text) else ""
        if i not in positions:
            out.append(ch)
            continue
        kind = rng.choice(("insert", "delete", "substitute")) if ch else "insert"
        if kind == "insert":
            out.append(rng.choice(_ALPHABET) + ch)
        elif kind == "substitute":
            out.append(rng.choice([other for other in _ALPHABET if other != ch]))
    return "".join(out)


def _instance(rng: random.Random, first: str) -> dict:
    edits = rng.randint(1, 1 + len(first))
    return {"first": first, "second": _mutate(rng, first, edits)}


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    length = rng.randint(_max_length(difficulty) - 2, _max_length(difficulty))
    return _instance(rng, "".join(rng.choice(_ALPHABET) for _ in range(length)))


def generate_from(value: str, seed: int, difficulty: int) -> dict:
    """An instance whose first string is value cut to the difficulty's maximum length, with
    A to Z lowercased and any other character outside a to z replaced by a letter chosen by
    its code point."""
    if not isinstance(value, str):
        raise TypeError(f"value must be a str, not {type(value).__name__}")
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:from:{seed}:{difficulty}")
    return _instance(rng, "".join(_letter(ch) for ch in value[: _max_length(difficulty)]))


def _letter(ch: str) -> str:
    if "A" <= ch <= "Z":
        return ch.lower()
    return ch if ch in _LETTERS else _LETTERS[ord(ch) % 26]


def prompt(instance: dict) -> str:
    return (
        "Consider the two strings of lowercase letters between the double quotes:\n\n"
        f'first:  "{instance["first"]}"\n'
        f'second: "{instance["second"]}"\n\n'
        "What is the Levenshtein (edit) distance between them: the smallest number of "
        "single-character insertions, deletions and substitutions that turns the first "
        "string into the second? Give the distance as a single integer."
    )


def solve(instance: dict) -> str:
    first, second = instance["first"], instance["second"]
    row = list(range(len(second) + 1))
    for i, a in enumerate(first, start=1):
        previous, row[0] = row[0], i
        for j, b in enumerate(second, start=1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (a != b))
    return str(row[-1])


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
