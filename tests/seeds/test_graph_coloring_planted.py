"""Tests for the graph_coloring_planted seed: every proper coloring is accepted and nothing
else is, generated graphs respect their planted coloring, and instances are deterministic."""

import importlib.util
import json
import time
from itertools import pairwise, product
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "seeds" / "graph_coloring_planted.py"
_SPEC = importlib.util.spec_from_file_location("seed_graph_coloring_planted", _PATH)
env = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(env)

# A 4-cycle with the chord 0-2: vertices 0 and 2 need two colors, 1 and 3 the third.
TINY = {
    "vertices": 4,
    "colors": 3,
    "edges": [[0, 1], [0, 2], [0, 3], [1, 2], [2, 3]],
    "planted": [0, 1, 2, 1],
}


def test_tiny_instance_accepts_exactly_the_proper_colorings():
    accepted = {colors for colors in product(range(3), repeat=4) if env.score(TINY, " ".join(map(str, colors))) == 1.0}
    assert len(accepted) == 6
    assert all(c[0] != c[2] and c[1] == c[3] and c[1] not in (c[0], c[2]) for c in accepted)


def test_reference_and_a_different_valid_coloring_score_one():
    assert env.solve(TINY) == "0 1 2 1"
    assert env.score(TINY, "0 1 2 1") == 1.0
    assert env.score(TINY, "2 0 1 0") == 1.0


@pytest.mark.parametrize("answer", ["0,1,2,1", " 0, 1, 2, 1 ", "0\n1\n2\n1"])
def test_separators_and_surrounding_space_are_tolerated(answer):
    assert env.score(TINY, answer) == 1.0


@pytest.mark.parametrize(
    "answer",
    [
        "0 1 2 2",  # vertex 3 changed: edge 2-3 is monochrome
        "0 1 2 0",  # vertex 3 changed: edge 0-3 is monochrome
        "0 3 2 3",  # color 3 is out of range
        "0 1 2",
        "0 1 2 1 0",
        "0 -1 2 -1",
        "0 1 2 1.0",
        "0 0 0 0",
        "",
        "None",
        "red green blue green",
        "٠ ١ ٢ ١",  # Arabic-Indic digits
    ],
)
def test_invalid_answers_score_zero(answer):
    result = env.score(TINY, answer)
    assert result == 0.0
    assert type(result) is float


@pytest.mark.parametrize("answer", ["0 1 2 " + "1" * 5000, "0 1 2 1 " * 200_000], ids=["long", "huge"])
def test_oversized_answers_score_zero(answer):
    assert env.score(TINY, answer) == 0.0


def test_recoloring_a_vertex_onto_a_neighbour_fails_on_a_generated_graph():
    instance = env.generate(2, 10)
    colors = instance["planted"]
    u, v = instance["edges"][0]
    changed = list(colors)
    changed[u] = colors[v]
    assert env.score(instance, " ".join(map(str, changed))) == 0.0


@pytest.mark.parametrize("difficulty", [1, 5, 10])
def test_generated_graphs_are_simple_and_respect_the_balanced_planted_coloring(difficulty):
    for seed in range(20):
        instance = env.generate(seed, difficulty)
        count, edges, planted = instance["vertices"], instance["edges"], instance["planted"]
        assert edges and edges == sorted(edges)
        assert len({tuple(edge) for edge in edges}) == len(edges)
        assert all(0 <= u < v < count and planted[u] != planted[v] for u, v in edges)
        sizes = [planted.count(color) for color in range(3)]
        assert sum(sizes) == count and max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("difficulty", [1, 5, 10])
def test_generated_instances_are_deterministic_and_survive_json(difficulty):
    for seed in range(20):
        instance = env.generate(seed, difficulty)
        assert instance == env.generate(seed, difficulty)
        decoded = json.loads(json.dumps(instance))
        assert env.score(decoded, env.solve(decoded)) == 1.0
        assert env.solve(decoded) not in env.prompt(decoded)


@pytest.mark.parametrize("difficulty", [1, 5, 10])
def test_references_vary_across_seeds(difficulty):
    assert len({env.solve(env.generate(seed, difficulty)) for seed in range(30)}) >= 5


def test_difficulty_scales_the_graph_and_is_clamped():
    graphs = [env.generate(0, d) for d in range(1, 11)]
    assert [g["vertices"] for g in graphs] == [5, 6, 8, 10, 13, 18, 24, 33, 44, 60]
    assert len(graphs[-1]["edges"]) / graphs[-1]["vertices"] >= 2.2
    assert env.generate(3, 0) == env.generate(3, 1)
    assert env.generate(3, 50) == env.generate(3, 10)


def test_calls_at_difficulty_ten_are_fast():
    start = time.perf_counter()
    for seed in range(20):
        instance = env.generate(seed, 10)
        env.prompt(instance)
        env.score(instance, env.solve(instance))
        env.score(instance, "x" * 1_000_000)
    assert (time.perf_counter() - start) / (20 * 5) < 0.05


def test_level_one_is_tiny_and_graphs_grow_to_level_ten():
    tiny = [env.generate(seed, 1) for seed in range(30)]
    assert all(i["vertices"] == 5 and len(i["edges"]) == 6 for i in tiny)
    assert len({str(i["edges"]) for i in tiny}) >= 15
    graphs = [env.generate(0, d) for d in range(1, 11)]
    assert all(a["vertices"] < b["vertices"] for a, b in pairwise(graphs))
    assert all(len(a["edges"]) < len(b["edges"]) for a, b in pairwise(graphs))
    assert graphs[-1]["vertices"] == 6 * 10 and len(graphs[-1]["edges"]) == 135
