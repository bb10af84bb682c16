"""Defect: a planted k-clique whose score() checks that the vertices are pairwise joined but not that there are k of them (only that there is at least one edge), so a smaller clique passes (probe: near_miss_missing)."""

import random
import re

NAME = "bad_discrimination_clique_size_unchecked"
TAGS = ["planted", "graph", "test-corpus"]
ANSWER_TYPE = "list[int]"


def generate(seed: int, difficulty: int) -> dict:
    d = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{d}")
    n, k = 8 + 3 * d, 3 + d // 2
    edges = {(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.3}
    clique = sorted(rng.sample(range(n), k))
    edges |= {(u, v) for i, u in enumerate(clique) for v in clique[i + 1:]}
    return {"n": n, "k": k, "edges": sorted([u, v] for u, v in edges), "planted": clique}


def prompt(instance: dict) -> str:
    edges = ", ".join(f"{u}-{v}" for u, v in instance["edges"])
    return (
        f"Graph on vertices 0..{instance['n'] - 1} with edges {edges}.\n\nName {instance['k']} "
        "vertices that are all pairwise adjacent, in any order, separated by spaces."
    )


def solve(instance: dict) -> str:
    return " ".join(map(str, instance["planted"]))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 5000:
        return 0.0
    tokens = answer.split()
    if not tokens or not all(re.fullmatch(r"[0-9]{1,4}", t) for t in tokens):
        return 0.0
    chosen = [int(t) for t in tokens]
    if len(chosen) < 2 or len(set(chosen)) != len(chosen) or any(v >= instance["n"] for v in chosen):
        return 0.0
    edges = {tuple(e) for e in instance["edges"]}
    ok = all((min(u, v), max(u, v)) in edges for i, u in enumerate(chosen) for v in chosen[i + 1:])
    return 1.0 if ok else 0.0
