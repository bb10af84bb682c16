"""Defect: a two-step composite whose second part states its answer as one more than a number in its own words, so the composite inherits the leak (probe: leak_solver_neighbour)."""

import random
import re

NAME = "bad_leak_sequential_composite_inherits_a_leak"
TAGS = ["composite", "arithmetic", "test-corpus"]
ANSWER_TYPE = "int"


def _part1():
    def generate(seed: int, difficulty: int) -> dict:
        rng = random.Random(f"part1:{seed}:{difficulty}")
        return {"numbers": [rng.randint(1, 30) for _ in range(3 + difficulty)]}

    def prompt(instance: dict) -> str:
        return "X is the sum of these numbers: " + ", ".join(map(str, instance["numbers"])) + "."

    def solve(instance: dict) -> str:
        return str(sum(instance["numbers"]))

    return {"generate": generate, "prompt": prompt, "solve": solve}


def _part2():
    def generate_from(value: int, seed: int, difficulty: int) -> dict:
        rng = random.Random(f"part2:{seed}:{difficulty}")
        return {"x": value, "k": rng.randint(101, 997), "c": rng.randint(1, 999)}

    def answer(instance: dict) -> int:
        return (instance["x"] * instance["k"] + instance["c"]) % 9000 + 1000

    def prompt(instance: dict) -> str:
        return (
            f"Then compute (X * {instance['k']} + {instance['c']}) mod 9000, plus 1000. "
            f"(Check: the result is one more than {answer(instance) - 1:,}.)"
        )

    return {"generate_from": generate_from, "prompt": prompt, "answer": answer}


_P1, _P2 = _part1(), _part2()


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    first = _P1["generate"](seed, (level + 1) // 2)
    second = _P2["generate_from"](int(_P1["solve"](first)), seed, (level + 1) // 2)
    return {"first": first, "second": second}


def prompt(instance: dict) -> str:
    second = dict(instance["second"])
    return (
        "Step 1. " + _P1["prompt"](instance["first"]) + "\nStep 2. " + _P2["prompt"](second)
        + "\nGive the result of step 2 as an integer."
    )


def solve(instance: dict) -> str:
    return str(_P2["answer"](instance["second"]))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 100 or not re.fullmatch(r"\s*[0-9]{1,12}\s*", answer):
        return 0.0
    return 1.0 if int(answer) == _P2["answer"](instance["second"]) else 0.0
