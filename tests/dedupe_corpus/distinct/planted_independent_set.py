"""Independent set with a planted solution: choose at least k vertices of a graph with no edge
between any two of them. The graph is built around a hidden independent set, so one exists,
and any valid choice counts, in any order. Large independent sets are hard to find (the
problem is NP-hard), easy to check."""

import itertools
import random

NAME = "planted_independent_set"
TAGS = ["planted", "graph", "np-hard"]
ANSWER_TYPE = "list[int]"


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(17 * seed + 31 * level + 5)
    n = 8 + 3 * level
    k = 3 + level // 2
    hidden = set(rng.sample(range(n), k))
    edges = []
    for u, v in itertools.combinations(range(n), 2):
        if u in hidden and v in hidden:
            continue
        if rng.random() < 0.45:
            edges.append([u, v])
    return {"n": n, "k": k, "edges": edges, "hidden": sorted(hidden)}


def prompt(instance):
    pairs = " ".join(f"({u},{v})" for u, v in instance["edges"])
    return (
        f"Consider the graph with vertices 0..{instance['n'] - 1} and edges {pairs}.\n"
        f"Give at least {instance['k']} distinct vertices such that no two of them are joined by "
        "an edge. Such a set exists, and any valid set is accepted, in any order. Write the "
        "vertices separated by spaces."
    )


def solve(instance):
    return " ".join(map(str, instance["hidden"]))


def score(instance, answer):
    try:
        chosen = [int(tok) for tok in answer.replace(",", " ").split()]
    except (ValueError, AttributeError):
        return 0.0
    if len(chosen) < instance["k"] or len(chosen) > instance["n"] or len(set(chosen)) != len(chosen):
        return 0.0
    if any(not 0 <= v < instance["n"] for v in chosen):
        return 0.0
    picked = set(chosen)
    if any(u in picked and v in picked for u, v in instance["edges"]):
        return 0.0
    return 1.0
