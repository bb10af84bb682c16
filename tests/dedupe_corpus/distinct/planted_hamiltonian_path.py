"""Find a Hamiltonian path: a route through an undirected graph that visits every vertex
exactly once. A path is planted, so one exists, and extra random edges hide it; any valid
path counts, in either direction. Searching for one is exponential in general, while
checking one is a walk along its edges."""

import random

NAME = "planted_hamiltonian_path"
TAGS = ["planted", "graph", "np-hard"]
ANSWER_TYPE = "list[int]"


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"hampath-{seed}-{level}")
    n = 5 + 2 * level
    order = list(range(n))
    rng.shuffle(order)
    edges = {tuple(sorted(pair)) for pair in zip(order, order[1:])}
    for _ in range(n + level * 2):
        u, v = rng.sample(range(n), 2)
        edges.add((min(u, v), max(u, v)))
    return {"n": n, "edges": sorted(list(e) for e in edges), "path": order}


def prompt(instance):
    adjacency = {v: [] for v in range(instance["n"])}
    for u, v in instance["edges"]:
        adjacency[u].append(v)
        adjacency[v].append(u)
    lines = "\n".join(f"{v}: {' '.join(map(str, sorted(ns)))}" for v, ns in adjacency.items())
    return (
        f"An undirected graph on the vertices 0 to {instance['n'] - 1}; each line lists a vertex "
        f"and its neighbours:\n{lines}\n\nFind a path that visits every vertex exactly once, "
        "moving only along edges. Any such path is accepted, starting from either end. List "
        "the vertices in path order, separated by spaces."
    )


def solve(instance):
    return " ".join(str(v) for v in instance["path"])


def score(instance, answer):
    if not isinstance(answer, str) or len(answer) > 4000:
        return 0.0
    parts = answer.split()
    if not parts or not all(p.isdigit() and len(p) < 5 for p in parts):
        return 0.0
    walk = [int(p) for p in parts]
    if sorted(walk) != list(range(instance["n"])):
        return 0.0
    edges = {(u, v) for u, v in instance["edges"]}
    for a, b in zip(walk, walk[1:]):
        if (min(a, b), max(a, b)) not in edges:
            return 0.0
    return 1.0
