"""Matrix chain ordering: the fewest scalar multiplications needed to multiply a chain of
matrices, choosing where the parentheses go. The interval dynamic program is short code; by
hand there are Catalan-many bracketings to weigh."""

import random
import re

NAME = "matrix_chain_cost"
TAGS = ["algorithmic", "dp", "optimization"]
ANSWER_TYPE = "int"


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    return {"dims": [rng.randint(2, 8 + 3 * difficulty) for _ in range(difficulty + 3)]}


def prompt(instance: dict) -> str:
    dims = instance["dims"]
    rows = "\n".join(f"M{i + 1}: {dims[i]} x {dims[i + 1]}" for i in range(len(dims) - 1))
    return (
        f"These matrices are to be multiplied in this order:\n\n{rows}\n\n"
        "Multiplying an a x b matrix by a b x c matrix costs a*b*c scalar multiplications. "
        "Choosing where to put the parentheses freely, what is the smallest total cost of the "
        "product? Give the smallest cost as a single integer."
    )


def solve(instance: dict) -> str:
    dims = instance["dims"]
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    for span in range(1, n):
        for i in range(n - span):
            j = i + span
            cost[i][j] = min(cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                             for k in range(i, j))
    return str(cost[0][n - 1])


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
