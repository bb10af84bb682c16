"""A courier crosses a city block map (1 = building, 0 = street), one block a minute; how many minutes from depot to customer? (re-skin of grid_shortest_path)."""

import random
import re
from collections import deque

NAME = "courier_delivery_minutes"
TAGS = ["graphs", "bfs", "test-corpus"]
ANSWER_TYPE = "int"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    side = 4 + 2 * level
    while True:
        city = [[1 if rng.random() < 0.3 else 0 for _ in range(side)] for _ in range(side)]
        free = [(r, c) for r in range(side) for c in range(side) if not city[r][c]]
        depot, customer = rng.sample(free, 2)
        inst = {"city": city, "depot": list(depot), "customer": list(customer)}
        if solve(inst) != "-1":
            return inst


def prompt(instance: dict) -> str:
    rows = "\n".join("".join(map(str, row)) for row in instance["city"])
    return (
        f"City map (row by row, 1 is a building, 0 a street):\n{rows}\nThe depot is at row {instance['depot'][0]}, "
        f"column {instance['depot'][1]}; the customer at row {instance['customer'][0]}, column {instance['customer'][1]} "
        "(counting from 0). Moving one street block north, south, east or west takes a minute. How many minutes at least?"
    )


def solve(instance: dict) -> str:
    city, start, goal = instance["city"], tuple(instance["depot"]), tuple(instance["customer"])
    seen, todo = {start: 0}, deque([start])
    while todo:
        r, c = todo.popleft()
        if (r, c) == goal:
            return str(seen[goal])
        for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= nr < len(city) and 0 <= nc < len(city[nr]) and not city[nr][nc] and (nr, nc) not in seen:
                seen[(nr, nc)] = seen[(r, c)] + 1
                todo.append((nr, nc))
    return "-1"


def score(instance: dict, answer: str) -> float:
    text = answer.strip() if isinstance(answer, str) else ""
    return 1.0 if re.fullmatch(r"-?\d{1,30}", text) and int(text) == int(solve(instance)) else 0.0
