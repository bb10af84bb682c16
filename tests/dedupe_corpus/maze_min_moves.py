"""The fewest moves through a maze carved by a random walk: the task of grid_shortest_path
posed by different code (a carved maze instead of random walls, Dijkstra over a heap instead
of a breadth-first search). The novelty contract must see through it by what it asks, not by
how it is written: `evoenv dedupe` rejects it as a duplicate_behaviour of grid_shortest_path."""

import heapq
import random

NAME = "maze_min_moves"
TAGS = ["test-corpus", "reskin"]
ANSWER_TYPE = "int"

STEPS = [(0, 1), (1, 0), (0, -1), (-1, 0)]


def carve(rng, size):
    board = [["#"] * size for _ in range(size)]
    row, col = rng.randrange(size), rng.randrange(size)
    board[row][col] = "."
    for _ in range(size * size * 2):
        dr, dc = rng.choice(STEPS)
        if 0 <= row + dr < size and 0 <= col + dc < size:
            row, col = row + dr, col + dc
            board[row][col] = "."
    return board


def dijkstra(board, source):
    best = {source: 0}
    heap = [(0, source)]
    while heap:
        cost, (row, col) = heapq.heappop(heap)
        if cost > best[(row, col)]:
            continue
        for dr, dc in STEPS:
            nxt = (row + dr, col + dc)
            if 0 <= nxt[0] < len(board) and 0 <= nxt[1] < len(board[0]):
                if board[nxt[0]][nxt[1]] != "#" and cost + 1 < best.get(nxt, 1 << 30):
                    best[nxt] = cost + 1
                    heapq.heappush(heap, (cost + 1, nxt))
    return best


def generate(seed, difficulty):
    level = min(10, max(1, int(difficulty)))
    rng = random.Random(f"maze:{seed}:{level}")
    size = 3 + 2 * level
    board = carve(rng, size)
    free = sorted((r, c) for r in range(size) for c in range(size) if board[r][c] == ".")
    start = free[rng.randrange(len(free))]
    reach = dijkstra(board, start)
    far = sorted(reach, key=lambda cell: (-reach[cell], cell))
    goal = far[rng.randrange(max(1, len(far) // 2))]
    board[start[0]][start[1]] = "S"
    board[goal[0]][goal[1]] = "T"
    return {"grid": ["".join(line) for line in board]}


def prompt(instance):
    lines = "\n".join(instance["grid"])
    return ("Here is a grid. '#' is a wall, '.' is an open cell, 'S' is the start and 'T' is "
            "the target.\n\n" + lines + "\n\nEach move goes one cell up, down, left or right, "
            "never into a wall and never off the grid. What is the smallest number of moves "
            "that takes you from S to T? Give the number of moves as a single integer.")


def solve(instance):
    board = instance["grid"]
    where = {ch: (r, line.index(ch)) for r, line in enumerate(board) for ch in "ST" if ch in line}
    return str(dijkstra(board, where["S"])[where["T"]])


def score(instance, answer):
    text = answer.strip() if isinstance(answer, str) else ""
    if not text.lstrip("+-").isdigit() or len(text) > 30:
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
