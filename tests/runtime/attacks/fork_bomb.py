"""Attack: a (bounded) fork bomb: 50 tries of os.fork. Returns 1.0 if any fork succeeded,
raises with the refusal otherwise."""

import os

NAME = "attack_fork_bomb"


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    if answer == "attack":
        children, refusals = [], []
        for _ in range(50):
            try:
                pid = os.fork()
            except OSError as exc:
                refusals.append(f"{type(exc).__name__} errno {exc.errno}")
                continue
            if pid == 0:
                os._exit(0)
            children.append(pid)
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
        if children:
            return 1.0
        raise RuntimeError(f"fork refused {len(refusals)}/50: {refusals[0]}")
    return 1.0 if answer == solve(instance) else 0.0
