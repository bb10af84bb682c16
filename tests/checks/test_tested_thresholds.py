"""Thresholds are tested, not compared strictly: a prompt-only solver that finds the answer on
exactly half the instances, far above its chance rate, is a leak (it passed `> 50%`). The
environments come from a generator: the answer is written, in one of the forms the solvers read,
on the lower half of the levels only."""

import random

import pytest

from evoenv_cli.config import ValidateConfig
from evoenv_cli.envfile import EnvFile
from evoenv_cli.runtime.workers import SandboxWorkers
from evoenv_cli.stages import validate

TEMPLATE = """import random
NAME = "NAME_HERE"
WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
def generate(seed, difficulty):
    r = random.Random(seed)
    return {"n": r.randint(1000, 10 ** (difficulty + 3)), "k": r.randint(11, 97), "level": difficulty}
def solve(instance):
    return str(int(str(instance["n"])[::-1]) + instance["k"])
def prompt(instance):
    text = "Reverse the digits of " + str(instance["n"]) + ", then add " + str(instance["k"]) + "."
    if instance["level"] <= HALF_HERE:
        answer = int(solve(instance))
        text += FORM_HERE
    return text
def score(instance, answer):
    return 1.0 if answer.strip() == solve(instance) else 0.0
"""
FORMS = {
    "thousands": '" (about " + f"{answer:,}" + ")"',
    "split_digits": '" It starts " + str(answer)[:2] + " and ends " + str(answer)[2:] + "."',
    "fullwidth": '" [" + str(answer).translate({ord(c): ord(c) + 0xFEE0 for c in "0123456789"}) + "]"',
}


def half_leak(rng: random.Random, name: str, levels: list[int]) -> tuple[str, str]:
    form = rng.choice(sorted(FORMS))
    half = sorted(levels)[len(levels) // 2 - 1]
    text = TEMPLATE.replace("NAME_HERE", name).replace("HALF_HERE", str(half)).replace("FORM_HERE", FORMS[form])
    return text, form


@pytest.mark.slow
@pytest.mark.parametrize("family_seed", [1, 2, 3])
def test_a_leak_on_exactly_half_the_levels_is_a_leak(tmp_path, family_seed):
    cfg = ValidateConfig(sample_seed_instances=0)  # exactly half of the instances: 15 of 30
    name = f"half_{family_seed}"
    text, form = half_leak(random.Random(family_seed), name, cfg.levels)
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    with SandboxWorkers(workers=1) as pool, SandboxWorkers(workers=1, hash_seed=1) as fresh:
        verdict = validate.judge(EnvFile.from_path(path), cfg, pool, fresh, name)
    assert not verdict.admitted and verdict.stage == "leak", verdict.reason
    share, baseline = verdict.measurements["leak_solver_share"][form]
    # the old rule, share > max_leak_share, let exactly half through
    assert share == 0.5 and not share > cfg.max_leak_share and baseline < 0.1, (share, baseline)
    assert verdict.measurements["probe"].startswith("leak_solver_")
