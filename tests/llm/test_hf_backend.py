"""The `hf` backend for real, on the tiny model: batched chat generation, n per prompt, token
counts, finish reasons (length and EOS), seeded sampling, greedy decoding, bad arguments."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from evoenv_cli.llm import BackendError, SamplingConfig, make_backend  # noqa: E402

PROMPTS = [
    [{"role": "user", "content": "What is 2 + 2?"}],
    [
        {"role": "system", "content": "You write Python."},
        {"role": "user", "content": "Write a function that returns the longest increasing subsequence."},
    ],
    [{"role": "user", "content": "Hi"}],
]


@pytest.fixture(scope="module")
def model_dir(tiny_model):
    return tiny_model


@pytest.fixture(scope="module")
def hf(model_dir):
    backend = make_backend("hf", str(model_dir), device="cpu", batch_size=4)
    yield backend
    backend.close()


def test_a_batch_of_prompts_gets_n_completions_each_in_order(hf):
    sampling = SamplingConfig(n=2, temperature=1.0, max_tokens=12, seed=1)
    gens = hf.generate(PROMPTS, sampling)
    assert len(gens) == 3
    for conv, g in zip(PROMPTS, gens):
        assert g.ok and len(g.completions) == 2
        # prompt tokens: the chat-templated prompt, without padding
        expected = len(hf.tokenizer(hf.render(conv), add_special_tokens=False)["input_ids"])
        assert g.prompt_tokens == expected > 0
        for c in g.completions:
            assert isinstance(c.text, str) and 0 < c.tokens <= 12
            assert c.finish_reason in ("stop", "length")
            if c.finish_reason == "length":
                assert c.tokens == 12
            assert c.seed is not None
    assert gens[1].prompt_tokens > gens[0].prompt_tokens > gens[2].prompt_tokens  # order kept
    # rows of more than one batch (3 prompts x 2 = 6 rows, batch_size 4) all came back
    assert len({c.text for g in gens for c in g.completions}) > 1


def test_the_same_seed_gives_the_same_texts(hf):
    s1 = SamplingConfig(n=2, temperature=1.0, max_tokens=10, seed=7)
    a, b = hf.generate(PROMPTS, s1), hf.generate(PROMPTS, s1)
    assert [g.texts for g in a] == [g.texts for g in b]
    c = hf.generate(PROMPTS, SamplingConfig(n=2, temperature=1.0, max_tokens=10, seed=8))
    assert [g.texts for g in a] != [g.texts for g in c]
    assert a[0].texts[0] != a[0].texts[1]  # the n samples differ


def test_temperature_zero_is_greedy(hf):
    g1 = hf.generate(PROMPTS, SamplingConfig(n=3, temperature=0.0, max_tokens=8, seed=1))
    g2 = hf.generate(PROMPTS, SamplingConfig(n=3, temperature=0.0, max_tokens=8, seed=2))
    assert [g.texts for g in g1] == [g.texts for g in g2]
    for g in g1:
        assert len(g.completions) == 3 and len(set(g.texts)) == 1


def test_eos_ends_a_completion_with_stop(model_dir):
    """Zero the final norm: every logit is 0, greedy picks token 0 (<|endoftext|>, an EOS)."""
    backend = make_backend("hf", str(model_dir), device="cpu")
    backend.lm.model.norm.weight.data.zero_()
    (g,) = backend.generate(PROMPTS[:1], SamplingConfig(n=2, temperature=0, max_tokens=5))
    assert [(c.text, c.tokens, c.finish_reason) for c in g.completions] == [("", 1, "stop")] * 2
    backend.close()


def test_max_tokens_without_eos_is_length(hf):
    gens = hf.generate(PROMPTS, SamplingConfig(n=1, temperature=1.0, max_tokens=1, seed=3))
    for g in gens:
        (c,) = g.completions
        assert c.tokens == 1 and c.finish_reason in ("length", "stop")
    assert any(g.completions[0].finish_reason == "length" for g in gens)


def test_empty_call_and_bad_arguments(hf, model_dir, tmp_path):
    assert hf.generate([], SamplingConfig()) == []
    with pytest.raises(BackendError, match="prompt 1"):
        hf.generate([PROMPTS[0], [{"role": "user"}]], SamplingConfig())
    with pytest.raises(BackendError, match="prompt 0"):
        hf.generate(["just a string"], SamplingConfig())
    with pytest.raises(BackendError, match="prompt_ids"):
        hf.generate(PROMPTS, SamplingConfig(), prompt_ids=[1])
    with pytest.raises(BackendError, match="did you mean 'device'"):
        make_backend("hf", str(model_dir), devcie="cpu")
    with pytest.raises(BackendError, match="missing: no such model folder"):
        make_backend("hf", str(tmp_path / "missing"))


def test_completions_of_one_prompt_share_its_prefill_and_sample_the_same(model_dir):
    """n completions of a prompt read the prompt once (its cache copied to each row): the texts
    are exactly those of separate rows, and progress reaches the total."""
    shared = make_backend("hf", str(model_dir), device="cpu", batch_size=6)
    plain = make_backend("hf", str(model_dir), device="cpu", batch_size=6, share_prefill=False)
    seen = []
    shared.progress = lambda done, total: seen.append((done, total))
    sampling = SamplingConfig(n=3, temperature=1.0, max_tokens=10, seed=4)
    a = [g.texts for g in shared.generate(PROMPTS, sampling)]
    b = [g.texts for g in plain.generate(PROMPTS, sampling)]
    assert a == b and shared.share_prefill
    assert seen[0] == (0, 9) and seen[-1] == (9, 9)
    assert shared.generated_tokens > 0
