"""Josephus elimination: n people stand in a circle and every k-th one counting round the circle
leaves, until one remains. Which position survives? The recurrence J(n) = (J(n-1) + k) mod n
is two lines of code, but simulating dozens of eliminations in one's head loses track fast."""

import random
import re

NAME = "josephus_survivor"
TAGS = ["algorithmic", "simulation", "recurrence"]
ANSWER_TYPE = "int"


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    people = rng.randint(5 + 4 * difficulty, 10 + 9 * difficulty)
    return {"people": people, "step": rng.randint(2, 3 + difficulty)}


def prompt(instance: dict) -> str:
    n, k = instance["people"], instance["step"]
    return (
        f"{n} people stand in a circle, numbered 1 to {n} clockwise. Starting at person 1, "
        f"count {k} people clockwise (person 1 counts as 1); the {k}-th person counted leaves "
        "the circle, and counting restarts at the next person still standing. This repeats "
        "until one person is left. What is the number of the last person left? Give the "
        "number as a single integer."
    )


def solve(instance: dict) -> str:
    survivor = 0
    for size in range(2, instance["people"] + 1):
        survivor = (survivor + instance["step"]) % size
    return str(survivor + 1)


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
