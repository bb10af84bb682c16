"""Defect: score() tests the tolerance as `not (abs(x - ref) > tol)`, which NaN passes (probe: fuzz_nonfinite)."""

import random

NAME = "bad_discrimination_tolerance_passes_nan"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "float"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"masses": [rng.randint(1, 40) for _ in range(2 + level)], "speed": rng.randint(2, 9), "level": level}


def _energy(instance: dict) -> float:
    return 0.5 * sum(instance["masses"]) * instance["speed"] ** 2 / 7


def prompt(instance: dict) -> str:
    masses = ", ".join(map(str, instance["masses"]))
    return (
        f"Bodies of masses {masses} kg move together at {instance['speed']} m/s. Give their total kinetic "
        "energy divided by 7, in joules, to two decimal places."
    )


def solve(instance: dict) -> str:
    return f"{_energy(instance):.2f}"


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 64:
        return 0.0
    try:
        x = float(answer.strip())
    except ValueError:
        return 0.0
    return 1.0 if not (abs(x - _energy(instance)) > 0.01) else 0.0
