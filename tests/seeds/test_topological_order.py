"""topological_order: a hand-ordered graph, list parsing, and acyclic generated graphs."""

import importlib.util
from itertools import pairwise
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


def test_level_one_is_a_small_chain_and_graphs_grow_to_level_ten():
    tiny = [env.generate(seed, 1) for seed in range(30)]
    assert all(i["n"] == 4 and len(i["edges"]) == 4 for i in tiny)
    assert len({str(i["edges"]) for i in tiny}) >= 15
    graphs = [env.generate(0, d) for d in range(1, 11)]
    assert all(a["n"] < b["n"] for a, b in pairwise(graphs))
    assert all(len(a["edges"]) < len(b["edges"]) for a, b in pairwise(graphs))
    assert graphs[-1]["n"] == 4 + 2 * 10 and len(graphs[-1]["edges"]) == 36
