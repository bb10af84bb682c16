"""Evaluate an expression in reverse Polish notation (operands first, then the operator). A
stack does it in code; mentally one must hold a growing stack of intermediate values."""

import random

NAME = "rpn_evaluation"
TAGS = ["stack", "arithmetic", "simulation"]
ANSWER_TYPE = "int"


def _build(rng, leaves):
    """A random expression tree with `leaves` operands, written in postfix."""
    if leaves == 1:
        return [str(rng.randint(1, 12))]
    left = rng.randint(1, leaves - 1)
    return _build(rng, left) + _build(rng, leaves - left) + [rng.choice("+-*")]


def generate(seed, difficulty):
    lvl = max(1, min(10, int(difficulty)))
    rng = random.Random(f"rpn::{seed}::{lvl}")
    return {"tokens": _build(rng, 3 + lvl)}


def prompt(instance):
    return (
        "Evaluate this expression written in reverse Polish (postfix) notation, where each "
        "operator applies to the two values before it:\n\n    " + " ".join(instance["tokens"])
        + "\n\nThe operators are + (add), - (subtract the second value from the first) and * "
        "(multiply). Give the resulting integer."
    )


def _evaluate(tokens):
    stack = []
    for tok in tokens:
        if tok in ("+", "-", "*"):
            b, a = stack.pop(), stack.pop()
            stack.append(a + b if tok == "+" else a - b if tok == "-" else a * b)
        else:
            stack.append(int(tok))
    return stack[0]


def solve(instance):
    return str(_evaluate(instance["tokens"]))


def score(instance, answer):
    if not isinstance(answer, str) or len(answer) > 40:
        return 0.0
    text = answer.strip()
    body = text[1:] if text[:1] == "-" else text
    if not body.isdigit():
        return 0.0
    return 1.0 if int(text) == _evaluate(instance["tokens"]) else 0.0
