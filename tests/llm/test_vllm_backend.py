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
        again = backend.generate(PROMPTS, sampling)
        assert [g.texts for g in gens] == [g.texts for g in again]
        # per-completion seeds: prompt 2 alone, with its id, gets what it got in the batch
        (alone,) = backend.generate(PROMPTS[2:], sampling, prompt_ids=[2])
        assert alone.texts == gens[2].texts
        greedy = backend.generate(PROMPTS, SamplingConfig(n=2, temperature=0, max_tokens=6))
        assert all(len(set(g.texts)) == 1 for g in greedy)
    finally:
        backend.close()
