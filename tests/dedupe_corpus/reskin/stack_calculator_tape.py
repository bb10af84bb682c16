"""An old stack calculator reads a tape of numbers and operation codes; what number is left on its stack at the end? (re-skin of rpn_evaluation)."""

import random

NAME = "stack_calculator_tape"
TAGS = ["stack", "simulation"]
ANSWER_TYPE = "int"

CODES = {"+": "ADD", "-": "SUB", "*": "MUL"}


def _tape(rng, operands):
    if operands == 1:
        return [str(rng.randint(1, 12))]
    cut = rng.randint(1, operands - 1)
    return _tape(rng, cut) + _tape(rng, operands - cut) + [rng.choice("+-*")]


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    return {"tape": _tape(random.Random(f"tape/{seed}/{level}"), 3 + level)}


def prompt(instance):
    cells = " ".join(CODES.get(t, t) for t in instance["tape"])
    return (
        "A stack calculator reads this tape from left to right:\n\n" + cells + "\n\n"
        "A number is pushed onto the stack. ADD, SUB and MUL pop the top value y and then the "
        "next value x, and push x+y, x-y or x*y. The tape leaves exactly one value on the stack. "
        "Which integer is it?"
    )


def solve(instance):
    stack = []
    for cell in instance["tape"]:
        if cell in CODES:
            y = stack.pop()
            x = stack.pop()
            stack.append({"+": x + y, "-": x - y, "*": x * y}[cell])
        else:
            stack.append(int(cell))
    return str(stack.pop())


def score(instance, answer):
    if not isinstance(answer, str) or len(answer) > 30:
        return 0.0
    a = answer.strip()
    if not (a.isdigit() or (a.startswith("-") and a[1:].isdigit())):
        return 0.0
    return 1.0 if int(a) == int(solve(instance)) else 0.0
