"""register_machine: a hand-traced program, modular wrap-around, loop structure and
generate_from's initial register."""

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "seed_register_machine", Path(__file__).parents[2] / "seeds" / "register_machine.py"
)
env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(env)

# Three passes of the loop at lines 2-5: (a, b) goes (5, 0) -> (15, 5) -> (45, 20) -> (135, 65).
LOOP = {
    "initial": {"a": 5, "b": 0},
    "program": [
        ["set", "c", 3],
        ["add", "b", "a"],
        ["mul", "a", 3],
        ["sub", "c", 1],
        ["jnz", "c", 2],
    ],
    "ask": "b",
}


def test_hand_traced_loop():
    assert env.solve(LOOP) == "65"
    assert env.solve({**LOOP, "ask": "a"}) == "135"


def test_arithmetic_wraps_modulo_1000():
    program = [["sub", "a", 1], ["set", "b", 999], ["add", "b", 2], ["mul", "a", 3]]
    assert env.solve({"initial": {"a": 0, "b": 0}, "program": program, "ask": "a"}) == "997"
    assert env.solve({"initial": {"a": 0, "b": 0}, "program": program, "ask": "b"}) == "1"


@pytest.mark.parametrize("answer", ["64", "66", "65.0", "b = 65", "sixty-five"])
def test_rejects_other_answers(answer):
    assert env.score(LOOP, answer) == 0.0


@pytest.mark.parametrize("difficulty", [1, 6, 10])
def test_jumps_go_back_to_a_counted_loop(difficulty):
    program = env.generate(11, difficulty)["program"]
    for line, (op, register, target) in enumerate(program, start=1):
        if op == "jnz":
            assert register in ("c", "d") and target < line
            assert program[line - 2] == ["sub", register, 1]
        else:
            assert op == "set" or register in ("a", "b") or target == 1


@pytest.mark.parametrize(("value", "start"), [(7, 7), (-1, 999), (123456, 456), (10**100, 0)])
def test_generate_from_sets_register_a(value, start):
    assert env.generate_from(value, 2, 5)["initial"]["a"] == start
