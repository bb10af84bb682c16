"""One home for the answer rule: a recipe with `answer.tag: final` and a format weight writes
rows that carry both, and every reward entry point a trainer calls (TRL's `env_reward` and
`EnvReward`, verl's `compute_score`, OpenRLHF's `reward_func` and `serve-reward`) scores them by
the row's rule with no environment variable set; `evoenv train` keeps its recipe's rule. The variable still
overrides, with a warning that names it and both values."""

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from conftest import SEEDS, start_serve_reward

from evoenv_cli.integrations import rewards
from evoenv_cli.stages import sample

RECIPE = "answer:\n  tag: final\nreward:\n  format_weight: 0.2\nsample:\n  per_env: 2\n  difficulty: 2\n"
ENVS = ("register_machine", "graph_coloring_planted")


@pytest.fixture(autouse=True)
def no_rule_variables(monkeypatch):
    for var in rewards.RULE_ENV.values():
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(rewards, "_warned", set())


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    lib = tmp_path_factory.mktemp("lib")
    for name in ENVS:
        shutil.copy(SEEDS / f"{name}.py", lib)
    return lib


@pytest.fixture(scope="module")
def rows(library, tmp_path_factory):
    """TRL rows as `evoenv sample --config` writes them (no EVOENV_ variable in its environment)."""
    tmp = tmp_path_factory.mktemp("rows")
    (tmp / "r.yaml").write_text(RECIPE)
    env = {k: v for k, v in os.environ.items() if k not in rewards.RULE_ENV.values()}
    r = subprocess.run(
        [Path(sys.executable).with_name("evoenv"), "sample", library, "--config", tmp / "r.yaml", "--out", tmp / "t"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    return [json.loads(x) for x in (tmp / "t").read_text().splitlines()]


def replies(rows, tag):
    return [f"so <{tag}>{r['answer']}</{tag}>" for r in rows]


def test_rows_and_their_views_carry_the_rule(rows):
    assert len(rows) == 2 * len(ENVS)
    assert all(r["answer_tag"] == "final" and r["format_weight"] == 0.2 for r in rows)
    assert all("<final>" in r["prompt"][-1]["content"] for r in rows)
    verl = sample.to_format(rows[0], "verl", 0)
    assert verl["extra_info"]["answer_tag"] == "final" and verl["extra_info"]["format_weight"] == 0.2
    label = json.loads(sample.to_format(rows[0], "openrlhf", 0)["label"])
    assert label["answer_tag"] == "final" and label["format_weight"] == 0.2


def test_trl_entry_points_read_the_rule_from_the_columns(rows, library, monkeypatch):
    from evoenv_cli.stages.train import StepRewards

    monkeypatch.setenv("EVOENV_LIBRARY", str(library))
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    assert rewards.env_reward(completions=replies(rows, "final"), **columns) == [1.0] * len(rows)
    assert rewards.env_reward(completions=replies(rows, "answer"), **columns) == [0.0] * len(rows)
    wrong = ["<final>surely wrong</final>"] * len(rows)
    assert rewards.env_reward(completions=wrong, **columns) == [pytest.approx(0.2)] * len(rows)

    # evoenv train's rewards take the recipe's rule, never the rows' (GRPO weighs the format)
    reward = rewards.EnvReward(library, answer_tag="", rows_rule=False)
    try:
        step = StepRewards(reward)
        assert step(completions=wrong, **columns) == [0.0] * len(rows)  # no format bonus in the sum
        assert step(completions=[r["answer"] for r in rows], **columns) == [1.0] * len(rows)  # tag "": all
        fmt = rewards.FormatReward()
        assert fmt(completions=replies(rows, "final"), **columns) == [1.0] * len(rows)
        assert fmt(completions=replies(rows, "answer"), **columns) == [0.0] * len(rows)
        recipe_fmt = rewards.FormatReward("answer", rows_rule=False)
        assert recipe_fmt(completions=replies(rows, "answer"), **columns) == [1.0] * len(rows)
    finally:
        reward.close()


def test_compute_score_reads_the_rule_from_extra_info(rows, library, monkeypatch):
    monkeypatch.setenv("EVOENV_LIBRARY", str(library))
    for i, row in enumerate(rows):
        v = sample.to_format(row, "verl", i)
        truth = v["reward_model"]["ground_truth"]
        args = dict(data_source=v["data_source"], ground_truth=truth, extra_info=v["extra_info"])
        assert rewards.compute_score(solution_str=f"<final>{truth}</final>", **args) == {
            "score": 1.0,
            "acc": 1.0,
            "answered": 1.0,
        }
        assert rewards.compute_score(solution_str=f"<answer>{truth}</answer>", **args)["answered"] == 0.0
        junk = rewards.compute_score(solution_str="<final>no</final>", **args)
        assert junk == {"score": pytest.approx(0.2), "acc": 0.0, "answered": 1.0}


def openrlhf_triples(rows, tag):
    """(query, prompt, label) with the prompt as plain text, as a decoded query starts with it."""
    out = []
    for i, row in enumerate(rows):
        o = sample.to_format(row, "openrlhf", i)
        prompt = "\n".join(m["content"] for m in o["input"]) + "\nassistant:"
        answer = json.loads(o["label"])["answer"]
        out.append((f"{prompt} <{tag}>{answer}</{tag}>", prompt, o["label"]))
    return out


def test_reward_func_reads_the_rule_from_the_label(rows, library, monkeypatch):
    monkeypatch.setenv("EVOENV_LIBRARY", str(library))
    for tag, want in (("final", 1.0), ("answer", 0.0)):
        q, p, labels = zip(*openrlhf_triples(rows, tag))
        out = rewards.reward_func(list(q), list(p), list(labels))
        assert out["rewards"].tolist() == [want] * len(rows)


def test_the_variable_overrides_loudly(rows, library, monkeypatch):
    monkeypatch.setenv("EVOENV_LIBRARY", str(library))
    monkeypatch.setenv("EVOENV_ANSWER_TAG", "answer")
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    with pytest.warns(rewards.AnswerRuleOverride, match=r"\$EVOENV_ANSWER_TAG='answer' overrides .*'final'"):
        assert rewards.env_reward(completions=replies(rows, "answer"), **columns) == [1.0] * len(rows)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process: the next batch is quiet
        assert rewards.env_reward(completions=replies(rows, "final"), **columns) == [0.0] * len(rows)
    monkeypatch.setenv("EVOENV_FORMAT_WEIGHT", "0")
    with pytest.warns(rewards.AnswerRuleOverride, match=r"EVOENV_FORMAT_WEIGHT='0' overrides .*0\.2"):
        wrong = rewards.env_reward(completions=["<answer>surely wrong</answer>"] * len(rows), **columns)
    assert wrong == [0.0] * len(rows)


@pytest.mark.slow
def test_serve_reward_reads_the_rule_from_the_label(rows, library, tmp_path):
    """The server runs without the recipe (its own tag is the default, <answer>): the labels'
    rule decides."""
    env = {k: v for k, v in os.environ.items() if k not in rewards.RULE_ENV.values()}
    url, proc, _ = start_serve_reward(library, tmp_path / "serve.log", env, timeout_s=120)
    try:
        for tag, want in (("final", 1.0), ("answer", 0.0)):
            q, p, labels = zip(*openrlhf_triples(rows, tag))
            body = json.dumps({"query": q, "prompts": p, "labels": labels}).encode()
            req = urllib.request.Request(url + "/get_reward", data=body, method="POST")
            with urllib.request.urlopen(req, timeout=60) as r:
                assert json.loads(r.read())["rewards"] == [want] * len(rows)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
