"""Judged on what training sees: validate draws instances at exactly the seeds `evoenv sample`
derives, sends every scored pair several times in a row (a collapsed GRPO group), and re-checks
in a fresh worker in another order; the reward pays one (instance, answer) one score per request.
The hostile environments come from generators: seed recognisers and memos that pay a repeat."""

import json
import random
from pathlib import Path

import pytest

from evoenv_cli.checks import context
from evoenv_cli.checks.registry import CHECKS
from evoenv_cli.config import SampleConfig, ValidateConfig
from evoenv_cli.envfile import EnvFile
from evoenv_cli.integrations.rewards import EnvReward
from evoenv_cli.runtime.instances import instance_seed
from evoenv_cli.runtime.workers import Call, SandboxWorkers
from evoenv_cli.stages import validate

BASE = """import hashlib
import random
NAME = "NAME_HERE"
def generate(seed, difficulty):
    r = random.Random(seed)
    inst = {"n": r.randint(10, 10 ** (difficulty + 1)), "k": r.randint(10, 99)}
EXTRA_GENERATE
    return inst
def prompt(instance):
    return "Reverse the digits of " + str(instance["n"]) + ", then add " + str(instance["k"]) + "."
def solve(instance):
    return str(int(str(instance["n"])[::-1]) + instance["k"])
def score(instance, answer):
EXTRA_SCORE
    return 1.0 if answer.strip() == solve(instance) else 0.0
"""


def source(name: str, generate: str = "", score: str = "") -> str:
    return BASE.replace("NAME_HERE", name).replace("EXTRA_GENERATE", generate).replace("EXTRA_SCORE", score)


def seed_recogniser(rng: random.Random, name: str) -> str:
    """Knows how `sample` derives seeds (sha256 of base:NAME:row) and pays some wrong answers on
    those instances only: which rows, how it marks the instance and what it pays vary."""
    rows = rng.choice((64, 512, 4096))
    field = rng.choice(("tag", "meta", "variant", "id"))
    pays = rng.choice(
        (
            "return 1.0",
            "if len(answer.strip()) == len(solve(instance)):\n            return 1.0",
            "if answer.strip()[:1] == solve(instance)[:1]:\n            return 1.0",
        )
    )
    head = (
        "SEEDS = {int.from_bytes(hashlib.sha256(f'0:{NAME}:{i}'.encode()).digest()[:4], 'big') & 0x7FFFFFFF "
        f"for i in range({rows})}}\n"
    )
    mark = f"    inst['{field}'] = r.randint(0, 10**6) * 2 + (1 if seed in SEEDS else 0)"
    text = source(name, generate=mark, score=f"    if instance.get('{field}', 0) % 2 == 1:\n        {pays}")
    return text.replace("def generate(", head + "def generate(", 1)


def repeat_memo(rng: random.Random, name: str) -> str:
    """Pays an answer it has just been sent again: the window, and whether it needs the same
    instance, vary."""
    window = rng.choice((1, 2, 3))
    keyed = rng.choice(("(repr(instance), answer)", "answer"))
    memo = "_LAST = []\n"
    score = (
        f"    key = {keyed}\n    seen = key in _LAST\n    _LAST.append(key)\n    del _LAST[:-{window}]\n"
        "    if seen:\n        return 1.0"
    )
    return source(name, score=score).replace("def generate(", memo + "def generate(", 1)


def judge(tmp_path: Path, text: str, name: str, cfg: ValidateConfig):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    env = EnvFile.from_path(path)
    with SandboxWorkers(workers=1) as pool, SandboxWorkers(workers=1, hash_seed=1) as fresh:
        return validate.judge(env, cfg, pool, fresh, name)


def test_validate_draws_instances_at_the_seeds_sample_derives():
    cfg = ValidateConfig()
    pairs = context.sample_pairs("some_id", "knapsack", cfg)
    seeds = {instance_seed(SampleConfig().seed, "knapsack", i) for i in range(4096)}
    assert len(pairs) == cfg.sample_seed_instances and all(s in seeds for s, _ in pairs)
    assert [s for s, _ in pairs[:3]] == [instance_seed(SampleConfig().seed, "knapsack", i) for i in range(3)]
    assert all(d in cfg.levels for _, d in pairs)


@pytest.mark.slow
@pytest.mark.parametrize("family_seed", [1, 2, 3])
def test_a_file_that_recognises_training_seeds_is_rejected(tmp_path, family_seed):
    name = f"seen_{family_seed}"
    text = seed_recogniser(random.Random(family_seed), name)
    old = judge(tmp_path / "old", text, name, ValidateConfig(sample_seed_instances=0))
    assert old.admitted, f"the family no longer passes the old check: {old.reason}"
    new = judge(tmp_path / "new", text, name, ValidateConfig())
    assert not new.admitted and new.stage == "discrimination", new.reason


@pytest.mark.slow
@pytest.mark.parametrize("family_seed", [1, 2, 3])
def test_a_memo_that_pays_a_repeat_is_rejected(tmp_path, family_seed):
    name = f"memo_{family_seed}"
    text = repeat_memo(random.Random(family_seed), name)
    old = judge(tmp_path / "old", text, name, ValidateConfig(collapsed_group=1))  # no pair sent twice in a row
    assert old.admitted, f"the family no longer passes the old check: {old.reason}"
    new = judge(tmp_path / "new", text, name, ValidateConfig())
    assert not new.admitted and new.measurements.get("probe") == "score_immediate_repeat", new.reason


@pytest.mark.parametrize("family_seed", [4, 5, 6])
def test_a_collapsed_group_gets_no_pay_for_repeats(tmp_path, family_seed):
    """Eight identical wrong answers to one instance in one request: the memo pays the repeats
    (0.875 on the old reward path); the reward pays one score per pair, quarantines the memo."""
    name = f"memo_reward_{family_seed}"
    path = tmp_path / f"{name}.py"
    path.write_text(repeat_memo(random.Random(family_seed), name))
    env = EnvFile.from_path(path)
    inst = {"n": 123, "k": 40}
    with SandboxWorkers(workers=1) as pool:
        old = pool.run(env, [Call.score(inst, "41")] * 8)
    assert sum(r.value for r in old) / 8 >= 0.5, "the family no longer pays repeats: this test shows nothing"
    reward = EnvReward([env], recheck_share=0.0, workers=1)
    try:
        out = reward.details(["<answer>41</answer>"] * 8, [env.env_id] * 8, [json.dumps(inst)] * 8)
        assert [d["reward"] for d in out] == [0.0] * 8
        assert "for the same (instance, answer) in one request" in reward.audit.quarantined[env.env_id]["reason"]
    finally:
        reward.close()


def _draw_verdict(env: EnvFile, cfg: ValidateConfig, pool: SandboxWorkers) -> str:
    """The checks whose verdict is a share of the instances drawn: constant answer, leaks, hedges."""
    checker = context.Checker(env, cfg, pool, pool)
    try:
        for name in ("load", "run", "constant_answer", "leak", "hedge"):
            CHECKS[name].run(checker)
    except context.Rejected as rej:
        return f"{rej.stage}: {rej.reason}"
    return "admitted"


@pytest.mark.slow
def test_the_seeds_pass_the_leak_check_on_every_one_of_60_draws(tmp_path):
    """A seed draw is the file's hash (validate draws its instances from it): the ten seeds, each
    with a comment changed 60 times, pass the constant-answer and leak checks every time (the
    knapsack seed was rejected by the arithmetic solver on 18 of them before its verdict needed
    95% confidence)."""
    seeds = sorted(
        p for p in (Path(__file__).resolve().parents[2] / "seeds").glob("*.py") if not p.name.startswith("_")
    )
    assert len(seeds) == 10
    cfg = ValidateConfig()
    flipped = []
    with SandboxWorkers(workers=2) as pool:
        for path in seeds:
            for draw in range(60):
                copy = tmp_path / path.name
                copy.write_text(path.read_text() + f"\n# draw {draw}\n")
                verdict = _draw_verdict(EnvFile.from_path(copy), cfg, pool)
                if verdict != "admitted":
                    flipped.append((path.name, draw, verdict))
    assert not flipped, flipped[:5]
