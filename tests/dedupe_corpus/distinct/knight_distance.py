"""Fewest knight moves between two squares of a board with some squares blocked. A
breadth-first search over knight jumps solves it; by hand, the L-shaped geometry plus
obstacles defeats intuition."""

import random
from collections import deque

NAME = "knight_distance"
TAGS = ["graph", "bfs", "chess"]
ANSWER_TYPE = "int"

JUMPS = [(1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2)]


def _reach(size, blocked, start):
    dist = {start: 0}
    todo = deque([start])
    while todo:
        r, c = todo.popleft()
        for dr, dc in JUMPS:
            cell = (r + dr, c + dc)
            if 0 <= cell[0] < size and 0 <= cell[1] < size and cell not in blocked and cell not in dist:
                dist[cell] = dist[(r, c)] + 1
                todo.append(cell)
    return dist


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(seed ^ (level << 20))
    size = 5 + level
    while True:
        cells = [(r, c) for r in range(size) for c in range(size)]
        blocked = set(rng.sample(cells, size * size // 6))
        free = [x for x in cells if x not in blocked]
        start, goal = rng.sample(free, 2)
        dist = _reach(size, blocked, start)
        if goal in dist and dist[goal] >= 2:
            return {"size": size, "blocked": sorted(list(b) for b in blocked),
                    "start": list(start), "goal": list(goal)}


def _name(cell):
    return "abcdefghijklmnop"[cell[1]] + str(cell[0] + 1)


def prompt(instance):
    blocked = ", ".join(_name(b) for b in instance["blocked"])
    n = instance["size"]
    return (
        f"On a {n}x{n} board (columns a-{'abcdefghijklmnop'[n - 1]}, rows 1-{n}) a knight stands "
        f"on {_name(instance['start'])}. It may never land on these squares: {blocked}. What is "
        f"the least number of knight moves to reach {_name(instance['goal'])}? Give an integer."
    )


def solve(instance):
    blocked = {tuple(b) for b in instance["blocked"]}
    dist = _reach(instance["size"], blocked, tuple(instance["start"]))
    return str(dist[tuple(instance["goal"])])


def score(instance, answer):
    if not isinstance(answer, str) or not answer.strip().isdigit() or len(answer.strip()) > 3:
        return 0.0
    return 1.0 if answer.strip() == solve(instance) else 0.0
