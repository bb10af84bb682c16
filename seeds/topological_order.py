"""Given a directed acyclic graph on nodes 0..n-1, list the nodes in the topological order
that always takes the smallest available node next (the lexicographically smallest
order). Kahn's algorithm with a min-heap does it in a few lines, but by hand one must keep
the in-degree of every node and the set of ready nodes exact through every step, and a
single overlooked edge sends the rest of the order astray."""

import heapq
import random
import re

NAME = "topological_order"
TAGS = ["algorithmic", "graph", "ordering"]
ANSWER_TYPE = "list[int]"
# The number of nodes by difficulty 1 to 10, growing about geometrically; the edges per node
# grow from 1 to 1.5 (see generate), so difficulty 1 is four nodes and four edges.
_NODES = (4, 5, 6, 7, 9, 11, 13, 16, 20, 24)


def generate(seed: int, difficulty: int) -> dict:
    difficulty = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    n = _NODES[difficulty - 1]
    hidden = list(range(n))
    rng.shuffle(hidden)
    # Edges only go forward in a hidden order, so the graph is acyclic.
    pairs = [(hidden[i], hidden[j]) for i in range(n) for j in range(i + 1, n)]
    per_node = 1.0 + 0.5 * (difficulty - 1) / 9
    edges = rng.sample(pairs, min(len(pairs), round(per_node * n)))
    edges.sort()
    return {"n": n, "edges": [list(edge) for edge in edges]}


def prompt(instance: dict) -> str:
    n = instance["n"]
    edges = "\n".join(f"{u} -> {v}" for u, v in instance["edges"])
    return (
        f"A directed graph has the nodes 0 to {n - 1} and these edges (u -> v means u must "
        "come before v):\n\n"
        f"{edges}\n\n"
        "The graph has no cycles. List all the nodes in an order where every edge points "
        "forward. Among all such orders, give the one that begins with the smallest possible "
        "node, then continues with the smallest possible node, and so on (nodes compared as "
        "numbers). Give the order as the node numbers separated by single spaces."
    )


def _order(n: int, edges: list) -> list[int]:
    successors: list[list[int]] = [[] for _ in range(n)]
    indegree = [0] * n
    for u, v in edges:
        successors[u].append(v)
        indegree[v] += 1
    ready = [node for node in range(n) if indegree[node] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for nxt in successors[node]:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                heapq.heappush(ready, nxt)
    return order


def solve(instance: dict) -> str:
    return " ".join(str(node) for node in _order(instance["n"], instance["edges"]))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 20 * instance["n"] + 100:
        return 0.0
    text = answer.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    tokens = re.split(r"[\s,]+", text)
    if not all(re.fullmatch(r"[0-9]{1,9}", token) for token in tokens):
        return 0.0
    order = _order(instance["n"], instance["edges"])
    return 1.0 if [int(token) for token in tokens] == order else 0.0
