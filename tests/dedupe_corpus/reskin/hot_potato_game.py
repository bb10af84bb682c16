"""Children pass a hot potato round a ring; every time the music stops on the k-th child, that child drops out. Who wins? (re-skin of josephus_survivor)."""

import random

NAME = "hot_potato_game"
TAGS = ["simulation", "games"]
ANSWER_TYPE = "int"


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"potato/{seed}/{level}")
    return {"children": rng.randint(5 + 4 * level, 10 + 9 * level), "passes": rng.randint(2, 3 + level)}


def prompt(instance):
    n, k = instance["children"], instance["passes"]
    return (
        f"{n} children sit in a ring, wearing numbers 1 to {n} in clockwise order. Child 1 holds a "
        f"hot potato and counts as the first of {k}; the potato moves clockwise child by child, "
        f"and the {k}-th child to hold it leaves the ring, passing it on to the next child, who "
        "starts the next count at 1. The last child remaining wins. Which number does the "
        "winner wear? Reply with the number."
    )


def solve(instance):
    ring = list(range(1, instance["children"] + 1))
    at = 0
    while len(ring) > 1:
        at = (at + instance["passes"] - 1) % len(ring)
        ring.pop(at)
    return str(ring[0])


def score(instance, answer):
    if not isinstance(answer, str) or not answer.strip().isdigit() or len(answer.strip()) > 5:
        return 0.0
    return 1.0 if answer.strip() == solve(instance) else 0.0
