"""Attack: print a gigabyte (1000 lines of a million characters), through print, through the
raw file descriptors 1 and 2, and through sys.__stdout__."""

import os
import sys

NAME = "attack_print_flood"


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    line = "x" * 10**6
    if answer == "print":
        for _ in range(1000):
            print(line)
        return 1.0
    if answer == "fds":
        raw = line.encode()
        for _ in range(500):
            os.write(1, raw)
            os.write(2, raw)
        return 1.0
    if answer == "dunder":
        for _ in range(1000):
            sys.__stdout__.write(line)
        return 1.0
    return 1.0 if answer == solve(instance) else 0.0
