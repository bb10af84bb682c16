"""Total weight of a minimum spanning tree: connect every vertex as cheaply as possible.
Kruskal's algorithm with a union-find is short code; by hand one must keep a consistent
forest while scanning edges in weight order."""

import random
import re

NAME = "mst_weight"
TAGS = ["graph", "greedy", "union-find"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    d = max(1, min(10, int(difficulty)))
    rng = random.Random((seed << 4) ^ (d * 2654435761))
    n = 4 + 2 * d
    edges = []
    for v in range(1, n):
        edges.append([rng.randrange(v), v, rng.randint(1, 50)])
    extra = rng.randint(n // 2, n + d)
    for _ in range(extra):
        u, v = rng.sample(range(n), 2)
        edges.append([min(u, v), max(u, v), rng.randint(1, 50)])
    rng.shuffle(edges)
    return {"n": n, "edges": edges}


def prompt(instance: dict) -> str:
    text = "; ".join(f"{u}-{v} costs {w}" for u, v, w in instance["edges"])
    return (
        f"A network has nodes 0 to {instance['n'] - 1}. Possible links: {text}.\n"
        "Pick links so that every node can reach every other node, paying as little as "
        "possible in total. What is the minimum total cost? Reply with the integer."
    )


def solve(instance: dict) -> str:
    parent = list(range(instance["n"]))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    total = 0
    for u, v, w in sorted(instance["edges"], key=lambda e: e[2]):
        ru, rv = find(u), find(v)
        if ru != rv:
            parent[ru] = rv
            total += w
    return str(total)


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    found = re.fullmatch(r"\s*([0-9]+)\s*", answer[:64])
    return 1.0 if found is not None and found.group(1).lstrip("0") == solve(instance).lstrip("0") else 0.0
