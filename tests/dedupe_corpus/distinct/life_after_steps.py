"""Conway's Game of Life on a small bounded board (cells outside the board are dead): how
many cells are alive after t generations? The update rule is trivial to code, but applying it
to every cell for several steps by hand is a long and fragile computation."""

import random

NAME = "life_after_steps"
TAGS = ["simulation", "cellular-automaton"]
ANSWER_TYPE = "int"


def generate(seed, difficulty):
    d = max(1, min(10, int(difficulty)))
    rng = random.Random("life" + str(seed) + "x" + str(d))
    size = 5 + d // 2
    steps = 1 + d // 2
    board = [[1 if rng.random() < 0.4 else 0 for _ in range(size)] for _ in range(size)]
    return {"board": board, "steps": steps}


def _step(board):
    n = len(board)
    nxt = [[0] * n for _ in range(n)]
    for r in range(n):
        for c in range(n):
            alive = 0
            for dr in (-1, 0, 1):
                for dc in (-1, 0, 1):
                    if (dr or dc) and 0 <= r + dr < n and 0 <= c + dc < n:
                        alive += board[r + dr][c + dc]
            nxt[r][c] = 1 if alive == 3 or (alive == 2 and board[r][c]) else 0
    return nxt


def prompt(instance):
    rows = "\n".join("".join("#" if x else "." for x in row) for row in instance["board"])
    return (
        "Game of Life on this board (# alive, . dead); cells beyond the edge count as dead:\n"
        f"{rows}\n\nEach generation, a live cell with 2 or 3 live neighbours (of its 8) stays "
        "alive, a dead cell with exactly 3 live neighbours becomes alive, and every other cell "
        f"is dead in the next generation. How many cells are alive after {instance['steps']} "
        "generations? Answer with an integer."
    )


def solve(instance):
    board = instance["board"]
    for _ in range(instance["steps"]):
        board = _step(board)
    return str(sum(map(sum, board)))


def score(instance, answer):
    s = answer.strip() if isinstance(answer, str) else ""
    return 1.0 if s.isdigit() and len(s) <= 4 and int(s) == int(solve(instance)) else 0.0
