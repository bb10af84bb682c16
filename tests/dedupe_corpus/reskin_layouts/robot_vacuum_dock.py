"""A robot vacuum on a floor plan (R robot, D dock, X furniture) drives cell by cell; how many moves to its dock? (re-skin of grid_shortest_path)."""

import random
import re
from collections import deque

NAME = "robot_vacuum_dock"
TAGS = ["graphs", "bfs", "test-corpus"]
ANSWER_TYPE = "int"


def _moves(floor: list[str]) -> int:
    cells = {(r, c): ch for r, row in enumerate(floor) for c, ch in enumerate(row)}
    start = next(p for p, ch in cells.items() if ch == "R")
    seen, todo = {start: 0}, deque([start])
    while todo:
        r, c = todo.popleft()
        if cells[(r, c)] == "D":
            return seen[(r, c)]
        for p in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if cells.get(p, "X") != "X" and p not in seen:
                seen[p] = seen[(r, c)] + 1
                todo.append(p)
    return -1


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    side = 4 + 2 * level
    while True:
        grid = [["X" if rng.random() < 0.3 else "_" for _ in range(side)] for _ in range(side)]
        free = [(r, c) for r in range(side) for c in range(side) if grid[r][c] == "_"]
        (r1, c1), (r2, c2) = rng.sample(free, 2)
        grid[r1][c1], grid[r2][c2] = "R", "D"
        floor = ["".join(row) for row in grid]
        if _moves(floor) > 0:
            return {"floor": floor}


def prompt(instance: dict) -> str:
    return (
        "Floor plan:\n" + "\n".join(instance["floor"]) + "\nR is the robot, D its dock, X furniture, _ open floor. "
        "The robot moves one cell up, down, left or right at a time. How many moves does it need at least?"
    )


def solve(instance: dict) -> str:
    return str(_moves(instance["floor"]))


def score(instance: dict, answer: str) -> float:
    text = answer.strip() if isinstance(answer, str) else ""
    return 1.0 if re.fullmatch(r"-?\d{1,30}", text) and int(text) == int(solve(instance)) else 0.0
