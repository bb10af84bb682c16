"""Attack: unbounded recursion after lifting the recursion limit, in Python frames and through
the C stack (a __repr__ that calls repr on itself)."""

import sys

NAME = "attack_deep_recursion"


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def _down(n):
    return _down(n + 1) + 1


class _Mirror:
    def __repr__(self):
        return repr(self)


def score(instance: dict, answer: str) -> float:
    if answer == "python":
        sys.setrecursionlimit(10**7)
        return float(_down(0))
    if answer == "c_stack":
        sys.setrecursionlimit(10**7)
        return float(len(repr(_Mirror())))
    return 1.0 if answer == solve(instance) else 0.0
