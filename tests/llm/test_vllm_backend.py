"""The `vllm` backend: a real in-process vLLM on the tiny model (head_dim 64, which vLLM's CPU
build needs) where vLLM imports (`make test-vllm`, CI's vLLM lane); otherwise the one-line error
that says how to get it."""

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
# a real engine: vLLM importable (its CPU build under `make test-vllm`); skipped before any fixture runs
needs_vllm = pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed (make test-vllm builds a venv with it)")
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
@pytest.mark.slow
@needs_vllm
def test_real_vllm_on_the_tiny_model(vllm_tiny_model):
    import psutil

    me = psutil.Process()
    before, threads_before = {p.pid for p in me.children(recursive=True)}, me.num_threads()
    model = str(vllm_tiny_model)
    backend = make_backend("vllm", model, dtype="float32", max_model_len=512, enforce_eager=True)
    # on the CPU build the KV cache is an explicit size, not a share of host memory
    assert backend.on_cpu and backend.kv_per_token == 2 * 2 * 2 * 64 * 4
    # the engine core's process (multiprocessing's resource tracker, started beside it, stays
    # for this process's life and holds nothing of the engine)
    engine = [
        p
        for p in me.children(recursive=True)
        if p.pid not in before and "resource_tracker" not in " ".join(p.cmdline())
    ]
    held = sum(p.memory_info().rss for p in engine)
    assert engine and held > 0
    try:
        sampling = SamplingConfig(n=2, temperature=1.0, max_tokens=8, seed=4)
        gens = backend.generate(PROMPTS, sampling)
        assert len(gens) == 3
        for g in gens:
            assert g.ok and len(g.completions) == 2 and g.prompt_tokens > 0
            for c in g.completions:
                assert 0 < c.tokens <= 8 and c.finish_reason in ("stop", "length")
        # temperature and top_p alone: the model's generation_config (top_k 1) is not applied
        assert all(len(set(g.texts)) == 2 for g in gens)
        greedy = backend.generate(PROMPTS, SamplingConfig(n=2, temperature=0, max_tokens=6))
        assert all(len(set(g.texts)) == 1 for g in greedy)
        threads_with_engine = me.num_threads()
    finally:
        backend.close()
    # close() shut the engine down there and then: its process (the weights and KV cache it
    # held) is gone, and threads this process ran for it have ended (the tokenizer's pool stays)
    left = [p.cmdline() for p in engine if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, f"{held} bytes were held by the engine's processes, and these still run: {left}"
    threads = (threads_before, threads_with_engine, me.num_threads())
    assert threads[2] < threads[1], f"threads before the engine, with it, after close(): {threads}"
    # by default no request carries a seed, so sampled completions depend on the engine core's
    # scheduling (vLLM does not promise them; CI once saw a fresh engine shift the draws) and
    # only greedy ones are reproducible. request_seeds=True sends a seed per prompt: the same
    # prompt ids give the same samples however the call is batched, on any engine.
    fresh = make_backend("vllm", model, dtype="float32", max_model_len=512, enforce_eager=True, request_seeds=True)
    try:
        again = fresh.generate(PROMPTS, SamplingConfig(n=2, temperature=0, max_tokens=6))
        assert [g.texts for g in again] == [g.texts for g in greedy]
        seeded = fresh.generate(PROMPTS, sampling)
        assert all(len(set(g.texts)) == 2 for g in seeded)
        assert seeded[0].completions[1].seed == seeded[0].completions[0].seed + 1
        assert [g.texts for g in fresh.generate(PROMPTS, sampling)] == [g.texts for g in seeded]
        # the last two prompts alone, under their ids in the full call: the same draws
        alone = fresh.generate(PROMPTS[1:], sampling, prompt_ids=[1, 2])
        assert [g.texts for g in alone] == [g.texts for g in seeded[1:]]
    finally:
        fresh.close()


@pytest.mark.vllm
@pytest.mark.slow
@needs_vllm
def test_real_vllm_sizes_its_context_from_the_call(vllm_tiny_model):
    """Without max_model_len the engine is built at the first call with room for its longest
    prompt plus max_tokens, not the model's whole context."""
    from evoenv_cli.llm.vllm_backend import CONTEXT_STEP

    backend = make_backend("vllm", str(vllm_tiny_model), dtype="float32", enforce_eager=True)
    try:
        (g,) = backend.generate(PROMPTS[:1], SamplingConfig(max_tokens=8))
        assert g.ok and backend.max_model_len == min(CONTEXT_STEP, backend.model_context)
    finally:
        backend.close()


class RecordingVLLM:
    """vLLM's two entry points the backend uses (`LLM`, `SamplingParams`), recording what they
    are given: vLLM cannot be installed here, and what is checked is what evoenv asks of it (the
    real engine runs in the tests above, under `make test-vllm`)."""

    def __init__(self, on_cpu: bool = False):
        self.engines, self.params, self.shutdowns = [], [], 0
        self.platforms = type("platforms", (), {"current_platform": type("P", (), {"is_cpu": lambda: on_cpu})})
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
                each = params if isinstance(params, list) else [params] * len(conversations)
                return [Out(p.kwargs["n"], p.kwargs["max_tokens"]) for p in each]

            def shutdown(self):
                recorder.shutdowns += 1

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
    assert "kv_cache_memory_bytes" not in engine  # on a GPU the share decides
    longest = max(prompt_tokens(backend.tokenizer, p) for p in PROMPTS)
    assert engine["max_model_len"] == vllm_backend.context_for(longest + 100, backend.model_context)
    assert engine["max_model_len"] <= backend.model_context
    assert all("seed" not in p for p in fake.params) and fake.params[0]["n"] == 3
    backend.generate(PROMPTS, SamplingConfig(max_tokens=50))
    assert len(fake.engines) == 1  # a call that fits reuses the engine
    backend.model_context = None  # a model whose context the config does not give
    backend.generate(PROMPTS, SamplingConfig(max_tokens=5000))
    assert len(fake.engines) == 2 and fake.engines[1]["max_model_len"] >= longest + 5000
    assert fake.shutdowns == 1  # the smaller engine was shut down before the larger one started
    fixed = vllm_backend.VLLMBackend(str(tiny_model), max_model_len=4096)
    assert fake.engines[-1]["max_model_len"] == 4096 and fixed.max_model_len == 4096


def test_request_seeds_send_one_seed_per_prompt_id(tiny_model, monkeypatch):
    """request_seeds=True (reproducible samples): each prompt's request carries the seed of its
    prompt id, the same one the openai backend sends; greedy calls carry none."""
    from evoenv_cli.llm import vllm_backend
    from evoenv_cli.llm.base import request_seed

    fake = RecordingVLLM()
    monkeypatch.setattr(vllm_backend, "_import_vllm", lambda: fake)
    backend = vllm_backend.VLLMBackend(str(tiny_model), request_seeds=True)
    gens = backend.generate(PROMPTS, SamplingConfig(n=2, max_tokens=10, seed=5), prompt_ids=[7, 8, 9])
    sent = [p["seed"] for p in fake.params[-3:]]
    assert sent == [request_seed(5, i, 0) for i in (7, 8, 9)]
    assert [c.seed for c in gens[1].completions] == [sent[1], sent[1] + 1]  # vLLM's children: seed + index
    backend.generate(PROMPTS, SamplingConfig(n=2, temperature=0, max_tokens=10))
    assert all("seed" not in p for p in fake.params[-3:])


def test_on_a_cpu_the_kv_cache_is_sized_not_a_share_of_host_memory(tiny_model, monkeypatch):
    """vLLM's CPU build reads gpu_memory_utilization as the share of host memory to reserve (0.9
    of a 24 GB box refuses to start); there the engine gets kv_cache_memory_bytes instead."""
    from evoenv_cli.llm import vllm_backend

    fake = RecordingVLLM(on_cpu=True)
    monkeypatch.setattr(vllm_backend, "_import_vllm", lambda: fake)
    backend = vllm_backend.VLLMBackend(str(tiny_model), max_model_len=1024)
    # the tiny model: 2 layers x 2 KV heads x head_dim 16, K and V at 4 bytes
    assert backend.kv_per_token == 2 * 2 * 2 * 16 * 4
    assert fake.engines[-1]["kv_cache_memory_bytes"] == vllm_backend.CPU_KV_SEQUENCES * 1024 * backend.kv_per_token
    given = vllm_backend.VLLMBackend(str(tiny_model), max_model_len=1024, kv_cache_memory_bytes=1 << 26)
    assert fake.engines[-1]["kv_cache_memory_bytes"] == 1 << 26
    backend.close(), given.close(), given.close()
    assert fake.shutdowns == 2  # once per engine; a second close is a no-op


def test_context_is_rounded_up_and_capped_by_the_model():
    from evoenv_cli.llm.vllm_backend import CONTEXT_STEP, context_for

    assert context_for(1, None) == CONTEXT_STEP
    assert context_for(CONTEXT_STEP + 1, None) == 2 * CONTEXT_STEP
    assert context_for(40_000, 32_768) == 32_768
    # Qwen3-4B-Thinking-2507 in single-gpu.yaml's training budget: far below its 262,144
    assert context_for(1_500 + 16_384, 262_144) == 18_432
