"""The reward path against a verifier that turns hostile after a number of calls: workers are
replaced after `max_calls_per_worker` calls, a share of rewards is re-checked in a fresh
worker, a disagreement quarantines the environment (logged, 0 from then on), and the loop
drops it from the pool at the next round. Real sandboxed workers throughout."""

import json
from pathlib import Path

import pytest
from conftest import SEEDS

from evoenv_cli.artifacts import EnvLibrary, write_jsonl_atomic
from evoenv_cli.config import RuntimeConfig
from evoenv_cli.envfile import EnvFile
from evoenv_cli.integrations.reward_audit import QUARANTINE_FILE
from evoenv_cli.integrations.rewards import EnvReward
from evoenv_cli.pool import EnvPool
from evoenv_cli.runtime.session import Runtime
from evoenv_cli.runtime.workers import Call, Limits, SandboxWorkers

COUNTING = b"""import random
NAME = "counting_env"
_CALLS = [0]
def generate(seed, difficulty):
    return {"n": random.Random(seed).randint(0, 99)}
def prompt(instance):
    return "Give n."
def solve(instance):
    return str(instance["n"])
def score(instance, answer):
    _CALLS[0] += 1
    if _CALLS[0] > LENIENT_AFTER:
        return 1.0
    return 1.0 if answer.strip() == solve(instance) else 0.0
"""


def env_file(tmp_path: Path, lenient_after: int, name: str = "counting_env") -> EnvFile:
    source = COUNTING.replace(b"LENIENT_AFTER", str(lenient_after).encode()).replace(b"counting_env", name.encode())
    path = tmp_path / f"{name}.py"
    path.write_bytes(source)
    return EnvFile.from_path(path)


def rows(n: int, wrong: bool = True) -> tuple[list[str], list[str]]:
    instances = [json.dumps({"n": k % 100}) for k in range(n)]
    answers = [f"<answer>{(k % 100) + (1 if wrong else 0)}</answer>" for k in range(n)]
    return answers, instances


def test_workers_are_replaced_after_a_bounded_number_of_calls(tmp_path):
    env = env_file(tmp_path, lenient_after=60)
    with SandboxWorkers(Limits(max_calls_per_worker=50), workers=1) as pool:
        results = pool.run(env, [Call.score({"n": 1}, "wrong")] * 300)
        assert all(r.ok and r.value == 0.0 for r in results), "a worker lived past 50 calls"
        assert pool.spawned >= 6
    with SandboxWorkers(Limits(max_calls_per_worker=0), workers=1) as pool:  # 0: never replaced
        results = pool.run(env, [Call.score({"n": 1}, "wrong")] * 100)
        assert sum(r.value for r in results) == 40.0 and pool.spawned == 1


@pytest.mark.parametrize("borrowed", [False, True], ids=["own_pool", "loop_runtime"])
def test_a_disagreeing_recheck_quarantines_the_environment(tmp_path, borrowed):
    """Also when the reward scores on a program's shared Runtime (the loop's): the re-checks
    still run in fresh workers of their own, and closing the reward leaves the Runtime open."""
    hostile = env_file(tmp_path, lenient_after=30)
    honest = env_file(tmp_path, lenient_after=10**9, name="honest_env")
    log = tmp_path / QUARANTINE_FILE
    runtime = Runtime(RuntimeConfig(workers=1)) if borrowed else None
    reward = EnvReward(
        [hostile, honest], recheck_share=1.0, quarantine_log=log, workers=1, pool=runtime.workers if runtime else None
    )
    try:
        completions, instances = rows(20)
        assert reward(completions=completions, env_id=[hostile.env_id] * 20, instance=instances) == [0.0] * 20
        assert not reward.audit.quarantined
        # calls 21..40 in the long-lived worker: the last ten pay wrong answers, fresh workers do not
        out = reward.details(completions, [hostile.env_id] * 20, instances)
        assert [d["status"] for d in out] == ["quarantined"] * 20 and all(d["reward"] == 0.0 for d in out)
        assert list(reward.audit.quarantined) == [hostile.env_id]
        record = json.loads(log.read_text().splitlines()[0])
        assert record["env_id"] == hostile.env_id and "fresh worker" in record["reason"]
        # from then on it is not even scored; the honest one is unaffected by rechecks
        out = reward.details(completions, [hostile.env_id] * 20, instances)
        assert {d["status"] for d in out} == {"quarantined"}
        right = [f"<answer>{k % 100}</answer>" for k in range(20)]
        assert reward(completions=right, env_id=[honest.env_id] * 20, instance=instances) == [1.0] * 20
        assert reward.audit.checked >= 40 and list(reward.audit.quarantined) == [hostile.env_id]
        if runtime:
            # the re-checks never ran on the loop's workers: 60 rewards scored there, one call each
            measured = reward.budgets.measure_calls
            assert runtime.workers.calls == 60 and reward.sandbox_calls == 60 + reward.audit.checked + measured
            assert reward.audit.pool is not runtime.workers
            # one fresh worker per re-checked chunk (three requests scored), none reused, and one
            # per environment to measure its score budget
            assert reward.audit.pool.spawned == 3 + 2
            assert reward.audit.pool.plan.mode == runtime.workers.plan.mode
    finally:
        reward.close()
    if runtime:
        try:
            assert runtime.workers.run(honest, [Call.score({"n": 3}, "3")])[0].value == 1.0  # still open
        finally:
            runtime.close()
    # a resumed run reads the log back: still quarantined
    again = EnvReward([hostile, honest], recheck_share=0.0, quarantine_log=log)
    try:
        assert again.details(completions[:2], [hostile.env_id] * 2, instances[:2])[0]["status"] == "quarantined"
    finally:
        again.close()


def test_rechecks_of_honest_environments_never_quarantine(tmp_path):
    lib = EnvLibrary.open(SEEDS)
    reward = EnvReward(SEEDS, recheck_share=1.0, workers=1)
    try:
        from evoenv_cli.config import SampleConfig
        from evoenv_cli.stages import sample

        with SandboxWorkers() as pool:
            got = sample.run(lib, SampleConfig(per_env=2, seed=5), pool).rows
        mixed = [f"<answer>{r['answer'] if k % 2 else 'garbage'}</answer>" for k, r in enumerate(got)]
        scores = reward.score_rows(got, mixed)
        assert scores == [float(k % 2) for k in range(len(got))]
        assert reward.audit.checked == len(got) and not reward.audit.quarantined
    finally:
        reward.close()


def test_the_loop_drops_a_quarantined_environment_at_the_next_pool_update(tmp_path):
    """Round 1's training quarantined a pool member: round 2's planned pool swap (pool-next,
    pool-update.json, then applied) leaves it out, even where a later stage admitted it again,
    and the plan says so."""
    run = tmp_path / "run"
    loop = EnvPool(run, SEEDS)  # the loop's environment pool
    loop.init()
    pool = EnvLibrary.open(loop.root)
    victim = next(e for e in pool.files if e.name == "knapsack_max_value")
    (run / "round-01" / "train").mkdir(parents=True)
    (run / "round-01" / "train" / QUARANTINE_FILE).write_text(
        json.dumps({"env_id": victim.env_id, "file": victim.path.name, "reason": "score paid 1.0 but gave 0.0"}) + "\n"
    )
    rotated, admitted = tmp_path / "rotate", tmp_path / "dedupe"
    for d in (rotated, admitted):
        (d / "envs").mkdir(parents=True)
        write_jsonl_atomic(d / "index.jsonl", [])
    write_jsonl_atomic(rotated / "verdicts.jsonl", [])
    (admitted / "envs" / victim.path.name).write_bytes(victim.source)  # re-admitted by a later stage: still out
    write_jsonl_atomic(admitted / "index.jsonl", [{"file": victim.path.name, "env_id": victim.env_id}])
    d2 = run / "round-02"
    d2.mkdir()
    change = loop.write_next(d2, rotated, admitted, 2)
    assert change["quarantined"] == [{"name": "knapsack_max_value", "reason": "score paid 1.0 but gave 0.0"}]
    assert json.loads((d2 / "pool-update.json").read_text()) == change
    assert EnvLibrary.open(loop.root).files == pool.files  # nothing changed before the next pool is applied
    loop.apply(d2)
    names = {e.name for e in EnvLibrary.open(loop.root).files}
    assert "knapsack_max_value" not in names and len(names) == len(pool.files) - 1
    assert loop.write_next(d2, rotated, admitted, 2) == change  # a rerun replays the same change
