"""Find the length of the shortest path from S to T on a grid with walls, moving one step
up, down, left or right. A breadth-first search answers it in a dozen lines, but in one's
head the maze must be explored with every dead end and detour tracked at once, and an
off-by-one in the step count is easy to make on a large grid."""

import random
import re
from collections import deque

NAME = "grid_shortest_path"
TAGS = ["algorithmic", "graph", "bfs", "grid"]
ANSWER_TYPE = "int"

_MOVES = ((1, 0), (-1, 0), (0, 1), (0, -1))
# The grid's side by difficulty 1 to 10, growing about geometrically from a 4x4 grid that can
# be read at a glance to a 23x23 maze.
_SIDES = (4, 5, 6, 7, 8, 10, 12, 15, 19, 23)


def _distances(grid: list[str], start: tuple[int, int]) -> dict[tuple[int, int], int]:
    """Breadth-first search: step count from start to every open cell it reaches."""
    dist = {start: 0}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        for dr, dc in _MOVES:
            nr, nc = r + dr, c + dc
            inside = 0 <= nr < len(grid) and 0 <= nc < len(grid[nr])
            if inside and grid[nr][nc] != "#" and (nr, nc) not in dist:
                dist[(nr, nc)] = dist[(r, c)] + 1
                queue.append((nr, nc))
    return dist


def _find(grid: list[str], mark: str) -> tuple[int, int]:
    for r, row in enumerate(grid):
        if mark in row:
            return r, row.index(mark)
    raise ValueError(f"no {mark} in grid")


def generate(seed: int, difficulty: int) -> dict:
    difficulty = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    side = _SIDES[difficulty - 1]
    while True:
        cells = [["#" if rng.random() < 0.3 else "." for _ in range(side)] for _ in range(side)]
        rows = ["".join(row) for row in cells]
        open_cells = [(r, c) for r in range(side) for c in range(side) if rows[r][c] == "."]
        if not open_cells:
            continue
        start = rng.choice(open_cells)
        dist = _distances(rows, start)
        if len(dist) < side:
            continue
        # T is drawn from the farther half of the reachable cells, so the path is not trivial.
        reachable = sorted(dist, key=lambda cell: (dist[cell], cell))
        target = rng.choice(reachable[len(reachable) // 2 :])
        cells[start[0]][start[1]] = "S"
        cells[target[0]][target[1]] = "T"
        return {"grid": ["".join(row) for row in cells]}


def prompt(instance: dict) -> str:
    grid = "\n".join(instance["grid"])
    return (
        "Here is a grid. '#' is a wall, '.' is an open cell, 'S' is the start and 'T' is the "
        "target (both open).\n\n"
        f"{grid}\n\n"
        "Each move goes one cell up, down, left or right (no diagonals), never into a wall "
        "and never off the grid. What is the smallest number of moves that takes you from S "
        "to T? Give the number of moves as a single integer."
    )


def solve(instance: dict) -> str:
    grid = instance["grid"]
    return str(_distances(grid, _find(grid, "S"))[_find(grid, "T")])


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
