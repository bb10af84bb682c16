"""Find a clique of a given size in a random graph that has one planted in it: a set of k
vertices every two of which are joined by an edge. The vertices may be listed in any order,
and any k-clique counts, not only the planted one. Finding one means searching many vertex
subsets (or running a branch-and-bound search, in code), while checking an answer is a look
at k(k-1)/2 edges."""

import random
import re

NAME = "planted_clique_any_order"
TAGS = ["planted", "graph", "np-hard", "test-corpus"]
ANSWER_TYPE = "list[int]"


def _size(difficulty: int) -> tuple[int, int]:
    """(vertices, clique size) for a difficulty."""
    d = max(1, min(10, int(difficulty)))
    return 7 + 3 * d, 3 + d // 3


def generate(seed: int, difficulty: int) -> dict:
    n, k = _size(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    edges = {(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.35}
    clique = sorted(rng.sample(range(n), k))
    edges |= {(u, v) for i, u in enumerate(clique) for v in clique[i + 1:]}
    return {"n": n, "k": k, "edges": sorted([u, v] for u, v in edges), "planted": clique}


def prompt(instance: dict) -> str:
    edges = ", ".join(f"{u}-{v}" for u, v in instance["edges"])
    return (
        f"An undirected graph has vertices 0 to {instance['n'] - 1} and these edges:\n\n{edges}\n\n"
        f"Find {instance['k']} distinct vertices that are all pairwise connected by edges (a clique "
        f"of size {instance['k']}). One exists; any such set is accepted, in any order.\n\n"
        "Give the vertex numbers separated by single spaces."
    )


def solve(instance: dict) -> str:
    return " ".join(map(str, instance["planted"]))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 2000:
        return 0.0
    tokens = [t for t in re.split(r"[\s,]+", answer.strip()) if t]
    if not tokens or not all(re.fullmatch(r"[0-9]{1,4}", t) for t in tokens):
        return 0.0
    chosen = [int(t) for t in tokens]
    if len(chosen) != instance["k"] or len(set(chosen)) != len(chosen):
        return 0.0
    if any(v >= instance["n"] for v in chosen):
        return 0.0
    edges = {(u, v) for u, v in instance["edges"]}
    for i, u in enumerate(chosen):
        for v in chosen[i + 1:]:
            if (min(u, v), max(u, v)) not in edges:
                return 0.0
    return 1.0
