"""Report the maximum nesting depth of a long balanced string of mixed brackets (round,
square and curly). A counter that goes up on every opening bracket and down on every closing
one finds it in one pass, but by eye the string is a few hundred characters of near-identical
symbols, and losing count once anywhere gives a wrong depth."""

import random
import re

NAME = "bracket_depth"
TAGS = ["algorithmic", "strings", "counting", "test-corpus"]
ANSWER_TYPE = "int"

_PAIRS = {"(": ")", "[": "]", "{": "}"}
_MAX_ANSWER_CHARS = 1000


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def generate(seed: int, difficulty: int) -> dict:
    """A random balanced string of 2 * pairs brackets whose depth never exceeds a cap drawn
    per instance, with one planted run that reaches the cap, so the depth is exactly the cap."""
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    cap = rng.randint(2, 4 + 2 * difficulty)
    pairs = max(cap, 10 + 10 * difficulty)
    opens = sorted(_PAIRS)
    text: list[str] = []
    stack: list[str] = []
    planted_at = rng.randint(0, pairs - cap)  # after this many opening brackets, climb to cap
    opened = 0
    climbed = False

    def push() -> None:
        bracket = rng.choice(opens)
        text.append(bracket)
        stack.append(_PAIRS[bracket])

    while opened < pairs or stack:
        if not climbed and opened >= planted_at:
            while len(stack) < cap:
                push()
                opened += 1
            climbed = True
        elif opened < pairs and len(stack) < cap and (not stack or rng.random() < 0.5):
            push()
            opened += 1
        else:
            text.append(stack.pop())
    return {"brackets": "".join(text)}


def prompt(instance: dict) -> str:
    return (
        "Here is a balanced string of round, square and curly brackets:\n\n"
        f"{instance['brackets']}\n\n"
        "The nesting depth at a position is the number of brackets opened before it and not yet "
        "closed, counting every kind of bracket alike. What is the largest nesting depth "
        "reached anywhere in the string (a string such as ([]) has depth two)? Give the "
        "largest depth as a single integer."
    )


def solve(instance: dict) -> str:
    depth = best = 0
    for char in instance["brackets"]:
        if char in _PAIRS:
            depth += 1
            best = max(best, depth)
        else:
            depth -= 1
    return str(best)


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > _MAX_ANSWER_CHARS:
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
