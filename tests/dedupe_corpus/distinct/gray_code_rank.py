"""Rank of a reflected binary Gray code word: the position of a given bit string in the Gray
code sequence of its length. Decoding is a prefix XOR in code; by hand one must know the
reflection rule and apply it bit by bit."""

import random
import re

NAME = "gray_code_rank"
TAGS = ["algorithmic", "bits", "codes"]
ANSWER_TYPE = "int"


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    bits = 3 + 2 * difficulty
    rank = rng.randrange(2 ** (bits - 1), 2**bits)
    return {"word": format(rank ^ (rank >> 1), f"0{bits}b")}


def prompt(instance: dict) -> str:
    word = instance["word"]
    return (
        f"In the reflected binary Gray code on {len(word)} bits, position 0 holds the word of all "
        "zeros and position i holds i XOR (i shifted right by one bit), written in binary, so "
        f"consecutive words differ in one bit. At which position is the word {word}? Give the "
        "position as a single integer in decimal."
    )


def solve(instance: dict) -> str:
    value = 0
    for bit in instance["word"]:
        value = (value << 1) | (int(bit) ^ (value & 1))
    return str(value)


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
