"""register_machine: a hand-traced program, modular wrap-around, loop structure and
generate_from's initial register."""

import importlib.util
from itertools import pairwise
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


def test_level_one_is_one_instruction_on_single_digits():
    for seed in range(50):
        instance = env.generate(seed, 1)
        [(op, register, operand)] = instance["program"]
        assert op in ("add", "sub", "mul") and register == instance["ask"]
        assert all(0 <= value <= 9 for value in instance["initial"].values())
        assert operand in ("a", "b") or 1 <= operand <= 9 or operand in env._MULTIPLIERS


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4])
def test_the_asked_register_is_one_the_program_writes(difficulty):
    for seed in range(50):
        instance = env.generate(seed, difficulty)
        assert any(line[1] == instance["ask"] for line in instance["program"])


def test_programs_grow_to_level_ten_and_loops_start_at_three():
    programs = {d: [env.generate(seed, d)["program"] for seed in range(30)] for d in range(1, 11)}
    assert not any(line[0] == "jnz" for d in (1, 2) for p in programs[d] for line in p)
    assert any(line[0] == "jnz" for p in programs[3] for line in p)
    shortest = [min(len(p) for p in programs[d]) for d in range(1, 11)]
    assert all(a < b for a, b in pairwise(shortest)) and shortest[0] == 1
    assert shortest[-1] >= 3 + 4 * 10
    largest = [max(env.generate(s, d)["initial"]["b"] for s in range(30)) for d in range(1, 11)]
    assert all(a < b for a, b in pairwise(largest)) and largest[-1] <= 999
