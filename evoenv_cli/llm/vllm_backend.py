"""The `vllm` backend: an in-process `vllm.LLM` (GPU boxes; `pip install 'evoenv[vllm]'`).

Every request of a `generate` call goes to vLLM as one batch through `LLM.chat` (the model's
chat template, `add_generation_prompt=True`), one request per completion with `n=1` and its own
`SamplingParams.seed = request_seed(sampling.seed, prompt_id, j)`: completion `j` of a prompt is
the same whatever `n` or batch it was asked in. (vLLM's prefix cache shares the prompt between
the `n` requests; greedy runs send one request per prompt and copy it.)

If the batch fails as a whole (say one prompt is longer than the context), each prompt is
retried alone so one bad prompt costs only its own completions (finish reason "error").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from evoenv_cli.llm.base import (
    NEEDS_VLLM,
    BackendUnavailable,
    BaseBackend,
    Completion,
    Generation,
    Messages,
    SamplingConfig,
    normalize_finish_reason,
    one_line,
    request_seed,
    resolve_model,
)


def _import_vllm():
    try:
        import vllm
    except ImportError:
        raise BackendUnavailable(NEEDS_VLLM) from None
    return vllm


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
        **engine_kwargs: Any,
    ):
        where = resolve_model(model)
        vllm = _import_vllm()
        self.model = model
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self._SamplingParams = vllm.SamplingParams
        kwargs = dict(
            model=where,
            tensor_parallel_size=tensor_parallel_size,
            dtype=dtype,
            seed=seed,
            gpu_memory_utilization=gpu_memory_utilization,
            enforce_eager=enforce_eager,
            trust_remote_code=trust_remote_code,
            **engine_kwargs,
        )
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        self.llm = vllm.LLM(**kwargs)

    def _params(self, sampling: SamplingConfig, seed: int | None):
        return self._SamplingParams(
            n=1, temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens, seed=seed
        )

    def _chat(self, conversations: list, params: list) -> list:
        kwargs: dict[str, Any] = {"use_tqdm": self.progress is not None}  # vLLM's own bar
        if self.chat_template_kwargs:
            kwargs["chat_template_kwargs"] = self.chat_template_kwargs
        return self.llm.chat(conversations, params, add_generation_prompt=True, **kwargs)

    def generate(
        self, prompts: Sequence[Messages], sampling: SamplingConfig, *, prompt_ids: Sequence[int] | None = None
    ) -> list[Generation]:
        ids = self._check(prompts, sampling, prompt_ids)
        if not prompts:
            return []
        per_prompt = 1 if sampling.greedy else sampling.n
        rows = [(i, j) for i in range(len(prompts)) for j in range(per_prompt)]
        seeds = [request_seed(sampling.seed, ids[i], j) for i, j in rows]
        convs = [list(prompts[i]) for i, _ in rows]
        params = [self._params(sampling, s) for s in seeds]
        errors: dict[int, str] = {}
        try:
            outputs: list = self._chat(convs, params)
        except Exception as batch_exc:  # isolate the prompt(s) that broke the batch
            outputs = []
            for r in range(len(rows)):
                try:
                    outputs.extend(self._chat([convs[r]], [params[r]]))
                except Exception as exc:
                    outputs.append(None)
                    errors.setdefault(rows[r][0], one_line(exc))
            if all(o is None for o in outputs):
                raise batch_exc
        comps: dict[tuple[int, int], Completion] = {}
        prompt_tokens = [0] * len(prompts)
        for (i, j), seed, out in zip(rows, seeds, outputs):
            if out is None:
                comps[(i, j)] = Completion("", 0, "error", seed)
                continue
            prompt_tokens[i] = len(out.prompt_token_ids or [])
            o = out.outputs[0]
            reason = "error" if o.finish_reason == "abort" else normalize_finish_reason(o.finish_reason)
            comps[(i, j)] = Completion(o.text, len(o.token_ids), reason, seed)
            self.generated_tokens += len(o.token_ids)
            if reason == "error":
                errors.setdefault(i, "request aborted by vLLM")
        result = []
        for i in range(len(prompts)):
            got = [comps[(i, j)] for j in range(per_prompt)]
            if per_prompt < sampling.n:
                got = [dataclasses.replace(got[0]) for _ in range(sampling.n)]
            result.append(Generation(got, prompt_tokens[i], errors.get(i)))
        return result

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        self.llm = None
        if llm is None:
            return
        del llm
        try:  # free the GPU for whatever comes next (training, another engine)
            import gc

            import torch

            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception:
            pass
