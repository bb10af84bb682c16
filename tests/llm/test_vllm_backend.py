"""The `vllm` backend: a real in-process vLLM on the tiny model (head_dim 64, which vLLM's CPU
build needs) where vLLM imports; otherwise the one-line error that says how to get it."""

from __future__ import annotations

import importlib.util
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from evoenv_cli.errors import InputError  # noqa: E402
from evoenv_cli.llm import BackendUnavailable, SamplingConfig, make_backend  # noqa: E402
from evoenv_cli.llm.vllm_backend import NEEDS_VLLM  # noqa: E402

HAS_VLLM = importlib.util.find_spec("vllm") is not None
PROMPTS = [
    [{"role": "user", "content": "What is 2 + 2?"}],
    [{"role": "system", "content": "You write Python."}, {"role": "user", "content": "Sort a list."}],
    [{"role": "user", "content": "Hi"}],
]


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here")
def test_without_vllm_the_error_is_one_line_and_says_how_to_get_it():
    with pytest.raises(BackendUnavailable) as e:
        make_backend("vllm", "any/model", tensor_parallel_size=1)
    assert str(e.value) == NEEDS_VLLM and "\n" not in str(e.value)
    assert isinstance(e.value, InputError)  # the CLI maps it to exit 2, one line


@pytest.mark.vllm
def test_real_vllm_on_the_tiny_model(tmp_path):
    pytest.importorskip("vllm")
    from evoenv_cli.llm.tiny import build_tiny_model

    build_tiny_model(tmp_path / "tiny", head_dim=64)
    backend = make_backend("vllm", str(tmp_path / "tiny"), dtype="float32", max_model_len=512, enforce_eager=True)
    try:
        sampling = SamplingConfig(n=2, temperature=1.0, max_tokens=8, seed=4)
        gens = backend.generate(PROMPTS, sampling)
        assert len(gens) == 3
        for g in gens:
            assert g.ok and len(g.completions) == 2 and g.prompt_tokens > 0
            for c in g.completions:
                assert 0 < c.tokens <= 8 and c.finish_reason in ("stop", "length")
        greedy = backend.generate(PROMPTS, SamplingConfig(n=2, temperature=0, max_tokens=6))
        assert all(len(set(g.texts)) == 1 for g in greedy)
    finally:
        backend.close()
    # determinism is the engine's (seeded once, no seed per request): a fresh engine with the
    # same seed gives the same completions to the same call
    fresh = make_backend("vllm", str(tmp_path / "tiny"), dtype="float32", max_model_len=512, enforce_eager=True)
    try:
        assert [g.texts for g in fresh.generate(PROMPTS, sampling)] == [g.texts for g in gens]
    finally:
        fresh.close()


@pytest.mark.vllm
def test_real_vllm_sizes_its_context_from_the_call(tmp_path):
    """Without max_model_len the engine is built at the first call with room for its longest
    prompt plus max_tokens, not the model's whole context."""
    pytest.importorskip("vllm")
    from evoenv_cli.llm.tiny import build_tiny_model
    from evoenv_cli.llm.vllm_backend import CONTEXT_STEP

    build_tiny_model(tmp_path / "tiny", head_dim=64)
    backend = make_backend("vllm", str(tmp_path / "tiny"), dtype="float32", enforce_eager=True)
    try:
        (g,) = backend.generate(PROMPTS[:1], SamplingConfig(max_tokens=8))
        assert g.ok and backend.max_model_len == min(CONTEXT_STEP, backend.model_context)
    finally:
        backend.close()


class RecordingVLLM:
    """vLLM's two entry points the backend uses (`LLM`, `SamplingParams`), recording what they
    are given: vLLM cannot be installed here, and what is checked is what evoenv asks of it (the
    real engine runs in the tests above, under `make test-vllm`)."""

    def __init__(self):
        self.engines, self.params = [], []
        recorder = self

        class SamplingParams:
            def __init__(self, **kwargs):
                self.kwargs = kwargs
                recorder.params.append(kwargs)

        class Out:
            def __init__(self, n, max_tokens):
                self.prompt_token_ids = [1, 2, 3]
                self.outputs = [
                    type("O", (), {"text": f"c{j}", "token_ids": [5] * max_tokens, "finish_reason": "length"})()
                    for j in range(n)
                ]

        class LLM:
            def __init__(self, **kwargs):
                recorder.engines.append(kwargs)

            def chat(self, conversations, params, **kwargs):
                return [Out(params.kwargs["n"], params.kwargs["max_tokens"]) for _ in conversations]

        self.LLM, self.SamplingParams = LLM, SamplingParams


def test_one_engine_seed_no_request_seeds_and_a_context_sized_to_the_call(tiny_model, monkeypatch):
    from evoenv_cli.llm import vllm_backend
    from evoenv_cli.llm.base import prompt_tokens

    fake = RecordingVLLM()
    monkeypatch.setattr(vllm_backend, "_import_vllm", lambda: fake)
    backend = vllm_backend.VLLMBackend(str(tiny_model), seed=7, gpu_memory_utilization=0.5)
    assert fake.engines == []  # nothing is sized before a call says what it needs
    gens = backend.generate(PROMPTS, SamplingConfig(n=3, max_tokens=100, seed=11))
    assert [len(g.completions) for g in gens] == [3, 3, 3]
    assert all(c.finish_reason == "length" for g in gens for c in g.completions)
    (engine,) = fake.engines
    assert engine["seed"] == 7 and engine["gpu_memory_utilization"] == 0.5
    longest = max(prompt_tokens(backend.tokenizer, p) for p in PROMPTS)
    assert engine["max_model_len"] == vllm_backend.context_for(longest + 100, backend.model_context)
    assert engine["max_model_len"] <= backend.model_context
    assert all("seed" not in p for p in fake.params) and fake.params[0]["n"] == 3
    backend.generate(PROMPTS, SamplingConfig(max_tokens=50))
    assert len(fake.engines) == 1  # a call that fits reuses the engine
    backend.model_context = None  # a model whose context the config does not give
    backend.generate(PROMPTS, SamplingConfig(max_tokens=5000))
    assert len(fake.engines) == 2 and fake.engines[1]["max_model_len"] >= longest + 5000
    fixed = vllm_backend.VLLMBackend(str(tiny_model), max_model_len=4096)
    assert fake.engines[-1]["max_model_len"] == 4096 and fixed.max_model_len == 4096


def test_context_is_rounded_up_and_capped_by_the_model():
    from evoenv_cli.llm.vllm_backend import CONTEXT_STEP, context_for

    assert context_for(1, None) == CONTEXT_STEP
    assert context_for(CONTEXT_STEP + 1, None) == 2 * CONTEXT_STEP
    assert context_for(40_000, 32_768) == 32_768
    # Qwen3-4B-Thinking-2507 in single-gpu.yaml's training budget: far below its 262,144
    assert context_for(1_500 + 16_384, 262_144) == 18_432
