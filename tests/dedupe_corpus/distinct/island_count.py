"""Count the islands on a map: groups of land cells joined side by side (not diagonally). A
flood fill counts them in code; by eye, snaking coastlines make it easy to merge or split an
island by mistake."""

import random
from collections import deque

NAME = "island_count"
TAGS = ["graph", "grid", "flood-fill"]
ANSWER_TYPE = "int"


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"islands/{seed}/{level}")
    rows, cols = 4 + level, 5 + 2 * level
    land = 0.35 + 0.02 * level
    return {"map": ["".join("X" if rng.random() < land else "~" for _ in range(cols)) for _ in range(rows)]}


def prompt(instance):
    return (
        "Here is a map; X is land and ~ is water:\n\n" + "\n".join(instance["map"]) + "\n\n"
        "An island is a group of land cells connected horizontally or vertically (diagonal "
        "contact does not connect). How many islands are on the map? Answer with a number."
    )


def _islands(grid):
    h, w = len(grid), len(grid[0])
    seen = [[False] * w for _ in range(h)]
    count = 0
    for r in range(h):
        for c in range(w):
            if grid[r][c] != "X" or seen[r][c]:
                continue
            count += 1
            seen[r][c] = True
            queue = deque([(r, c)])
            while queue:
                y, x = queue.popleft()
                for ny, nx in ((y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)):
                    if 0 <= ny < h and 0 <= nx < w and grid[ny][nx] == "X" and not seen[ny][nx]:
                        seen[ny][nx] = True
                        queue.append((ny, nx))
    return count


def solve(instance):
    return str(_islands(instance["map"]))


def score(instance, answer):
    if not isinstance(answer, str):
        return 0.0
    a = answer.strip()
    if len(a) == 0 or len(a) > 4 or not a.isdecimal():
        return 0.0
    return 1.0 if int(a) == _islands(instance["map"]) else 0.0
