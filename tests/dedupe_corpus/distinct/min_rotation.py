"""Lexicographically smallest rotation of a string: among all ways to cut the string and swap
the two pieces, the one that sorts first. Comparing all rotations (or Booth's algorithm) is
easy code; by eye, long runs of similar letters make the comparisons tedious."""

import random

NAME = "min_rotation"
TAGS = ["strings", "ordering"]
ANSWER_TYPE = "str"


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"rot/{seed}/{level}")
    letters = "abc"[: 2 + (level > 3)]
    return {"text": "".join(rng.choice(letters) for _ in range(6 + 3 * level))}


def prompt(instance):
    return (
        f"Take the string {instance['text']}. A rotation moves some number of letters from its "
        "front to its back (keeping their order); the string itself is also a rotation. Which "
        "rotation comes first in alphabetical order? Give that rotation."
    )


def solve(instance):
    s = instance["text"]
    return min(s[i:] + s[:i] for i in range(len(s)))


def score(instance, answer):
    if not isinstance(answer, str) or len(answer) > 200:
        return 0.0
    return 1.0 if answer.strip() == solve(instance) else 0.0
