"""Balancing a Nim position: piles of stones, a move takes any number from one pile, and whoever
takes the last stone wins. What size must one more pile have for the player to move to lose?
The XOR rule (Bouton's theorem) makes it one line of code; without it one must analyze the
game tree."""

import functools
import operator
import random
import re

NAME = "nim_balancing_pile"
TAGS = ["algorithmic", "games", "bits"]
ANSWER_TYPE = "int"


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    count = 2 + (difficulty + 1) // 2
    return {"piles": [rng.randint(1, 6 + 5 * difficulty) for _ in range(count)]}


def prompt(instance: dict) -> str:
    piles = ", ".join(str(pile) for pile in instance["piles"])
    return (
        f"Two players play Nim with piles of {piles} stones. A move removes one or more stones "
        "from a single pile; the player who takes the last stone wins. One more pile is added so "
        "that the player who moves first loses against perfect play. How many stones must the "
        "new pile have (0 if the first player already loses)? Give the number as a single "
        "integer."
    )


def solve(instance: dict) -> str:
    return str(functools.reduce(operator.xor, instance["piles"], 0))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
