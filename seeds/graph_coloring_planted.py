"""Graph 3-coloring with a planted solution: color every vertex of an undirected graph with
one of three colors so that no edge joins two vertices of the same color. The edges are drawn
only between vertices of different colors in a hidden balanced coloring, so a coloring
exists, and any proper one counts. With up to four and a half edges per vertex on average at
the top, near where random graphs stop being 3-colorable, a coloring takes a real search
with backtracking, while checking one is a single pass over the edges. At difficulty 1 the
graph has five vertices and six edges."""

import random
import re

NAME = "graph_coloring_planted"
TAGS = ["planted", "graph", "coloring", "np-hard"]
ANSWER_TYPE = "list[int]"

_COLORS = 3
_MAX_ANSWER_CHARS = 10_000
# The number of vertices by difficulty 1 to 10, growing about geometrically; the average
# number of edges at a vertex grows from 2.5 to 4.5 (see generate).
_VERTICES = (5, 6, 8, 10, 13, 18, 24, 33, 44, 60)


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    count = _VERTICES[difficulty - 1]
    degree = 2.5 + 2.0 * (difficulty - 1) / 9
    planted = [vertex % _COLORS for vertex in range(count)]
    rng.shuffle(planted)
    allowed = [
        (u, v) for u in range(count) for v in range(u + 1, count) if planted[u] != planted[v]
    ]
    edges = sorted(rng.sample(allowed, min(len(allowed), round(degree * count / 2))))
    return {
        "vertices": count,
        "colors": _COLORS,
        "edges": [list(edge) for edge in edges],
        "planted": planted,
    }


def prompt(instance: dict) -> str:
    count, colors = instance["vertices"], instance["colors"]
    edges = ", ".join(f"{u}-{v}" for u, v in instance["edges"])
    return (
        f"An undirected graph has {count} vertices, numbered 0 to {count - 1}, and these "
        f"{len(instance['edges'])} edges (u-v joins vertex u and vertex v):\n\n"
        f"{edges}\n\n"
        f"Color every vertex with one of the {colors} colors 0 to {colors - 1} so that the two "
        "ends of every edge get different colors. Such a coloring exists, and any valid one "
        "is accepted.\n\n"
        f"Give the {count} colors separated by single spaces, in vertex order: first the color "
        f"of vertex 0, then that of vertex 1, and so on up to vertex {count - 1}."
    )


def solve(instance: dict) -> str:
    return " ".join(str(color) for color in instance["planted"])


def _integers(answer: str) -> list[int] | None:
    """The integers of an answer made of numbers separated by spaces and/or commas."""
    if not isinstance(answer, str) or len(answer) > _MAX_ANSWER_CHARS:
        return None
    text = answer.strip()
    if not re.fullmatch(r"[0-9]{1,9}(?:[\s,]+[0-9]{1,9})*", text):
        return None
    return [int(token) for token in re.findall(r"[0-9]+", text)]


def score(instance: dict, answer: str) -> float:
    coloring = _integers(answer)
    if coloring is None or len(coloring) != instance["vertices"]:
        return 0.0
    if max(coloring) >= instance["colors"]:
        return 0.0
    proper = all(coloring[u] != coloring[v] for u, v in instance["edges"])
    return 1.0 if proper else 0.0
