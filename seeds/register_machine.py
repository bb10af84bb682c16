"""Run a short program for a machine with four registers (set, add, sub, mul modulo 1000
and a conditional jump that forms counted loops, nested at higher difficulty) and report
one register's final value. At difficulty 1 it is one instruction on single-digit values;
loops come in at difficulty 3. An interpreter is a few lines, but by hand every loop must be
unrolled and every intermediate value carried exactly through modular arithmetic, so one
slip anywhere changes the answer."""

import random
import re

NAME = "register_machine"
TAGS = ["algorithmic", "simulation", "program"]
ANSWER_TYPE = "int"
INPUT_TYPE = "int"

MODULUS = 1000
_DATA = ("a", "b")
_COUNTERS = ("c", "d")  # the loop counter of nesting depth 0, then depth 1
_MULTIPLIERS = (3, 7, 9, 11, 13, 17, 19, 21, 23)  # coprime to 1000, so mul never collapses to 0
# By difficulty 1 to 10, growing about geometrically: the fewest program lines, and the bound
# on the initial values and constants (all below it; 1000 is the whole register range).
_MIN_LINES = (1, 2, 3, 4, 5, 8, 12, 19, 28, 43)
_VALUE_BOUNDS = (10, 20, 30, 50, 80, 130, 220, 360, 600, 1000)
_LOOPS_FROM = 3  # below this difficulty a program is straight-line


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def _straight(rng: random.Random, difficulty: int) -> list:
    target = rng.choice(_DATA)
    op = rng.choice(("add", "add", "sub", "mul"))
    if op == "mul":
        return [op, target, rng.choice(_MULTIPLIERS)]
    if rng.random() < 0.5:
        return [op, target, _DATA[1 - _DATA.index(target)]]
    return [op, target, rng.randint(1, _VALUE_BOUNDS[difficulty - 1] - 1)]


def _block(rng: random.Random, difficulty: int, depth: int, program: list) -> None:
    """Appends one straight instruction or one counted loop (maybe nested) to program."""
    if difficulty < _LOOPS_FROM or depth >= 2 or rng.random() < 0.5:
        program.append(_straight(rng, difficulty))
        return
    counter = _COUNTERS[depth]
    program.append(["set", counter, rng.randint(2, 2 + difficulty // 2)])
    body_start = len(program) + 1  # lines are numbered from 1
    nested = difficulty >= 6 and depth == 0
    for _ in range(rng.randint(1, 1 + difficulty // 4)):
        _block(rng, difficulty, depth + 1 if nested else 2, program)
    program.append(["sub", counter, 1])
    program.append(["jnz", counter, body_start])


def _program(rng: random.Random, difficulty: int) -> list:
    program: list = []
    while len(program) < _MIN_LINES[difficulty - 1]:
        _block(rng, difficulty, 0, program)
    return program


def _make(rng: random.Random, difficulty: int, a: int) -> dict:
    initial = {"a": a, "b": rng.randrange(_VALUE_BOUNDS[difficulty - 1])}
    program = _program(rng, difficulty)
    ask = rng.choice(_DATA)
    # A short program may leave one data register alone; the question is never about it, so
    # its answer is never just a starting value copied from the prompt.
    if all(line[1] != ask for line in program):
        ask = _DATA[1 - _DATA.index(ask)]
    return {"initial": initial, "program": program, "ask": ask}


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    return _make(rng, difficulty, rng.randrange(_VALUE_BOUNDS[difficulty - 1]))


def generate_from(value: int, seed: int, difficulty: int) -> dict:
    """An instance whose register a starts at value mod 1000 (any int, negative or huge)."""
    if not isinstance(value, int):
        raise TypeError(f"value must be an int, not {type(value).__name__}")
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:from:{seed}:{difficulty}")
    return _make(rng, difficulty, value % MODULUS)


def prompt(instance: dict) -> str:
    lines = "\n".join(
        f"{number}: {' '.join(str(part) for part in line)}"
        for number, line in enumerate(instance["program"], start=1)
    )
    a, b = instance["initial"]["a"], instance["initial"]["b"]
    return (
        f"A machine has four registers a, b, c, d, each holding an integer from 0 to "
        f"{MODULUS - 1}. They start as a = {a}, b = {b}, c = 0, d = 0.\n"
        "Instructions (x is a register; y is a register or an integer constant):\n"
        "- set x y: x becomes y\n"
        f"- add x y: x becomes (x + y) mod {MODULUS}\n"
        f"- sub x y: x becomes (x - y) mod {MODULUS} (the result is never negative)\n"
        f"- mul x y: x becomes (x * y) mod {MODULUS}\n"
        "- jnz x k: if x is not 0, continue at line k; otherwise continue with the next line\n"
        "The program runs from line 1, one line after another, and stops after its last "
        "line.\n\n"
        f"{lines}\n\n"
        f"What is the value of register {instance['ask']} when the program stops? "
        "Give the value as a single integer."
    )


def solve(instance: dict) -> str:
    regs = {"a": 0, "b": 0, "c": 0, "d": 0, **instance["initial"]}
    program = instance["program"]
    pc = 0
    while pc < len(program):
        op, x, y = program[pc]
        pc += 1
        operand = regs[y] if isinstance(y, str) else y
        if op == "jnz":
            pc = y - 1 if regs[x] != 0 else pc
        elif op == "set":
            regs[x] = operand
        elif op == "add":
            regs[x] = (regs[x] + operand) % MODULUS
        elif op == "sub":
            regs[x] = (regs[x] - operand) % MODULUS
        elif op == "mul":
            regs[x] = (regs[x] * operand) % MODULUS
    return str(regs[instance["ask"]])


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
