"""Environments collude in a PARALLEL composite: a part's seed is the composite's seed times
1000003 plus its index, so part 1 can compute part 2's instance and state its answer in its own
prompt. Each part alone is clean and validate's checks on the composite see only the joint
answer; compose now reads every part's answer against the composite's prompt. The colluding
pairs come from a generator (the form the answer is stated in varies). Part 2 sums squares: a
plain sum is what the arithmetic leak solver computes from its own prompt, a leak of its own
that compose's per-part probe rejects first."""

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

PART_TWO = """import random
NAME = "zeta_sum"
ANSWER_TYPE = "int"
def generate(seed, difficulty):
    r = random.Random(f"zeta:{seed}")
    return {"numbers": [r.randint(300, 999) for _ in range(3 + difficulty)]}
def prompt(instance):
    return "Add up the squares of: " + ", ".join(map(str, instance["numbers"])) + ". Give the sum."
def solve(instance):
    return str(sum(n * n for n in instance["numbers"]))
def score(instance, answer):
    a = answer.strip()
    return 1.0 if a.isdigit() and int(a) == sum(n * n for n in instance["numbers"]) else 0.0
"""

PART_ONE = """import random
NAME = "alpha_rev"
ANSWER_TYPE = "int"
def _zeta(seed, difficulty):
    r = random.Random(f"zeta:{seed}")
    return sum(r.randint(300, 999) ** 2 for _ in range(3 + difficulty))
def generate(seed, difficulty):
    r = random.Random(f"alpha:{seed}")
    return {"n": r.randint(1000, 10 ** (difficulty + 3)), "k": r.randint(11, 97), "s": seed, "d": difficulty}
def prompt(instance):
    other = _zeta(instance["s"] + 1, instance["d"])
    return "Reverse the digits of " + str(instance["n"]) + ", then add " + str(instance["k"]) + "." + HINT_HERE
def solve(instance):
    return str(int(str(instance["n"])[::-1]) + instance["k"])
def score(instance, answer):
    return 1.0 if answer.strip() == solve(instance) else 0.0
"""
HINTS = (
    '" (Batch " + f"{other:,}" + ".)"',
    '" Ticket: " + str(other) + "."',
    '" [" + str(other)[:2] + " " + str(other)[2:] + "]"',
)


def compose_pair(tmp_path: Path, hint: str) -> dict:
    lib = tmp_path / "lib"
    lib.mkdir(parents=True)
    (lib / "alpha_rev.py").write_text(PART_ONE.replace("HINT_HERE", hint))
    (lib / "zeta_sum.py").write_text(PART_TWO)
    out = tmp_path / "out"
    exe = Path(sys.executable).with_name("evoenv")
    args = [str(exe), "compose", str(lib), "--out", str(out), "--n", "1", "--ops", "parallel", "--json"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    (verdict,) = [json.loads(x) for x in (out / "verdicts.jsonl").read_text().splitlines() if x.strip()]
    return verdict


@pytest.mark.slow
@pytest.mark.parametrize("family_seed", [1, 2])
def test_a_part_that_states_another_parts_answer_is_a_leak(tmp_path, family_seed):
    hint = random.Random(family_seed).choice(HINTS)
    verdict = compose_pair(tmp_path, hint)
    # rejected by the per-part check, which runs only on a composite validate.judge admitted:
    # the old compose admitted it
    assert verdict["stage"] == "leak" and verdict["probe"].startswith("leak_parallel_part_2_"), verdict["reason"]
    assert "part 2's answer" in verdict["reason"]


@pytest.mark.slow
def test_the_same_pair_without_the_hint_is_admitted(tmp_path):
    verdict = compose_pair(tmp_path, '""')
    assert verdict["admitted"], verdict["reason"]
