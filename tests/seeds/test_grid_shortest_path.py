"""grid_shortest_path: a hand-solved grid, integer parsing, and the generated grids' shape."""

import importlib.util
from itertools import pairwise
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "seed_grid_shortest_path", Path(__file__).parents[2] / "seeds" / "grid_shortest_path.py"
)
env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(env)

# The wall in the middle forces the path down and around: 5 moves.
TINY = {"grid": ["S.#", ".#T", "..."]}


def test_hand_solved_grid():
    assert env.solve(TINY) == "5"


@pytest.mark.parametrize("answer", ["5", " 5\n", "+5", "05"])
def test_accepts_integer_forms(answer):
    assert env.score(TINY, answer) == 1.0


@pytest.mark.parametrize("answer", ["4", "6", "-5", "5.0", "5 moves", "five", "٥", "1e9" * 1000])
def test_rejects_other_answers(answer):
    assert env.score(TINY, answer) == 0.0


@pytest.mark.parametrize("difficulty", [1, 5, 10])
def test_grid_is_square_with_one_start_and_one_target(difficulty):
    grid = env.generate(7, difficulty)["grid"]
    assert len(grid) == {1: 4, 5: 8, 10: 3 + 2 * 10}[difficulty]
    assert all(len(row) == len(grid) and set(row) <= set(".#ST") for row in grid)
    assert "".join(grid).count("S") == 1 and "".join(grid).count("T") == 1
    assert int(env.solve({"grid": grid})) > 0


def test_out_of_range_difficulty_is_clamped():
    assert env.generate(3, 0) == env.generate(3, 1)
    assert env.generate(3, 99) == env.generate(3, 10)


def test_level_one_is_tiny_and_grids_grow_to_level_ten():
    tiny = [env.generate(seed, 1)["grid"] for seed in range(50)]
    assert all(len(grid) == 4 and 1 <= int(env.solve({"grid": grid})) <= 9 for grid in tiny)
    sides = [len(env.generate(0, d)["grid"]) for d in range(1, 11)]
    assert all(a < b for a, b in pairwise(sides)) and sides[-1] == 23
