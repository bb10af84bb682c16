"""Complete an n-queens placement: some rows already hold a queen, and a queen must be added to
every other row so that no two queens share a column or a diagonal. The fixed queens come
from a full solution, so a completion exists; any valid completion counts. Backtracking finds
one in code; by hand, each choice constrains the rest."""

import random
import re

NAME = "n_queens_completion"
TAGS = ["planted", "puzzle", "constraint-satisfaction"]
ANSWER_TYPE = "list[int]"


def _solutions(n, rng):
    """One n-queens solution by randomized backtracking."""
    cols = []

    def place(row):
        if row == n:
            return True
        options = list(range(n))
        rng.shuffle(options)
        for c in options:
            if all(c != pc and abs(c - pc) != row - pr for pr, pc in enumerate(cols)):
                cols.append(c)
                if place(row + 1):
                    return True
                cols.pop()
        return False

    place(0)
    return cols


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"queens:{seed}:{level}")
    n = 5 + (level + 1) // 2
    full = _solutions(n, rng)
    free_rows = sorted(rng.sample(range(n), min(n - 1, 2 + level // 2)))
    given = {str(r): full[r] for r in range(n) if r not in free_rows}
    return {"n": n, "given": given, "free_rows": free_rows, "solution": full}


def prompt(instance):
    n = instance["n"]
    board = []
    for r in range(n):
        c = instance["given"].get(str(r))
        board.append(" ".join("Q" if c == col else "." for col in range(n)))
    rows = ", ".join(str(r + 1) for r in instance["free_rows"])
    return (
        f"An {n}x{n} chessboard, rows numbered 1 to {n} from the top, columns 1 to {n} from the "
        "left:\n" + "\n".join(board) +
        f"\n\nRows {rows} are empty. Put one queen in each empty row so that no two queens on the "
        "board share a column or a diagonal (the given queens stay). Give the column of the "
        "queen you put in each empty row, top to bottom, separated by spaces."
    )


def solve(instance):
    return " ".join(str(instance["solution"][r] + 1) for r in instance["free_rows"])


def score(instance, answer):
    if not isinstance(answer, str) or len(answer) > 500:
        return 0.0
    found = re.findall(r"-?\d+", answer)
    if re.sub(r"[\d\s,-]", "", answer) or len(found) != len(instance["free_rows"]):
        return 0.0
    n = instance["n"]
    cols = {int(r): c for r, c in instance["given"].items()}
    for r, token in zip(instance["free_rows"], found):
        c = int(token) - 1
        if not 0 <= c < n:
            return 0.0
        cols[r] = c
    placed = sorted(cols.items())
    for i, (r1, c1) in enumerate(placed):
        for r2, c2 in placed[i + 1:]:
            if c1 == c2 or abs(c1 - c2) == abs(r1 - r2):
                return 0.0
    return 1.0
