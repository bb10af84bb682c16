"""Attack: an infinite loop in score. The parent's deadline must kill the worker."""

NAME = "attack_loop_forever"


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    if answer == "attack":
        while True:
            pass
    return 1.0 if answer == solve(instance) else 0.0
