"""A well-behaved environment: add two numbers. The control case for the attack tests."""

import random

NAME = "good_add"
TAGS = ["test"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    rng = random.Random(seed)
    return {"a": rng.randint(0, 10**difficulty), "b": rng.randint(0, 10**difficulty)}


def prompt(instance: dict) -> str:
    return f"What is {instance['a']} + {instance['b']}? Answer with the integer."


def solve(instance: dict) -> str:
    return str(instance["a"] + instance["b"])


def score(instance: dict, answer: str) -> float:
    return 1.0 if answer.strip() == solve(instance) else 0.0
