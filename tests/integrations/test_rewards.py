import json

import pytest
from conftest import SEEDS

from evoenv_cli.artifacts import EnvLibrary
from evoenv_cli.config import SampleConfig
from evoenv_cli.integrations.rewards import EnvReward, completion_text, extract_answer
from evoenv_cli.runtime.workers import SandboxWorkers
from evoenv_cli.stages import sample


@pytest.mark.parametrize(
    "text, expected",
    [
        ("so <answer>42</answer>", "42"),
        ("<answer>1</answer> wait, no: <answer> 2 </answer>", "2"),
        ("<ANSWER>x y</ANSWER>", "x y"),
        ("<answer>\n3 1 2\n</answer>\n", "3 1 2"),
        ("no tags at all", None),
        ("<answer>unclosed", None),
        (None, None),
        # thinking: only what follows the reasoning counts
        ("<think>put it between <answer> and </answer></think> so <answer>7</answer>", "7"),
        ("the template opened the thinking: between <answer> and </answer>...</think>\n<answer>7</answer>", "7"),
        ("between <answer> and </answer> I should write it</think> I give up", None),
        ("<think>between <answer> and </answer> the reasoning never ends", None),
        ("<think>a</think> <answer>1</answer> <think>b</think> <answer>2</answer>", "2"),
    ],
)
def test_extract_answer_takes_the_last_block(text, expected):
    assert extract_answer(text) == expected


def test_completion_text_handles_strings_and_chat_messages():
    assert completion_text("hi") == "hi"
    assert completion_text([{"role": "assistant", "content": "a"}]) == "a"
    assert completion_text([{"role": "user", "content": "q"}, {"role": "assistant", "content": "b"}]) == "b"


@pytest.fixture(scope="module")
def rows():
    lib = EnvLibrary.open(SEEDS)
    with SandboxWorkers() as pool:
        return sample.run(lib, SampleConfig(per_env=3, seed=11), pool).rows


@pytest.fixture(scope="module")
def reward():
    r = EnvReward(SEEDS)
    yield r
    r.close()


def test_right_wrong_and_missing_answers(rows, reward):
    right = [f"thinking...\n<answer>{r['answer']}</answer>" for r in rows]
    wrong = [f"<answer>{r['answer']} extra words</answer>" for r in rows]
    missing = [r["answer"] for r in rows]  # the right answer, but not in the tags
    assert reward.score_rows(rows, right) == [1.0] * len(rows)
    assert reward.score_rows(rows, wrong) == [0.0] * len(rows)
    assert reward.score_rows(rows, missing) == [0.0] * len(rows)


def test_called_the_way_trl_calls_a_reward_function(rows, reward):
    """TRL passes prompts, completions (chat messages for chat prompts) and every other
    dataset column as keyword arguments, plus a few of its own."""
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    completions = [[{"role": "assistant", "content": f"<answer>{r['answer']}</answer>"}] for r in rows]
    out = reward(
        prompts=[r["prompt"] for r in rows],
        completions=completions,
        completion_ids=[[1, 2]] * len(rows),
        trainer_state=None,
        **columns,
    )
    assert out == [1.0] * len(rows)
    assert all(type(x) is float for x in out)


def test_format_weight_mixes_a_format_reward(rows):
    """The reward's own weight serves rows that carry no answer rule (rows that do are
    scored by theirs: tests/test_answer_rule.py)."""
    r = EnvReward(SEEDS, format_weight=0.2)
    bare = [{k: v for k, v in row.items() if k not in ("answer_tag", "format_weight")} for row in rows[:2]]
    try:
        got = r.score_rows(bare, ["<answer>surely wrong</answer>", "no answer"])
    finally:
        r.close()
    assert got == [pytest.approx(0.2), 0.0]


def test_unknown_environment_is_an_error(rows, reward):
    bad = dict(rows[0], env_id="0" * 16, env_name="nope")
    with pytest.raises(KeyError, match="not in the reward's library"):
        reward.score_rows([bad], ["<answer>1</answer>"])


def test_instance_may_be_a_dict_or_a_json_string(rows, reward):
    row = rows[0]
    as_dict = dict(row, instance=json.loads(row["instance"]))
    assert reward.score_rows([as_dict], [f"<answer>{row['answer']}</answer>"]) == [1.0]


def test_env_reward_reads_the_library_from_the_environment(rows, monkeypatch):
    from evoenv_cli.integrations import rewards

    monkeypatch.setenv("EVOENV_LIBRARY", str(SEEDS))
    out = rewards.env_reward(
        completions=[f"<answer>{rows[0]['answer']}</answer>"],
        env_id=[rows[0]["env_id"]],
        instance=[rows[0]["instance"]],
    )
    assert out == [1.0]
    assert rewards.shared_reward() is rewards.shared_reward(str(SEEDS))  # built once per process
    monkeypatch.delenv("EVOENV_LIBRARY")
    with pytest.raises(RuntimeError, match="set EVOENV_LIBRARY"):
        rewards.shared_reward()


def test_format_reward_is_its_own_function(rows):
    from evoenv_cli.integrations.rewards import FormatReward

    f = FormatReward()
    got = f(
        prompts=[rows[0]["prompt"]] * 3,
        completions=[[{"role": "assistant", "content": "<answer>anything</answer>"}], "no tags", "<answer></answer>"],
        env_id=[rows[0]["env_id"]] * 3,
    )
    assert got == [1.0, 0.0, 1.0] and f.__name__ == "evoenv_format_reward"
