"""Complete a partly filled Latin square: an n-by-n grid in which every row and every column
must hold each number from 1 to n exactly once. The grid is cut from a full square, so a
completion always exists, and any valid completion counts. Filling many blanks means chains
of deductions (or backtracking search, in code), while checking an answer is a glance at each
row and column."""

import random
import re

NAME = "latin_square_completion"
TAGS = ["planted", "puzzle", "constraint-satisfaction", "test-corpus"]
ANSWER_TYPE = "list[int]"

_MAX_ANSWER_CHARS = 10_000


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    size = 4 + (difficulty - 1) // 2  # 4..8
    rows = list(range(size))
    cols = list(range(size))
    symbols = list(range(1, size + 1))
    rng.shuffle(rows)
    rng.shuffle(cols)
    rng.shuffle(symbols)
    square = [[symbols[(rows[r] + cols[c]) % size] for c in range(size)] for r in range(size)]
    if rng.random() < 0.5:
        square = [list(column) for column in zip(*square)]
    cells = size * size
    blanks = size + 1 + round((cells // 2 - size - 1) * (difficulty - 1) / 9)
    hidden = sorted(rng.sample(range(cells), blanks))
    grid = [row[:] for row in square]
    for cell in hidden:
        grid[cell // size][cell % size] = 0
    planted = [square[cell // size][cell % size] for cell in hidden]
    return {"size": size, "grid": grid, "planted": planted}


def prompt(instance: dict) -> str:
    size = instance["size"]
    rows = "\n".join(" ".join(str(v) if v else "." for v in row) for row in instance["grid"])
    return (
        f"Here is a {size} by {size} grid, with a dot for each empty cell:\n\n"
        f"{rows}\n\n"
        f"Fill every empty cell with a number from 1 to {size} so that every row and every "
        f"column contains each of the numbers 1 to {size} exactly once. A solution exists, "
        "and any valid one is accepted.\n\n"
        "Give the numbers you write into the empty cells in reading order (row by row from the "
        "top, left to right within a row), separated by single spaces."
    )


def solve(instance: dict) -> str:
    return " ".join(str(value) for value in instance["planted"])


def _values(answer: str) -> list[int] | None:
    if not isinstance(answer, str) or len(answer) > _MAX_ANSWER_CHARS:
        return None
    text = answer.strip()
    if not re.fullmatch(r"[0-9]{1,3}(?:[\s,]+[0-9]{1,3})*", text):
        return None
    return [int(token) for token in re.findall(r"[0-9]+", text)]


def score(instance: dict, answer: str) -> float:
    values = _values(answer)
    size = instance["size"]
    grid = [row[:] for row in instance["grid"]]
    empty = [(r, c) for r in range(size) for c in range(size) if grid[r][c] == 0]
    if values is None or len(values) != len(empty):
        return 0.0
    if any(not 1 <= value <= size for value in values):
        return 0.0
    for (r, c), value in zip(empty, values):
        grid[r][c] = value
    full = list(range(1, size + 1))
    for r in range(size):
        if sorted(grid[r]) != full:
            return 0.0
    for c in range(size):
        if sorted(grid[r][c] for r in range(size)) != full:
            return 0.0
    return 1.0
