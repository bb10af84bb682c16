"""Find a vertex cover of at most k nodes in a graph built around a planted one: checking a
cover is one pass over the edges, while finding a small one is NP-hard in general, so any
valid cover of size at most k is accepted, in any order."""

import random
import re

NAME = "planted_vertex_cover_any_valid"
TAGS = ["planted", "graph", "np-hard", "test-corpus"]
ANSWER_TYPE = "list[int]"


def generate(seed: int, difficulty: int) -> dict:
    d = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{d}")
    n = 6 + 2 * d
    cover = sorted(rng.sample(range(n), 2 + d // 2))
    others = [v for v in range(n) if v not in cover]
    edges = set()
    for v in others:
        for u in rng.sample(cover, min(len(cover), 2)):
            edges.add((min(u, v), max(u, v)))
    for _ in range(d):
        a, b = rng.sample(cover, 2)
        edges.add((min(a, b), max(a, b)))
    return {"n": n, "k": len(cover), "edges": sorted(edges), "cover": cover}


def prompt(instance: dict) -> str:
    edges = ", ".join(f"{a}-{b}" for a, b in instance["edges"])
    return (
        f"A graph has nodes 0 to {instance['n'] - 1} and the edges {edges}. Find a vertex cover "
        f"with at most {instance['k']} nodes: a set of nodes that touches every edge. Give the "
        "nodes separated by spaces, in any order."
    )


def solve(instance: dict) -> str:
    return " ".join(map(str, instance["cover"]))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 500:
        return 0.0
    tokens = [t for t in re.split(r"[,\s]+", answer.strip()) if t]
    if not tokens or not all(re.fullmatch(r"[0-9]{1,4}", t) for t in tokens):
        return 0.0
    nodes = [int(t) for t in tokens]
    if len(set(nodes)) != len(nodes) or len(nodes) > instance["k"] or max(nodes) >= instance["n"]:
        return 0.0
    chosen = set(nodes)
    return 1.0 if all(a in chosen or b in chosen for a, b in instance["edges"]) else 0.0
