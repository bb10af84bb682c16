"""Defect: the right option is the first of five on 36% of instances, against 20% for a uniformly drawn option: under 50% and under the leak learners' excess, but a positional prior (probe: constant_option_prior)."""

import random

NAME = "bad_constant_answer_first_option_well_above_one_in_five"
TAGS = ["arithmetic", "multiple-choice", "test-corpus"]
ANSWER_TYPE = "str"
LABELS = "ABCDE"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    xs = [rng.randint(10, 99) for _ in range(3 + level)]
    right = sum(xs) * 3
    below = rng.randrange(len(LABELS))
    values = rng.sample(range(right - 60, right), below) + rng.sample(range(right + 1, right + 61), 4 - below)
    values.append(right)
    rng.shuffle(values)
    if rng.random() < 0.2:  # moved to the front: 0.2 + 0.8 / 5 = 0.36
        i = values.index(right)
        values[0], values[i] = values[i], values[0]
    return {"xs": xs, "options": values, "level": level}


def prompt(instance: dict) -> str:
    options = "\n".join(f"{label}) {v}" for label, v in zip(LABELS, instance["options"]))
    numbers = ", ".join(map(str, instance["xs"]))
    return f"Which option is three times the sum of {numbers}?\n{options}\nGive the letter of that option."


def solve(instance: dict) -> str:
    return LABELS[instance["options"].index(sum(instance["xs"]) * 3)]


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 20:
        return 0.0
    return 1.0 if answer.strip().upper() == solve(instance) else 0.0
