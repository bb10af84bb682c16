"""Defect: score() compares the letters of the answer as a multiset, so any anagram of the word passes (probe: fuzz_permutation)."""

import random

NAME = "bad_discrimination_accepts_anagram_of_word"
TAGS = ["strings", "test-corpus"]
ANSWER_TYPE = "str"


def _weight(word: str) -> int:
    return sum((i + 1) * (ord(c) - 96) for i, c in enumerate(word))


def _best(words: list[str]) -> str:
    return "".join(sorted(max(words, key=lambda w: (_weight(w), w))))


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    words = ["".join(rng.sample("abcdefghijklmnopqrstuvwxyz", 9)) for _ in range(3 + level)]
    return {"words": words}


def prompt(instance: dict) -> str:
    listing = "\n".join(instance["words"])
    return (
        f"Words:\n{listing}\n\nThe weight of a word is the sum over its letters of (position, from 1) "
        "times (the letter's place in the alphabet, a = 1). Take the word of largest weight (ties: "
        "the alphabetically last) and give its letters in alphabetical order, as one word."
    )


def solve(instance: dict) -> str:
    return _best(instance["words"])


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 100:
        return 0.0
    return 1.0 if sorted(answer.strip()) == sorted(_best(instance["words"])) else 0.0

