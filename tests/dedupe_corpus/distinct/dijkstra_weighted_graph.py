"""Cheapest route in a road network: a weighted undirected graph, the least total weight from
one town to another. Dijkstra's algorithm is a dozen lines; by hand, a long cheap detour is
easy to miss."""

import heapq
import random
import re

NAME = "dijkstra_weighted_graph"
TAGS = ["graph", "shortest-path"]
ANSWER_TYPE = "int"

TOWNS = ["Abel", "Brix", "Cora", "Dunmore", "Elk", "Fenwick", "Gale", "Hollis", "Ives", "Jarrow",
         "Kell", "Lorne", "Marsh", "Nye", "Orrin", "Pell", "Quarry", "Rook", "Sable", "Tarn",
         "Umber", "Vale", "Wick", "Yarrow"]


def generate(seed: int, difficulty: int) -> dict:
    lv = max(1, min(10, int(difficulty)))
    rng = random.Random(f"roads-{seed}-{lv}")
    n = min(len(TOWNS), 5 + 2 * lv)
    towns = rng.sample(TOWNS, n)
    roads = {}
    for i in range(1, n):  # a spanning tree keeps every town reachable
        j = rng.randrange(i)
        roads[(j, i)] = rng.randint(3, 40)
    for _ in range(n + lv):
        a, b = sorted(rng.sample(range(n), 2))
        roads.setdefault((a, b), rng.randint(3, 40))
    start, goal = rng.sample(range(n), 2)
    return {"towns": towns, "roads": [[a, b, w] for (a, b), w in sorted(roads.items())],
            "start": start, "goal": goal}


def prompt(instance: dict) -> str:
    t = instance["towns"]
    lines = "\n".join(f"- {t[a]} <-> {t[b]}: {w} km" for a, b, w in instance["roads"])
    return (
        f"Roads between towns (each can be driven both ways):\n{lines}\n\n"
        f"What is the length in km of the shortest drive from {t[instance['start']]} to "
        f"{t[instance['goal']]}? Give the number of km as an integer."
    )


def solve(instance: dict) -> str:
    graph: dict[int, list[tuple[int, int]]] = {}
    for a, b, w in instance["roads"]:
        graph.setdefault(a, []).append((b, w))
        graph.setdefault(b, []).append((a, w))
    dist = {instance["start"]: 0}
    heap = [(0, instance["start"])]
    while heap:
        d, node = heapq.heappop(heap)
        if node == instance["goal"]:
            return str(d)
        if d > dist[node]:
            continue
        for nxt, w in graph.get(node, []):
            if d + w < dist.get(nxt, float("inf")):
                dist[nxt] = d + w
                heapq.heappush(heap, (d + w, nxt))
    raise ValueError("goal unreachable")


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    m = re.fullmatch(r"\s*(\d{1,7})\s*(km)?\s*", answer)
    return 1.0 if m and m.group(1) == solve(instance) else 0.0
