"""Attack: an infinite loop at import time. Loading must give up after the import limit."""

NAME = "attack_import_loop"

while True:
    pass


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    return 1.0 if answer == solve(instance) else 0.0
