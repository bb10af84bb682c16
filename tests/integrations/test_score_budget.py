"""A completion costs only itself: the reward's score calls run under a CPU budget measured from
the environment's reference, so completions that make `score` run away (catastrophic regex
backtracking, allocations and loops sized by the answer) are paid 0 alone, their neighbours are
scored by the same worker, `give_up_after` never zeroes a correct answer, and the environment is
quarantined with the reason. The hostile environments come from a generator, not a list."""

import json
import random
import textwrap
import time
from pathlib import Path

import pytest

from evoenv_cli.envfile import EnvFile
from evoenv_cli.integrations.rewards import EnvReward
from evoenv_cli.runtime.workers import Call, Limits, SandboxWorkers

TEMPLATE = """import random
import re
NAME = "NAME_HERE"
def generate(seed, difficulty):
    r = random.Random(seed)
    return {"word": "".join(r.choice("xyz") for _ in range(6)), "n": r.randint(1, 99)}
def prompt(instance):
    return "Write the word and then the number: " + instance["word"] + " " + str(instance["n"])
def solve(instance):
    return instance["word"] + str(instance["n"])
def score(instance, answer):
TRAP_HERE
    return 1.0 if answer == solve(instance) else 0.0
"""

# (trap in score, the completion that springs it); {c} a letter, {e} a char that ends a match
REGEX_NESTS = ("({c}+)+{e}", "({c}|{c}{c})+{e}", "({c}*{c}*)+{e}", "(?:{c}+{c}?)+{e}")
SIZED = (
    "    data = [k * k for k in range(int(answer))] if answer.isdigit() else []\n",
    "    seen = {{str(k) for k in range(int(answer))}} if answer.isdigit() else set()\n",
    "    acc = 0\n    for k in range(int(answer) if answer.isdigit() else 0):\n        acc += k % 7\n",
)


def hostile_source(rng: random.Random, name: str, swallow: bool = False) -> tuple[str, str]:
    """One environment whose score runs away on some completions, and one such completion.
    `swallow`: the trap catches every exception and starts again (only a kill stops it)."""
    if rng.random() < 0.5:
        c, e = rng.choice("abcdefgh"), rng.choice("!#%&")
        nest = rng.choice(REGEX_NESTS).format(c=c, e=e)
        trap = f"    if re.fullmatch(r'{nest}', answer):\n        return 0.0\n"
        bad = c * rng.randint(34, 40) + rng.choice("?@~")
    else:
        trap = rng.choice(SIZED)
        bad = str(rng.randint(10**9, 10**10))
    if swallow:
        body = textwrap.indent(trap, " " * 8)
        trap = (
            f"    while True:\n        try:\n{body}            break\n        except BaseException:\n            pass\n"
        )
    return TEMPLATE.replace("NAME_HERE", name).replace("TRAP_HERE", trap.rstrip("\n")), bad


def env_of(tmp_path: Path, source: str, name: str) -> EnvFile:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return EnvFile.from_path(path)


def batch(rng: random.Random, bad: str, n: int = 32, n_bad: int = 8, head: int = 3):
    """n rows of generated instances; n_bad of them answered by `bad` (the first `head` rows among
    them), the rest correctly. Returns (completions, instances, which are bad)."""
    instances, completions, bad_at = [], [], set(range(head))
    bad_at |= set(rng.sample(range(head, n), n_bad - head))
    for k in range(n):
        r = random.Random(rng.randrange(10**9))
        inst = {"word": "".join(r.choice("xyz") for _ in range(6)), "n": r.randint(1, 99)}
        instances.append(json.dumps(inst))
        answer = bad if k in bad_at else inst["word"] + str(inst["n"])
        completions.append(f"<answer>{answer}</answer>")
    return completions, instances, bad_at


def test_generator_springs_its_traps():
    """The family is what it says: every trap, unbudgeted, runs past a 0.2 s limit (so the old
    scorer paid each its full time limit)."""
    rng = random.Random(7)
    for k in range(6):
        source, bad = hostile_source(rng, f"trap_{k}")
        namespace: dict = {}
        exec(compile(source, f"trap_{k}", "exec"), namespace)
        inst = namespace["generate"](k, 1)
        assert namespace["score"](inst, namespace["solve"](inst)) == 1.0
    source, bad = hostile_source(random.Random(3), "trap_slow")
    with SandboxWorkers(Limits(score_s=0.2, grace_s=0.0), workers=1) as pool, _tmp_env(source) as env:
        (r,) = pool.run(env, [Call.score({"word": "xyzxyz", "n": 5}, bad)])
    assert r.status == "timeout"


class _tmp_env:
    def __init__(self, source: str):
        import tempfile

        self.dir = tempfile.TemporaryDirectory()
        self.source = source

    def __enter__(self) -> EnvFile:
        return env_of(Path(self.dir.name), self.source, "trap_env")

    def __exit__(self, *exc) -> None:
        self.dir.cleanup()


@pytest.mark.parametrize("family_seed", [11, 12, 13])
def test_pathological_completions_cost_only_themselves(tmp_path, family_seed):
    rng = random.Random(family_seed)
    source, bad = hostile_source(rng, f"hostile_{family_seed}")
    env = env_of(tmp_path, source, f"hostile_{family_seed}")
    reward = EnvReward([env], recheck_share=0.0, workers=1, quarantine_log=tmp_path / "q.jsonl")
    try:
        clean, clean_inst, _ = batch(random.Random(1), bad, n_bad=0, head=0)
        reward.details(clean, [env.env_id] * 32, clean_inst)  # warm: worker started, budget measured
        t0 = time.perf_counter()
        out = reward.details(clean, [env.env_id] * 32, clean_inst)
        clean_s = time.perf_counter() - t0
        assert [d["score"] for d in out] == [1.0] * 32
        completions, instances, bad_at = batch(rng, bad)
        t0 = time.perf_counter()
        out = reward.details(completions, [env.env_id] * 32, instances)
        hostile_s = time.perf_counter() - t0
        for k, d in enumerate(out):
            if k in bad_at:
                assert d["score"] == 0.0 and d["status"] == "score_timeout", (k, d)
            else:
                assert d["score"] == 1.0 and d["status"] == "scored", (k, d)  # every correct answer paid
        # the ratio itself is `make bench`'s (bench reward budget:); here only far below the old
        # cost, 8 full time limits (12 s)
        assert hostile_s < clean_s + 3.0, (hostile_s, clean_s)
        assert reward.pool.spawned == 1, "a runaway score killed the worker"
        # quarantined with the reason, from the next request on
        assert env.env_id in reward.audit.quarantined
        assert "ran out of time on 8 completions" in reward.audit.quarantined[env.env_id]["reason"]
        again = reward.details(clean[:2], [env.env_id] * 2, clean_inst[:2])
        assert [d["status"] for d in again] == ["quarantined"] * 2
        logged = [json.loads(line) for line in (tmp_path / "q.jsonl").read_text().splitlines()]
        assert [rec["env_id"] for rec in logged] == [env.env_id]
    finally:
        reward.close()


def test_an_honest_slow_score_is_not_timed_out(tmp_path):
    """The budget is the reference's own time times 20: a score that is slow on every answer,
    the reference's included, pays its correct answers (no false timeouts)."""
    source = TEMPLATE.replace("NAME_HERE", "slow_honest").replace(
        "TRAP_HERE", "    acc = 0\n    for k in range(60000):\n        acc += k % 7"
    )
    env = env_of(tmp_path, source, "slow_honest")
    reward = EnvReward([env], recheck_share=0.0, workers=1)
    try:
        clean, clean_inst, _ = batch(random.Random(2), "", n_bad=0, head=0)
        long_wrong = [f"<answer>{'x' * 5000}</answer>"] * 4  # long answers get a longer budget
        out = reward.details(clean + long_wrong, [env.env_id] * 36, clean_inst + clean_inst[:4])
        assert [d["score"] for d in out] == [1.0] * 32 + [0.0] * 4
        assert [d["status"] for d in out] == ["scored"] * 36
        assert reward.budgets.budgets[env.env_id].base_s > 0.001
    finally:
        reward.close()


@pytest.mark.slow
def test_give_up_after_never_zeroes_correct_answers(tmp_path):
    """Old: three killed workers at the head of a chunk skipped the other 29 (paid 0 in silence).
    New: a trap that swallows the budget's exception is killed at the wall limit, item by item,
    and every correct answer after it is paid."""
    rng = random.Random(5)
    source, bad = hostile_source(rng, "swallowing", swallow=True)
    env = env_of(tmp_path, source, "swallowing")
    completions, instances, bad_at = batch(rng, bad, n_bad=3, head=3)
    answers = [c[len("<answer>") : -len("</answer>")] for c in completions]
    limits = Limits(score_s=0.3, grace_s=0.2)
    with SandboxWorkers(limits, workers=1) as pool:  # the old calls: no budget
        old = pool.run(env, [Call.score(json.loads(i), a) for i, a in zip(instances, answers)])
    assert [r.status for r in old[:3]] == ["timeout"] * 3
    assert all(r.status == "skipped" for r in old[3:]), "the old pool no longer gives up: this test shows nothing"
    reward = EnvReward([env], recheck_share=0.0, workers=1, limits=limits)
    try:
        out = reward.details(completions, [env.env_id] * 32, instances)
        assert [d["status"] for d in out[:3]] == ["score_timeout"] * 3
        assert [d["score"] for d in out[3:]] == [1.0] * 29
        assert env.env_id in reward.audit.quarantined
    finally:
        reward.close()


# TEMPLATE's environment, whose first wrong answer meets a pause once (a collection, page
# faults): noise that does not come back, whether or not the budget stops the call
COLD_ON_WRONG = TEMPLATE.replace('NAME = "NAME_HERE"', 'NAME = "cold_on_wrong"\n_warm = []').replace(
    "TRAP_HERE",
    "    if answer != solve(instance) and not _warm:\n"
    "        _warm.append(1)\n"
    "        for _ in range(600_000):\n"
    "            pass",
)


def test_a_cold_first_call_is_retried_not_counted_against_an_honest_environment(tmp_path):
    """An honest score whose first wrong answer meets a one-off pause (~30 ms): the budget,
    measured on references, is a millisecond or two, so that call runs out of it. It is run once
    more before it counts: every item is scored and no timeout counts toward quarantine (CI saw
    one honest call in 20 time out, and three quarantine an environment). What the retry does
    not mend: a cold start the budget interrupts (a lazy import cut short) starts again in the
    retry and runs out again, paid 0 like a runaway score."""
    env = env_of(tmp_path, COLD_ON_WRONG, "cold_on_wrong")
    reward = EnvReward([env], recheck_share=0.0, workers=1)
    try:
        completions, instances, bad_at = batch(random.Random(4), "wrong", n=8, n_bad=2, head=1)
        out = reward.details(completions, [env.env_id] * 8, instances)
        assert reward.budgets.budgets[env.env_id].base_s < 0.02  # the cold call (~30 ms) is over it
        assert [d["status"] for d in out] == ["scored"] * 8, out
        assert [d["score"] for d in out] == [0.0 if k in bad_at else 1.0 for k in range(8)]
        assert reward.score_timeouts[env.env_id] == 0
    finally:
        reward.close()
