"""Reasoning Arena (`train.zero_variance: judge`): strict verdicts, the Bradley-Terry fit, a
scripted judge whose ranking must come back, the verifier's order never overturned, a failing
judge (scripted and a real unreachable server) leaving the rewards alone, bounded anchors that
survive a checkpoint, and the policy view over a model in memory. The tournament's tests set
`trust_alpha=1.0` (the judge used unmeasured); tests/training/test_arena_trust.py measures it."""

from __future__ import annotations

import json
import os
import random
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SEEDS

from evoenv_cli.artifacts import EnvLibrary
from evoenv_cli.config import ArenaConfig
from evoenv_cli.llm.base import BaseBackend, Completion, Generation, make_backend
from evoenv_cli.training.arena import (
    AnchorPool,
    Arena,
    Trace,
    backend_judge,
    fit_bradley_terry,
    judge_rewards,
    parse_verdict,
)

EXE = Path(sys.executable).with_name("evoenv")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
SOLUTION = re.compile(r"# Solution (A|B)\n(.*?)\n\n(?=# )", re.DOTALL)


def shown(prompt_text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in SOLUTION.finditer(prompt_text)}


class QualityJudge(BaseBackend):
    """Prefers the trace whose text says the higher `quality N` (ties on equal), always in the
    strict form; `flip` answers at random that often; `garbage` replies with free text. Its
    noise is a function of the prompt, so the same question gets the same answer however the
    questions are split between processes."""

    name = "scripted"
    model = "quality-judge"

    def __init__(self, flip: float = 0.0, garbage: float = 0.0, seed: int = 0):
        self.flip, self.garbage, self.seed = flip, garbage, seed
        self.calls = 0

    def generate(self, prompts, sampling, *, prompt_ids=None):
        self._check(prompts, sampling, prompt_ids)
        out = []
        for conv in prompts:
            self.calls += 1
            self.rng = random.Random(f"{self.seed}:{conv[-1]['content']}")
            both = shown(conv[-1]["content"])
            qa, qb = (int(re.search(r"quality (\d+)", both[x]).group(1)) for x in "AB")
            verdict = "A" if qa > qb else "B" if qb > qa else "TIE"
            if self.rng.random() < self.flip:
                verdict = self.rng.choice(["A", "B", "TIE"])
            text = f"Solution {verdict} is better.\nVERDICT: {verdict}"
            if self.rng.random() < self.garbage:
                text = "I think the first one, probably."
            out.append(Generation([Completion(text, 5, "stop")], 10))
        return out


class BrokenJudge(BaseBackend):
    name = "scripted"
    model = "broken"

    def generate(self, prompts, sampling, *, prompt_ids=None):
        raise RuntimeError("CUDA out of memory (scripted)")


class HalfFailingJudge(QualityJudge):
    """Every other request comes back as a failed generation (after the backend's retries)."""

    def generate(self, prompts, sampling, *, prompt_ids=None):
        gens = super().generate(prompts, sampling, prompt_ids=prompt_ids)
        return [g if i % 2 else Generation([Completion("", 0, "error")], 0, "HTTP 503") for i, g in enumerate(gens)]


def kendall(xs, ys) -> float:
    pairs = [(i, j) for i in range(len(xs)) for j in range(i + 1, len(xs))]
    agree = sum(((xs[i] - xs[j]) * (ys[i] - ys[j]) > 0) - ((xs[i] - xs[j]) * (ys[i] - ys[j]) < 0) for i, j in pairs)
    return agree / len(pairs)


def batch(qualities: list[list[int]], rewards: list[float] | None = None, prompts_per_key: int = 2):
    """Completions saying their quality, keys (two groups share a prompt), verifier rewards."""
    size = len(qualities[0])
    completions = [f"quality {q}\nsome reasoning {q * 7 % 13}" for g in qualities for q in g]
    keys = [f"env:{gi % prompts_per_key}:1" for gi in range(len(qualities)) for _ in range(size)]
    if rewards is None:
        rewards = [0.0] * len(completions)
    return rewards, ["the task"] * len(completions), completions, keys


@pytest.mark.parametrize(
    "text, verdict",
    [
        ("VERDICT: A", "A"),
        ("reasoning...\nVERDICT: B\n", "B"),
        ("VERDICT: TIE", "tie"),
        ("  verdict:  b  ", "B"),
        ("<think>VERDICT: A</think>\nVERDICT: B", "B"),
        ("VERDICT: A\nVERDICT: B", None),
        ("VERDICT: A\nand more", None),
        ("**VERDICT: A**", None),
        ("A", "A"),
        (" tie\n", "tie"),
        ("A.", None),
        ("A or B", None),
        ("VERDICT: C", None),
        ("", None),
        (None, None),
        ("<think>VERDICT: A", None),
        ("VERDICT: A is better", None),
    ],
)
def test_verdicts_parse_strictly(text, verdict):
    assert parse_verdict(text) == verdict


def test_bradley_terry_recovers_a_known_ranking_and_stays_finite_on_any_graph():
    truth = [3.0, -1.0, 0.5, 2.0, -2.0, 1.0]
    rng = random.Random(1)
    wins: dict = {}
    for _ in range(3000):  # games drawn from the true model on a sparse graph: each vs two others
        i = rng.randrange(6)
        j = (i + rng.choice([1, 2])) % 6
        p = 1 / (1 + 2.718281828 ** (truth[j] - truth[i]))
        w, lo = (i, j) if rng.random() < p else (j, i)
        wins[(w, lo)] = wins.get((w, lo), 0) + 1
    fit = fit_bradley_terry(6, wins, prior=1.0, max_iterations=5000, tolerance=1e-9)
    assert fit.converged and sorted(range(6), key=fit.scores.__getitem__) == sorted(range(6), key=truth.__getitem__)
    # unbeaten, winless, disconnected and isolated items all get finite scores, ordered sensibly
    fit = fit_bradley_terry(5, {(0, 1): 3.0, (2, 3): 0.5, (3, 2): 0.5}, prior=1.0)
    assert fit.converged and all(abs(s) < 10 for s in fit.scores)
    assert fit.scores[0] > fit.scores[4] > fit.scores[1]  # the isolated item sits at the prior's 0
    assert abs(fit.scores[2] - fit.scores[3]) < 1e-6 and abs(fit.scores[4]) < 1e-6
    with pytest.raises(ValueError):
        fit_bradley_terry(2, {}, prior=0)


@pytest.mark.parametrize("anchors, floor", [(0, 0.95), (4, 0.9)])
def test_a_scripted_judge_ranking_comes_back_as_rewards(anchors, floor):
    cfg = ArenaConfig(trust_alpha=1.0, comparisons=3, anchors=anchors)
    judge = QualityJudge()
    arena = Arena(cfg, 8, backend_judge(judge))
    rng = random.Random(0)
    taus = []
    for step in range(1, 16):
        qualities = [rng.sample(range(100), 8) for _ in range(4)]
        before = judge.calls
        new = arena.rescore(*batch(qualities), step=step)
        assert judge.calls - before <= 4 * 8 * 3 * 2  # groups x size x k games of two calls, never size squared
        taus += [kendall(q, new[g * 8 : (g + 1) * 8]) for g, q in enumerate(qualities)]
        assert arena.last.zero_variance == arena.last.rescued == 4
    assert sum(taus) / len(taus) >= floor, sum(taus) / len(taus)
    if anchors:
        assert all(len(p.traces) <= anchors for p in arena.pool.prompts.values()) and len(arena.pool.prompts) == 2


def test_the_verifier_order_is_never_overturned():
    """Random batches (partial credit, a format weight, groups with and without variance) and a
    judge that answers at random or in free text, at the largest weight allowed."""
    rng = random.Random(7)
    rescued = 0
    for trial in range(30):
        size = rng.choice([2, 4, 8])
        levels = rng.choice([[0.0, 1.0], [0.0, 0.1, 1.0], [0.0, 0.125, 0.25, 0.5, 0.9, 0.95, 1.0], [0.3, 0.3000001]])
        groups = []
        for _ in range(rng.randint(1, 6)):
            same = rng.random() < 0.6
            value = rng.choice(levels)
            groups.append([value if same else rng.choice(levels) for _ in range(size)])
        rewards = [r for g in groups for r in g]
        qualities = [[rng.randrange(100) for _ in range(size)] for _ in groups]
        _, prompts, completions, keys = batch(qualities, rewards, prompts_per_key=3)
        cfg = ArenaConfig(trust_alpha=1.0, comparisons=rng.randint(1, 3), anchors=rng.choice([0, 2, 4]), weight=0.49)
        arena = Arena(cfg, size, backend_judge(QualityJudge(flip=0.5, garbage=0.2, seed=trial)))
        for step in (1, 2):
            new = arena.rescore(rewards, prompts, completions, keys, step=step)
            rescued += arena.last.rescued
            for i in range(len(rewards)):
                for j in range(len(rewards)):
                    if rewards[i] < rewards[j]:
                        assert new[i] < new[j], (trial, rewards[i], rewards[j], new[i], new[j])
            for g in range(len(groups)):
                part, was = new[g * size : (g + 1) * size], rewards[g * size : (g + 1) * size]
                if len(set(was)) > 1:
                    assert part == was  # a group the verifier separates is not touched
                else:
                    assert abs(sum(part) / size - was[0]) < 1e-9  # its mean is kept
    assert rescued > 20  # the judge did act: most zero-variance groups got rewards


class FixedScores:
    """An EnvReward stand-in: every completion scores what its `score X` line says, and has an
    answer when it has the answer tags."""

    def details(
        self, completions, env_id, instance, env_name=None, completion_ids=None, answer_tag=None, format_weight=None
    ):
        from evoenv_cli.integrations.rewards import extract_answer

        return [
            {"reward": s, "score": s, "answer": extract_answer(c)}
            for c, s in ((c, float(re.search(r"score ([0-9.]+)", c).group(1))) for c in completions)
        ]


def step_batch(groups):
    """Completions of `groups` [(score, tagged?), ...] of 4, each saying its quality (rising
    along a group), and the columns TRL hands a reward function."""
    tagged = "<answer>7</answer>"
    completions = [
        f"quality {q}\nscore {s}\n{tagged if t else 'no tags'}"
        for gi, g in enumerate(groups)
        for q, (s, t) in enumerate(g, start=gi)
    ]
    n = len(completions)
    columns = dict(env_id=[f"env{i // 4}" for i in range(n)], instance=[{}] * n, seed=[i // 4 for i in range(n)])
    return completions, columns


def test_with_a_format_weight_the_arena_judges_score_ties_inside_the_weighted_sum_trl_adds():
    """TRL's reward is (1 - w) x the environment column + w x the format column. A group whose
    scores tie is judged even when its formats differ (it taught nothing about the task), a
    group the verifier's scores separate is left alone, and in the sum TRL forms no two traces
    the verifier or the format separates swap."""
    from evoenv_cli.integrations.rewards import FormatReward
    from evoenv_cli.stages.train import StepRewards

    w = 0.1
    groups = [  # (score, tagged?) per completion
        [(0.0, True), (0.0, False), (0.0, True), (0.0, False)],  # scores tie, formats do not: judged
        [(0.0, True)] * 4,  # both tie: the judge's
        [(0.5, False)] * 4,  # both tie: the judge's
        [(1.0, True), (0.0, True), (0.5, True), (1.0, True)],  # the verifier separates them
    ]
    completions, columns = step_batch(groups)
    n = len(completions)
    judge = QualityJudge()
    arena = Arena(ArenaConfig(trust_alpha=1.0, weight=0.49), 4, backend_judge(judge))
    fmt = FormatReward()
    step = StepRewards(FixedScores(), arena, fmt, w, group_size=4)
    column = step(prompts=["the task"] * n, completions=completions, **columns)
    formats = fmt(completions=completions)
    scores = [s for g in groups for s, _ in g]
    verifier = [(1 - w) * s + w * f for s, f in zip(scores, formats)]
    trl = [(1 - w) * c + w * f for c, f in zip(column, formats)]  # what TRL adds up
    assert arena.last.zero_variance == arena.last.rescued == 3 and judge.calls > 0
    assert column[12:] == scores[12:]  # the group with score variance untouched
    for g in (0, 1, 2):
        part, was = trl[g * 4 : (g + 1) * 4], verifier[g * 4 : (g + 1) * 4]
        assert sum(part) / 4 == pytest.approx(sum(was) / 4)  # the group's mean is kept
    for g in (1, 2):
        part = trl[g * 4 : (g + 1) * 4]
        assert len(set(part)) == 4 and part == sorted(part)  # quality rises, and so do the judge's rewards
    assert trl[0] < trl[2] and trl[1] < trl[3]  # inside the mixed group the judge ranks the tagged pair and the other
    for i in range(n):
        for j in range(n):
            if verifier[i] < verifier[j]:
                assert trl[i] < trl[j], (i, j, verifier[i], verifier[j], trl[i], trl[j])
    _, signal = step.drain()
    assert signal["train/zero_variance_share"] == 0.75 and signal["train/format_share"] == 0.625
    assert signal["zero_variance_by_reward"] == {"evoenv_env_reward": 0.75, "evoenv_format_reward": 0.75}
    # without an arena the column is the environment's score, whatever the format weight
    assert StepRewards(FixedScores(), None, fmt, w)(completions=completions, **columns) == scores


def test_format_only_signal_score_ties_everywhere_the_arena_judges_and_the_round_line_says_so(tmp_path):
    """The format bonus varies but every environment score ties: the score's zero-variance
    share is 1.0 (TRL's share on the weighted sum is not), the arena judges every group, and
    the round's `signal` is "format only", which its line says."""
    from evoenv_cli.integrations.rewards import FormatReward
    from evoenv_cli.loop import round_line
    from evoenv_cli.stages.train import StepRewards, signal_of

    groups = [[(0.0, True), (0.0, False), (0.0, False), (0.0, True)], [(0.0, False), (0.0, True)] * 2]
    completions, columns = step_batch(groups)
    n = len(completions)
    arena = Arena(ArenaConfig(trust_alpha=1.0), 4, backend_judge(QualityJudge()))
    fmt = FormatReward()
    step = StepRewards(FixedScores(), arena, fmt, 0.1, group_size=4)
    step(prompts=["the task"] * n, completions=completions, **columns)
    assert arena.last.zero_variance == arena.last.groups == 2 and arena.last.rescued == 2
    _, signal = step.drain()
    assert signal["train/zero_variance_share"] == 1.0 and signal["train/score_mean"] == 0.0
    assert signal["train/format_share"] == 0.5
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(json.dumps({"step": 1, "reward": 0.05, "frac_reward_zero_std": 0.0, **signal}) + "\n")
    assert signal_of(metrics) == "format only"
    metrics.write_text(json.dumps({"step": 1, "frac_reward_zero_std": 1.0, **signal}) + "\n")
    assert signal_of(metrics) == "none"
    metrics.write_text(json.dumps({"step": 1, "frac_reward_zero_std": 0.5, "train/zero_variance_share": 0.5}) + "\n")
    assert signal_of(metrics) == "score"
    summary = {
        "round": 1,
        "candidates": 0,
        "admitted": {},
        "pool_size": 3,
        "joined": 0,
        "retired": 0,
        "mean_train_reward": 0.05,
        "evaluation": {},
        "signal": "format only",
    }
    assert "format only: the scores tied in every group" in round_line(summary)
    assert "weights unchanged" in round_line({**summary, "signal": "none"})


def test_judge_rewards_lie_inside_the_width_and_sum_to_zero():
    for scores in ([0.0, 0.0], [50.0, -50.0, 0.0], [1.0, 2.0, 3.0, 4.0]):
        bonus = judge_rewards(scores, 0.01)
        assert all(abs(b) < 0.01 for b in bonus) and abs(sum(bonus)) < 1e-12
    assert judge_rewards([0.0, 0.0], 0.01) == [0.0, 0.0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("judge", ["raises", "unreachable-server"])
def test_a_failing_judge_leaves_the_verifier_rewards_and_is_logged(tmp_path, judge):
    if judge == "raises":
        backend = BrokenJudge()
    else:  # the real openai backend, its server gone
        backend = make_backend(
            "openai", "judge", base_url=f"http://127.0.0.1:{closed_port()}/v1", max_retries=0, timeout_s=5
        )
    log = tmp_path / "arena.jsonl"
    arena = Arena(ArenaConfig(trust_alpha=1.0), 4, backend_judge(backend), log)
    rewards, prompts, completions, keys = batch([[1, 2, 3, 4], [5, 6, 7, 8]], [0.0] * 4 + [1.0, 0.0, 1.0, 0.0])
    metrics = {}
    new = arena.rescore(rewards, prompts, completions, keys, step=3, log_metric=metrics.__setitem__)
    arena.close()
    assert new == rewards
    assert arena.last.judge_calls == arena.last.judge_errors > 0 and arena.last.rescued == 0
    assert metrics["arena/judge_errors"] == arena.last.judge_calls and metrics["arena/rescued_share"] == 0
    records = [json.loads(x) for x in log.read_text().splitlines()]
    comparisons = [r for r in records if r["kind"] == "comparison"]
    assert 2 * len(comparisons) == arena.last.judge_calls
    assert all(r["winner"] is None and [a["status"] for a in r["asked"]] == ["error"] * 2 for r in comparisons)
    assert any(r["kind"] == "error" and "no verdict" in r["error"] for r in records)
    if judge == "raises":
        assert "CUDA out of memory" in comparisons[0]["asked"][0]["error"]


def test_failed_requests_count_for_nothing_and_the_rest_still_rank(tmp_path):
    log = tmp_path / "arena.jsonl"
    arena = Arena(ArenaConfig(trust_alpha=1.0, comparisons=3, anchors=0), 8, backend_judge(HalfFailingJudge()), log)
    qualities = [[5, 1, 7, 3, 8, 2, 6, 4]]
    new = arena.rescore(*batch(qualities), step=1)
    arena.close()
    assert 0 < arena.last.judge_errors < arena.last.judge_calls and arena.last.rescued == 1
    assert kendall(qualities[0], new) > 0.5
    records = [json.loads(x) for x in log.read_text().splitlines()]
    statuses = {a["status"] for r in records if r["kind"] == "comparison" for a in r["asked"]}
    assert statuses == {"ok", "error"}


def test_unparseable_verdicts_are_ties_and_each_comparison_is_a_line(tmp_path):
    log = tmp_path / "arena.jsonl"
    arena = Arena(ArenaConfig(trust_alpha=1.0), 4, backend_judge(QualityJudge(garbage=1.0)), log)
    new = arena.rescore(*batch([[1, 2, 3, 4]]), step=1)
    arena.close()
    assert new == [0.0] * 4 and arena.last.unparseable == arena.last.judge_calls > 0 and arena.last.rescued == 0
    records = [json.loads(x) for x in log.read_text().splitlines()]
    comparisons = [r for r in records if r["kind"] == "comparison"]
    assert 2 * len(comparisons) == arena.last.judge_calls
    assert all(r["winner"] == "tie" for r in comparisons)
    assert all(
        a["status"] == "unparseable" and a["winner"] == "tie" and a["response"] for r in comparisons for a in r["asked"]
    )
    (group,) = [r for r in records if r["kind"] == "group"]
    assert group["rescued"] is False and len(group["traces"]) == 4


class FirstJudge(QualityJudge):
    """Always names the solution shown first, the way a weak model often does."""

    def generate(self, prompts, sampling, *, prompt_ids=None):
        self.calls += len(prompts)
        return [Generation([Completion("A", 1, "stop")], 9) for _ in prompts]


def test_asking_both_orders_turns_position_bias_into_ties():
    arena = Arena(ArenaConfig(trust_alpha=1.0), 4, backend_judge(FirstJudge()))
    assert arena.rescore(*batch([[1, 2, 3, 4]]), step=1) == [0.0] * 4 and arena.last.rescued == 0
    one_order = Arena(ArenaConfig(trust_alpha=1.0, both_orders=False), 4, backend_judge(FirstJudge()))
    one_order.rescore(*batch([[1, 2, 3, 4]]), step=1)
    assert one_order.last.rescued == 1  # asked once, its bias becomes a (random) ranking


def test_anchor_pool_is_bounded_and_survives_a_checkpoint(tmp_path):
    arena = Arena(
        ArenaConfig(trust_alpha=1.0, comparisons=2, anchors=3, max_prompts=2), 4, backend_judge(QualityJudge())
    )
    for step in range(1, 6):
        qualities = [[step * 4 + j for j in range(4)] for _ in range(3)]
        arena.rescore(*batch(qualities, prompts_per_key=3), step=step)
    assert len(arena.pool.prompts) == 2 and all(len(p.traces) == 3 for p in arena.pool.prompts.values())
    for p in arena.pool.prompts.values():  # results kept only among the anchors kept
        ids = {t.id for t in p.traces}
        assert all(a in ids and b in ids for a, b in p.wins)
    assert any(p.wins for p in arena.pool.prompts.values())
    folder = tmp_path / "checkpoint-5"
    folder.mkdir()
    arena.save(folder)
    again = Arena(
        ArenaConfig(trust_alpha=1.0, comparisons=2, anchors=3, max_prompts=2), 4, backend_judge(QualityJudge())
    )
    assert again.restore(folder) and again.pool.state() == arena.pool.state()
    assert not again.restore(tmp_path)  # no pool file: nothing restored


def test_anchors_keep_a_spread_of_ratings():
    pool = AnchorPool(size=3, max_prompts=10)
    pool.update("k", [Trace(str(i), "", 0.0, score=float(i)) for i in range(9)], {("0", "8"): 1.0, ("8", "4"): 1.0})
    assert [t.id for t in pool.get("k").traces] == ["0", "4", "8"]
    assert pool.get("k").wins == {("0", "8"): 1.0, ("8", "4"): 1.0}
    AnchorPool(size=0, max_prompts=10).update("k", [Trace("1", "", 0.0)], {})


@pytest.mark.slow  # loads a model through transformers twice: ~14 s
def test_the_policy_view_generates_like_the_loaded_backend(tiny_model):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evoenv_cli.llm import SamplingConfig
    from evoenv_cli.llm.hf import HFBackend

    prompts = [[{"role": "user", "content": "Which is better?"}], [{"role": "user", "content": "2+2"}]]
    greedy = SamplingConfig(n=1, temperature=0, max_tokens=8)
    loaded = make_backend("hf", str(tiny_model), device="cpu")
    expected = [g.texts for g in loaded.generate(prompts, greedy)]
    loaded.close()
    tok = AutoTokenizer.from_pretrained(tiny_model)  # the trainer's tokenizer, padding side untouched
    side = tok.padding_side
    lm = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    lm.train()
    view = HFBackend.over(lm, tok, "policy")
    assert [g.texts for g in view.generate(prompts, greedy)] == expected
    assert tok.padding_side == side and lm.training
    # nothing made under the view is an inference tensor: the model trains on afterwards
    loss = lm(input_ids=torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss
    loss.backward()


# -- real TRL GRPO steps on the tiny model -------------------------------------------------------
class DistinctCharsJudge(QualityJudge):
    """Prefers the trace with more distinct characters (the tiny model writes noise; this gives
    the noise a consistent order), ties on equal."""

    def generate(self, prompts, sampling, *, prompt_ids=None):
        self._check(prompts, sampling, prompt_ids)
        out = []
        for conv in prompts:
            self.calls += 1
            both = shown(conv[-1]["content"])
            a, b = len(set(both["A"])), len(set(both["B"]))
            out.append(
                Generation([Completion("VERDICT: " + ("A" if a > b else "B" if b > a else "TIE"), 3, "stop")], 9)
            )
        return out


@pytest.fixture(scope="module")
def seed_rows(tmp_path_factory, tiny_model):
    """One level-1 row per seed: the tiny model never answers them, so every GRPO group of
    every step has zero variance (GRPO alone learns nothing from them)."""
    out = tmp_path_factory.mktemp("arena") / "rows.jsonl"
    r = subprocess.run(
        [str(EXE), "sample", SEEDS, "-o", out, "-n", "1", "-d", "1"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return out


def train_tiny(rows, tiny_model, out, zero_variance, judge=None, format_weight=0.0, **arena):
    from evoenv_cli.config import RewardConfig, RuntimeConfig, TrainConfig
    from evoenv_cli.stages import train

    cfg = TrainConfig(
        num_generations=2,
        per_device_train_batch_size=4,
        max_completion_length=8,
        mask_truncated_completions=False,  # the random model's completions are all cut
        learning_rate=0.01,
        gradient_checkpointing=False,
        max_steps=2,
        save_steps=1,
        zero_variance=zero_variance,
        arena=ArenaConfig(trust_alpha=1.0, max_tokens=16, **arena),
    )
    return train.run(
        rows,
        EnvLibrary.open(SEEDS),
        str(tiny_model),
        out,
        cfg,
        RewardConfig(format_weight=format_weight),
        RuntimeConfig(),
        judge=judge,
    )


def weights(path):
    from safetensors.torch import load_file

    out = {}
    for f in sorted(path.glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


@pytest.mark.slow
def test_a_grpo_step_learns_from_groups_only_the_judge_separates(seed_rows, tiny_model, tmp_path):
    judge = DistinctCharsJudge()
    on = train_tiny(seed_rows, tiny_model, tmp_path / "on", "judge", judge)
    off = train_tiny(seed_rows, tiny_model, tmp_path / "off", "skip")
    start = weights(tiny_model)
    assert off["all_groups_zero_variance"] and all((weights(tmp_path / "off")[k] == v).all() for k, v in start.items())
    trained = weights(tmp_path / "on")
    assert any(not (trained[k] == v).all() for k, v in start.items()), "the judge's rewards moved no weight"
    assert not on["all_groups_zero_variance"] and on["arena"]["rescued"] > 0
    assert on["arena"]["judge_calls"] == judge.calls > 0
    metrics = [json.loads(x) for x in (tmp_path / "on" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    for m in metrics:
        assert m["arena/zero_variance_share"] == 1.0 and m["arena/rescued_share"] > 0
        assert m["frac_reward_zero_std"] == pytest.approx(1.0 - m["arena/rescued_share"])  # TRL saw them rescued
        assert {"arena/judge_calls", "arena/judge_seconds", "arena/bt_iterations"} <= set(m)
    records = [json.loads(x) for x in (tmp_path / "on" / "arena.jsonl").read_text().splitlines()]
    assert 2 * sum(r["kind"] == "comparison" for r in records) == judge.calls
    # the anchors went into each checkpoint, and --resume brings them back
    checkpoint = tmp_path / "on" / "checkpoints" / "checkpoint-2"
    saved = json.loads((checkpoint / "arena-pool.json").read_text())
    assert saved["prompts"] and all(len(p["traces"]) <= 4 for p in saved["prompts"])
    from evoenv_cli.config import RewardConfig, RuntimeConfig, TrainConfig
    from evoenv_cli.stages import train

    cfg = TrainConfig(
        num_generations=2,
        per_device_train_batch_size=4,
        max_completion_length=8,
        mask_truncated_completions=False,  # the random model's completions are all cut
        learning_rate=0.01,
        gradient_checkpointing=False,
        max_steps=3,
        save_steps=1,
        zero_variance="judge",
        arena=ArenaConfig(trust_alpha=1.0, max_tokens=16),
    )
    again = train.run(
        seed_rows,
        EnvLibrary.open(SEEDS),
        str(tiny_model),
        tmp_path / "on",
        cfg,
        RewardConfig(),
        RuntimeConfig(),
        resume=True,
        judge=DistinctCharsJudge(),
    )
    assert again["steps"] == 3 and again["arena"]["groups"] == 2  # one step more, on the saved anchors
    assert again["arena"]["prompts_with_anchors"] >= len(saved["prompts"])


@pytest.mark.slow
def test_with_a_format_weight_trl_sees_the_judges_rewards(seed_rows, tiny_model, tmp_path):
    """Real GRPO steps with the format reward as TRL's second reward function (weights 0.9 and
    0.1): the tiny model never tags an answer, so every group ties on both; the groups the
    judge ranks reach TRL with non-zero std, and its format column stays all zero."""
    judge = DistinctCharsJudge()
    on = train_tiny(seed_rows, tiny_model, tmp_path / "on", "judge", judge, format_weight=0.1)
    start, trained = weights(tiny_model), weights(tmp_path / "on")
    assert any(not (trained[k] == v).all() for k, v in start.items()), "the judge's rewards moved no weight"
    assert on["arena"]["rescued"] > 0 and judge.calls > 0
    for m in (json.loads(x) for x in (tmp_path / "on" / "metrics.jsonl").read_text().splitlines()):
        assert m["rewards/evoenv_format_reward/mean"] == 0.0
        assert m["arena/zero_variance_share"] == 1.0 and m["arena/rescued_share"] > 0
        assert m["frac_reward_zero_std"] == pytest.approx(1.0 - m["arena/rescued_share"])
        assert abs(m["reward"]) < 1e-6  # the judge's rewards are centred: the mean stays the verifier's


@pytest.mark.slow
def test_train_judges_with_the_policy_in_process(seed_rows, tiny_model, tmp_path):
    """`evoenv train --zero-variance judge` with no judge model: the tiny policy judges itself
    (its verdicts do not parse, so they are ties, and nothing is rescued; every call is logged).
    `trust_alpha: 1` uses the judge unmeasured: the random model's groups all tie, so no group
    the verifier separates could measure it, and a measured judge would stand aside unasked."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "train:\n  num_generations: 2\n  per_device_train_batch_size: 4\n  max_completion_length: 8\n"
        "  mask_truncated_completions: false\n"  # the random model's completions are all cut
        "  gradient_checkpointing: false\n  arena:\n    max_tokens: 12\n    comparisons: 1\n"
        "    trust_alpha: 1.0\n"
    )
    out = tmp_path / "policy"
    r = subprocess.run(
        [
            EXE,
            "train",
            seed_rows,
            "--library",
            SEEDS,
            "--model",
            tiny_model,
            "--out",
            out,
            "--config",
            recipe,
            "--max-steps",
            "1",
            "--zero-variance",
            "judge",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["arena"]["judge_calls"] == 4 and summary["arena"]["judge_errors"] == 0  # 2 groups, a game each
    records = [json.loads(x) for x in (out / "arena.jsonl").read_text().splitlines()]
    comparisons = [x for x in records if x["kind"] == "comparison"]
    assert len(comparisons) == 2
    assert all(
        a["status"] in ("ok", "unparseable") and a["response"] is not None for x in comparisons for a in x["asked"]
    )
    manifest = json.loads((out / "train-manifest.json").read_text())
    assert manifest["config"]["train"]["zero_variance"] == "judge"
    bad = subprocess.run(
        [
            EXE,
            "train",
            seed_rows,
            "--library",
            SEEDS,
            "--model",
            tiny_model,
            "--out",
            tmp_path / "x",
            "--zero-variance",
            "jugde",
        ],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    assert bad.returncode == 2 and "--zero-variance" in bad.stderr and not (tmp_path / "x").exists()


WORKER = """
import json, os, sys
sys.path[:0] = [sys.argv[1], os.path.dirname(sys.argv[1])]  # this module, and the conftest it imports
from accelerate import PartialState
state = PartialState(cpu=True)
from test_arena import QualityJudge, two_process_batches
from evoenv_cli.config import ArenaConfig
from evoenv_cli.training.arena import Arena, backend_judge, processes
judge = QualityJudge(flip=0.3)
arena = Arena(ArenaConfig(trust_alpha=1.0, comparisons=3, anchors=4), 4, backend_judge(judge), sys.argv[2], processes())
out = []
for step, (rewards, prompts, completions, keys) in enumerate(two_process_batches(), 1):
    half = len(rewards) // 2
    mine = slice(state.process_index * half, (state.process_index + 1) * half)
    out.append(arena.rescore(rewards[mine], prompts[mine], completions[mine], keys[mine], step=step))
arena.close()
print(json.dumps({"rank": state.process_index, "rewards": out, "calls": judge.calls}), flush=True)
# leave the process group before exiting: gloo torn down by interpreter exit can abort
# ("terminate called without an active exception", seen once in a full run)
import torch.distributed as dist
state.wait_for_everyone()
dist.destroy_process_group()
"""


def two_process_batches():
    """Three steps of 4 groups of 4 (one group the verifier separates); a group's completions
    sit on both processes in the second step (TRL may split a group so)."""
    rng = random.Random(3)
    steps = []
    for _ in range(3):
        qualities = [rng.sample(range(100), 4) for _ in range(4)]
        rewards = [0.0] * 8 + [1.0, 0.0, 1.0, 1.0] + [1.0] * 4
        steps.append(batch(qualities, rewards))
    return steps


@pytest.mark.slow
def test_two_processes_judge_their_shares_and_agree_with_one(tmp_path):
    """Under `accelerate launch` every rank gathers the batch, judges every second comparison
    and fits the same scores: the rewards are those of one process, judge calls are split."""
    single_judge = QualityJudge(flip=0.3)
    single = Arena(
        ArenaConfig(trust_alpha=1.0, comparisons=3, anchors=4), 4, backend_judge(single_judge), tmp_path / "one.jsonl"
    )
    expected = [single.rescore(*b, step=step) for step, b in enumerate(two_process_batches(), 1)]
    single.close()
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = {**ENV, "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(closed_port())}
    procs = [
        subprocess.Popen(
            [sys.executable, script, Path(__file__).parent, tmp_path / "two.jsonl"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
        )
        for r in (0, 1)
    ]
    results = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr[-3000:]
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    results.sort(key=lambda r: r["rank"])
    for step, want in enumerate(expected):
        assert results[0]["rewards"][step] + results[1]["rewards"][step] == want
    assert results[0]["calls"] + results[1]["calls"] == single_judge.calls
    assert 0 < results[1]["calls"] < single_judge.calls
    one = [json.loads(x) for x in (tmp_path / "one.jsonl").read_text().splitlines()]
    two = [json.loads(x) for x in (tmp_path / "two.jsonl").read_text().splitlines()]
    assert one == two  # rank 0 alone writes the log, the same lines


def test_a_judge_that_cannot_be_built_is_a_one_line_error_before_anything_is_written(tmp_path, tiny_model):
    rows = tmp_path / "rows.jsonl"
    r = subprocess.run(
        [str(EXE), "sample", SEEDS, "-o", rows, "-n", "1", "-d", "1"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    for body, needle in [("kind: openai", "needs a model"), ("model: ./no-such-judge", "no such model folder")]:
        recipe = tmp_path / "r.yaml"
        recipe.write_text(f"train:\n  zero_variance: judge\n  arena:\n    judge:\n      {body}\n")
        out = tmp_path / "never"
        r = subprocess.run(
            [str(EXE), "train", rows, "--library", SEEDS, "--model", tiny_model, "--out", out, "--config", recipe],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=300,
            cwd=tmp_path,
        )
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and needle in lines[0] and str(recipe) in lines[0], r.stderr
        assert not out.exists()
