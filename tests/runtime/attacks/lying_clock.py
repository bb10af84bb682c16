"""Attack: make the worker's own timing lie. At import it sleeps 0.4 s and then freezes the
clocks the worker times itself with (time.perf_counter, time.process_time); solve then burns
1.2 s of wall clock measured on a clock saved before the freeze. A parent that believed the
worker would see a 0 s import and a 0 s solve."""

import time

NAME = "attack_lying_clock"

_real_clock = time.monotonic

time.sleep(0.4)
time.perf_counter = lambda: 0.0
time.process_time = lambda: 0.0


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    end = _real_clock() + 1.2
    while _real_clock() < end:
        pass
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    return 1.0 if answer == str(instance["n"]) else 0.0
