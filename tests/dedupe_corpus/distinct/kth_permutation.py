"""The k-th permutation of 1..n in lexicographic order. The factorial number system gives it
directly in code; by hand one must count blocks of (n-1)! permutations correctly."""

import math
import random

NAME = "kth_permutation"
TAGS = ["combinatorics", "ordering"]
ANSWER_TYPE = "list[int]"


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"perm:{seed}:{level}")
    n = 3 + (level + 1) // 2 + level // 3
    return {"n": n, "k": rng.randint(1, math.factorial(n))}


def prompt(instance):
    n, k = instance["n"], instance["k"]
    return (
        f"List all orderings of the numbers 1 to {n} in dictionary order (1 2 3 ... first, then "
        f"1 2 ... with the last two swapped, and so on). Which ordering is number {k}, counting "
        "from 1? Write its numbers separated by spaces."
    )


def solve(instance):
    n, k = instance["n"], instance["k"] - 1
    items = list(range(1, n + 1))
    out = []
    for size in range(n, 0, -1):
        block = math.factorial(size - 1)
        index, k = divmod(k, block)
        out.append(items.pop(index))
    return " ".join(map(str, out))


def score(instance, answer):
    if not isinstance(answer, str) or len(answer) > 300:
        return 0.0
    tokens = answer.replace(",", " ").split()
    if not all(t.isdigit() for t in tokens):
        return 0.0
    return 1.0 if [int(t) for t in tokens] == [int(t) for t in solve(instance).split()] else 0.0
