"""The thinking rule (evoenv_cli.thinking), with Qwen3-Thinking-2507's real chat template (in
tests/fixtures, no hub): its prompt opens <think>, so a response holds only the closing tag, and
a response cut by the token limit holds no tag at all. Such a response has no answer in the GRPO
reward, the format reward, calibrate, evaluate, review, synthesize and the arena's judge."""

import json
from pathlib import Path

import pytest
from conftest import SEEDS

from evoenv_cli.artifacts import EnvLibrary, prepare_out_dir
from evoenv_cli.config import CalibrateConfig, RuntimeConfig, SampleConfig
from evoenv_cli.integrations.rewards import EnvReward, FormatReward, extract_answer
from evoenv_cli.llm.base import BaseBackend, Completion, Generation
from evoenv_cli.runtime.workers import SandboxWorkers
from evoenv_cli.stages import calibrate, sample
from evoenv_cli.stages.review import parse_vote
from evoenv_cli.stages.synthesize import extract_code
from evoenv_cli.thinking import cut_at_length, final_text, template_opens_think
from evoenv_cli.training.arena import parse_verdict

TEMPLATE = (Path(__file__).parent / "fixtures" / "qwen3_thinking_2507_chat_template.jinja").read_text()
DRAFT = "The answer could be <answer>5</answer>, but let me check 2 + 2 again"  # cut mid-thought
FINISHED = "2 + 2 is 4.\n</think>\n\n<answer>4</answer>"


@pytest.fixture(scope="module")
def qwen_tokenizer(tiny_model):
    """The tiny model's tokenizer wearing Qwen3-Thinking-2507's chat template."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    tok.chat_template = TEMPLATE
    return tok


def test_the_qwen3_thinking_template_opens_think_in_the_prompt(qwen_tokenizer, tiny_model):
    from transformers import AutoTokenizer

    prompt = qwen_tokenizer.apply_chat_template(
        [{"role": "user", "content": "2+2?"}], tokenize=False, add_generation_prompt=True
    )
    assert prompt.endswith("<|im_start|>assistant\n<think>\n")
    assert template_opens_think(qwen_tokenizer)
    assert not template_opens_think(AutoTokenizer.from_pretrained(tiny_model))  # plain ChatML


def test_a_response_to_a_thinking_prompt_has_an_answer_only_after_its_reasoning_closed():
    assert extract_answer(DRAFT, opened=True) is None
    assert extract_answer(DRAFT) == "5"  # a model that does not think: the text is its answer
    assert extract_answer(FINISHED, opened=True) == "4"
    assert final_text("a</think> b <think> c", opened=False) is None  # opened again, never closed
    assert extract_answer("cut mid-thought", tag="", opened=True, truncated=True) is None
    # a template not known (a server's): cut before any </think>, a thought and an answer look
    # the same, so there is none; a known non-thinking template keeps the closed block
    assert extract_answer(DRAFT, opened=None, truncated=True) is None
    assert extract_answer(DRAFT, opened=None) == "5"
    assert extract_answer(DRAFT, opened=False, truncated=True) == "5"
    assert extract_answer(FINISHED, opened=None, truncated=True) == "4"
    assert extract_answer("done</think> 4", tag="", opened=True) == "4"
    # cut at the length limit: an answer block closed before the cut counts, an open one not
    assert extract_answer("</think><answer>4</answer> and more", opened=True, truncated=True) == "4"
    assert extract_answer("</think><answer>4", opened=True, truncated=True) is None


def test_truncation_is_read_from_completion_ids_as_trl_does():
    end = {7, 0}
    assert cut_at_length([3, 4, 5], end)
    assert not cut_at_length([3, 4, 7], end)
    assert not cut_at_length([3, 0, 0], end)  # padded after the end
    assert not cut_at_length([], end)


@pytest.fixture(scope="module")
def rows():
    with SandboxWorkers() as pool:
        return sample.run(EnvLibrary.open(SEEDS), SampleConfig(per_env=1, seed=3), pool).rows[:4]


def test_the_grpo_and_format_rewards_give_a_cut_thought_nothing(rows):
    """Called the way TRL 1.16 calls reward functions (`_calculate_rewards`: prompts,
    completions, completion_ids and the row columns)."""
    reward = EnvReward(SEEDS)
    fmt = FormatReward()
    try:
        right = [f"<answer>{r['answer']}</answer>" for r in rows]
        kwargs = dict(
            env_id=[r["env_id"] for r in rows],
            instance=[r["instance"] for r in rows],
            env_name=[r.get("env_name") for r in rows],
        )
        completions = [[{"role": "assistant", "content": f"thinking {t} still thinking"}] for t in right]
        ids_cut, ids_done = [[5, 6, 8]] * len(rows), [[5, 6, 2]] * len(rows)
        assert reward(completions=completions, completion_ids=ids_cut, **kwargs) == [1.0] * len(rows)  # not set up
        for r in (reward, fmt):
            r.opens_think, r.end_ids = True, {2}
        assert reward(completions=completions, completion_ids=ids_cut, **kwargs) == [0.0] * len(rows)
        assert fmt(completions=completions, completion_ids=ids_cut) == [0.0] * len(rows)
        closed = [[{"role": "assistant", "content": f"ok</think>\n\n{t}"}] for t in right]
        assert reward(completions=closed, completion_ids=ids_done, **kwargs) == [1.0] * len(rows)
        assert fmt(completions=closed, completion_ids=ids_done) == [1.0] * len(rows)
        r = reward.details([DRAFT], kwargs["env_id"][:1], kwargs["instance"][:1])
        assert r[0]["status"] == "no_answer"
    finally:
        reward.close()


class ThinkingPolicy(BaseBackend):
    """Behaves like Qwen3-Thinking behind a template that opens <think>: every response is the
    right answer drafted mid-thought, then cut at the length limit."""

    name = "thinking"
    opens_think = True

    def __init__(self):
        self.model = "thinking"

    def generate(self, prompts, sampling, *, prompt_ids=None):
        self._check(prompts, sampling, prompt_ids)
        text = "Perhaps <answer>3</answer>, but let me verify"
        return [Generation([Completion(text, sampling.max_tokens, "length")] * sampling.n, 10) for _ in prompts]


def test_calibrate_counts_a_cut_thought_as_no_answer(tmp_path):
    lib = EnvLibrary.open(SEEDS)
    cfg = CalibrateConfig(instances=1, samples=1, max_tokens=16, on_no_answers="admit")
    out = prepare_out_dir(tmp_path / "cal", False, False)
    calibrate.run(lib, cfg, SampleConfig(), RuntimeConfig(), ThinkingPolicy(), out, "thinking")
    responses = [json.loads(x) for x in (tmp_path / "cal" / "responses.jsonl").read_text().splitlines() if x]
    assert responses and all(r["answer"] is None and r["finish_reason"] == "length" for r in responses)


def test_review_synthesize_and_the_judge_read_only_the_final_part():
    vote = (
        '{"well_posed": true, "reference_answers_prompt": true, "format_stated": true, '
        '"trivially_guessable": false, "asymmetry": "planted"}'
    )
    assert parse_vote(f"drafting {vote}", opened=True)[0] is None
    assert parse_vote(f"done</think>{vote}", opened=True)[0] is not None
    code = "```python\ndef generate(seed, difficulty):\n    pass\n```"
    assert extract_code(f"maybe {code}", opened=True) == (None, "no_code")
    assert parse_verdict("VERDICT: A", opened=True) is None
    assert parse_verdict("hmm</think>\nVERDICT: A", opened=True) == "A"
    assert parse_vote(f"drafting {vote}", opened=None, truncated=True)[0] is None
    assert extract_code(f"maybe {code}", opened=None, truncated=True) == (None, "no_code")
