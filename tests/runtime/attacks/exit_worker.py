"""Attack: leave the worker from inside score (sys.exit, os._exit, abort, KeyboardInterrupt)."""

import os
import sys

NAME = "attack_exit_worker"


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    if answer == "sys_exit":
        sys.exit(0)
    if answer == "sys_exit_one":
        raise SystemExit(1.0)
    if answer == "os_exit":
        os._exit(0)
    if answer == "abort":
        os.abort()
    if answer == "keyboard":
        raise KeyboardInterrupt
    return 1.0 if answer == solve(instance) else 0.0
