"""topological_order: a hand-ordered graph, list parsing, and acyclic generated graphs."""

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "seed_topological_order", Path(__file__).parents[2] / "seeds" / "topological_order.py"
)
env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(env)

# 1 waits for both 2 and 3, and 3 waits for 0: the smallest order is 0 2 3 1.
TINY = {"n": 4, "edges": [[0, 3], [2, 1], [3, 1]]}


def test_hand_ordered_graph():
    assert env.solve(TINY) == "0 2 3 1"


@pytest.mark.parametrize("answer", ["0 2 3 1", "0,2,3,1", " 0, 2, 3, 1\n", "[0, 2, 3, 1]"])
def test_accepts_list_forms(answer):
    assert env.score(TINY, answer) == 1.0


@pytest.mark.parametrize(
    "answer",
    ["2 0 3 1", "0 2 1 3", "0 2 3", "0 2 3 1 1", "0 2 3 -1", "0 2 3 1.0", "0; 2; 3; 1", ""],
)
def test_rejects_other_answers(answer):
    assert env.score(TINY, answer) == 0.0


@pytest.mark.parametrize("difficulty", [1, 10])
def test_generated_graph_is_acyclic_on_all_nodes(difficulty):
    instance = env.generate(9, difficulty)
    order = [int(node) for node in env.solve(instance).split()]
    assert sorted(order) == list(range(instance["n"]))
    position = {node: index for index, node in enumerate(order)}
    assert all(position[u] < position[v] for u, v in instance["edges"])
