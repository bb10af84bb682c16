"""A judge trusted only when it is right: every arena step measures the judge on groups the
verifier already separates; a judge right 90% of the time earns trust and the arena rescues
groups, one at chance stands aside (and is not called again until it is re-tested)."""

import random
import re

from test_arena import FirstJudge, shown

from evoenv_cli.config import ArenaConfig
from evoenv_cli.llm.base import BaseBackend, Completion, Generation
from evoenv_cli.training.arena import Arena, backend_judge
from evoenv_cli.training.progress import step_line

SIZE = 4


class RightJudge(BaseBackend):
    """Names the trace of higher `quality N` with probability `right`, else the other one."""

    name = "scripted"
    model = "right-judge"

    def __init__(self, right: float, seed: int = 0):
        self.right, self.rng, self.calls = right, random.Random(seed), 0

    def generate(self, prompts, sampling, *, prompt_ids=None):
        self._check(prompts, sampling, prompt_ids)
        out = []
        for conv in prompts:
            self.calls += 1
            both = shown(conv[-1]["content"])
            qa, qb = (int(re.search(r"quality (\d+)", both[x]).group(1)) for x in "AB")
            better, worse = ("A", "B") if qa > qb else ("B", "A")
            out.append(
                Generation(
                    [Completion(f"VERDICT: {better if self.rng.random() < self.right else worse}", 3, "stop")], 9
                )
            )
        return out


def step_batch(step: int, separated: int = 4, tied: int = 4):
    """Groups of SIZE traces saying their quality: `separated` groups the verifier scores by it
    (quality 3 and 4 right), `tied` groups all wrong (zero variance): a prompt each."""
    completions, keys, rewards = [], [], []
    for g in range(separated + tied):
        order = random.Random(f"{step}:{g}").sample(range(1, SIZE + 1), SIZE)
        for q in order:
            completions.append(f"quality {q}\nsome reasoning {q * 7 % 13}")
            keys.append(f"env:{step}{g}:1")
            rewards.append(float(q >= 3) if g < separated else 0.0)
    return rewards, ["the task"] * len(rewards), completions, keys


def test_a_judge_right_90_percent_of_the_time_earns_trust_and_rescues_groups():
    judge = RightJudge(0.9)
    arena = Arena(ArenaConfig(), SIZE, backend_judge(judge))
    logged = {}
    rescued = 0
    for step in (1, 2, 3):
        rewards, *rest = step_batch(step)
        new = arena.rescore(rewards, *rest, step=step, log_metric=logged.__setitem__)
        assert arena.last.probe_calls == 4 * 2  # a pair per separated group, both orders
        rescued += arena.last.rescued
        # groups the verifier separates are never touched
        assert all(n == r for n, r in zip(new[: 4 * SIZE], rewards[: 4 * SIZE]))
    a = arena.agreement()
    assert a["decisive"] == 24 and a["agreement"] > 0.75 and a["trusted"] and a["ci95"][0] > 0.5
    assert arena.last.trusted == 1 and rescued >= 4  # trusted from its first 8 verdicts on: 4 tied groups a step
    assert logged["arena/judge_trusted"] == 1.0 and logged["arena/judge_agreement"] == a["agreement"]
    line = step_line(3, 3, 1.0, logged, 0.0)
    assert f"judge agrees {a['agreement']:.2f}" in line and "arena off" not in line


def test_a_judge_at_chance_stands_aside_and_is_only_re_tested_later():
    judge = FirstJudge()  # names the first trace whatever the order: agrees on exactly half
    arena = Arena(ArenaConfig(retest_every=3), SIZE, backend_judge(judge))
    calls, logged = [], {}
    for step in range(1, 8):
        rewards, *rest = step_batch(step)
        before = judge.calls
        new = arena.rescore(rewards, *rest, step=step, log_metric=logged.__setitem__)
        calls.append(judge.calls - before)
        assert new == rewards and arena.last.rescued == 0 and arena.last.off == 1
        assert arena.last.judge_calls == 0  # no tournament: the zero-variance groups cost nothing
    assert calls == [8, 0, 0, 8, 0, 0, 8]  # probed at steps 1, 4 and 7 only
    a = arena.agreement()
    assert a["agreement"] == 0.5 and not a["trusted"] and a["p_value"] > 0.05
    assert logged["arena/judge_trusted"] == 0.0
    assert "judge at chance: arena off" in step_line(7, 7, 1.0, logged, 0.0)
    assert arena.summary()["steps_off"] == 7 and arena.summary()["judge_agreement"]["decisive"] == 24


def test_a_right_judge_with_nothing_separated_yet_is_not_trusted_unmeasured():
    arena = Arena(ArenaConfig(), SIZE, backend_judge(RightJudge(1.0)))
    rewards, *rest = step_batch(1, separated=0)
    assert arena.rescore(rewards, *rest, step=1) == rewards and arena.last.off == 1
    assert arena.agreement()["agreement"] is None
    logged = {}
    arena.rescore(rewards, *rest, step=2, log_metric=logged.__setitem__)
    assert step_line(2, 2, 1.0, logged, 0.0).endswith("judge unmeasured: arena off | ETA 0s")


def test_bench_arena_prints_the_agreement_beside_rescued_share():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_arena.py"
    spec = importlib.util.spec_from_file_location("bench_arena", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    arena = Arena(ArenaConfig(retest_every=3), SIZE, backend_judge(FirstJudge()))
    for step in (1, 2):
        arena.rescore(*step_batch(step), step=step)
    text = bench.agreement_text(arena.summary())
    assert text.startswith("agreement=0.50[") and " n=8 " in text and text.endswith("judge=at_chance steps_off=2")
    assert bench.agreement_text({}) == "agreement=- n=0 judge=at_chance steps_off=0"
