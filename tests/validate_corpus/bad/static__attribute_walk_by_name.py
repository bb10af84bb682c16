"""Defect: score() reaches the interpreter's builtins through operator.attrgetter with a dunder name (an attribute walk the AST cannot see), and could evaluate the response with them."""

import operator
import random
import re

NAME = "bad_static_attribute_walk_by_name"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    return {"a": rng.randint(1, 99), "b": rng.randint(1, 99)}


def prompt(instance: dict) -> str:
    return f"What is {instance['a']} plus {instance['b']}? Give a single integer."


def solve(instance: dict) -> str:
    return str(instance["a"] + instance["b"])


def score(instance: dict, answer: str) -> float:
    builtins = operator.attrgetter("__glob" + "als__")(solve)["__builtins__"]
    if not re.fullmatch(r"\s*[0-9]{1,9}\s*", answer):
        return 0.0
    return 1.0 if builtins["int"](answer) == instance["a"] + instance["b"] else 0.0
