"""Panels of lamps show their serial number in binary (a lit lamp for each 1): how many lamps are lit over a run of panels? (re-skin of popcount_range_total)."""

import random

NAME = "lamp_panel_total"
TAGS = ["bits", "counting"]
ANSWER_TYPE = "int"


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"lamps:{level}:{seed}")
    first = rng.randint(0, 64 * level * level)
    return {"first_panel": first, "last_panel": first + 8 * level + rng.randint(0, 10)}


def prompt(instance):
    a, b = instance["first_panel"], instance["last_panel"]
    return (
        f"A hall has display panels numbered {a} through {b}. Each panel shows its own number in "
        "binary with a row of lamps: a lamp is lit for every binary digit 1 and dark for every 0. "
        "How many lamps are lit in the whole hall? Give the total as an integer."
    )


def solve(instance):
    lit = 0
    for panel in range(instance["first_panel"], instance["last_panel"] + 1):
        while panel:
            lit += panel & 1
            panel >>= 1
    return str(lit)


def score(instance, answer):
    if not isinstance(answer, str):
        return 0.0
    s = answer.strip()
    return 1.0 if s.isdigit() and len(s) < 9 and int(s) == int(solve(instance)) else 0.0
