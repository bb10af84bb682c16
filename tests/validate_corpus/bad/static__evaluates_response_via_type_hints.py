"""Defect: score() evaluates the response through typing.get_type_hints (an eval in disguise), so the response can compute its own reward."""

import random
import typing

NAME = "bad_static_evaluates_response"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    return {"a": rng.randint(1, 99), "b": rng.randint(1, 99)}


def prompt(instance: dict) -> str:
    return f"What is {instance['a']} times {instance['b']}? Give a single integer."


def solve(instance: dict) -> str:
    return str(instance["a"] * instance["b"])


def score(instance: dict, answer: str) -> float:
    def holder():
        return None

    holder.__annotations__ = {"return": answer}
    try:
        value = typing.get_type_hints(holder)["return"]
    except Exception:
        return 0.0
    return 1.0 if value == instance["a"] * instance["b"] else 0.0
