"""The `hf` backend: transformers `generate` in this process, batched, on CPU or GPU.

Prompts go through the tokenizer's chat template (`add_generation_prompt=True`), are padded on
the left and generated in batches of `batch_size` rows (one row per completion; greedy runs
generate one row per prompt and copy it). A completion ends at the first EOS (finish reason
"stop") or after `max_tokens` tokens ("length").

Seeds: each batch is sampled under `torch.manual_seed` of a seed derived from the sampling seed
and the (prompt id, completion index) pairs in it, inside `fork_rng` so the caller's RNG state
is untouched: the same call gives the same texts on the same device and batch size. (Rows in
one batch share a random stream, so a completion also depends on its batch-mates.)

A prompt (plus the tokens to generate) longer than the model's context is said once per
backend, in one `evoenv_cli` log message naming the setting to change, instead of
transformers' two warnings (the tokenizer's and generate's).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import Any

from evoenv_cli.llm.base import (
    BackendError,
    BackendKind,
    BaseBackend,
    Completion,
    Generation,
    Messages,
    SamplingConfig,
    one_line,
    register,
    resolve_model,
)
from evoenv_cli.thinking import template_opens_think

log = logging.getLogger(__name__)

# What makes a stage's prompts long, for the context-length note (other stages' prompts are
# the environments' own, longest at high difficulty levels).
PROMPT_LENGTH_SETTINGS = {
    "synthesize": "synthesize.examples (example environments per request) or synthesize.max_avoid",
    "review": "review.max_source_chars or review.instances",
}


class _GenerateLengthReminder(logging.Filter):
    """Drops generate's 'friendly reminder' about exceeding the context: the backend says it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "exceeded the model's predefined maximum length" not in record.getMessage()


class HFBackend(BaseBackend):
    name = "hf"
    _grad_mode = "inference_mode"  # "no_grad" over a model being trained (see `over`)

    def __init__(
        self,
        model: str,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 16,
        chat_template_kwargs: dict | None = None,
        trust_remote_code: bool = False,
        share_prefill: bool = True,
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        if batch_size < 1:
            raise BackendError(f"hf backend: batch_size must be >= 1, got {batch_size}")
        where = resolve_model(model)
        self.model = model
        self.batch_size = batch_size
        self.share_prefill = share_prefill
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.device = self._device(torch, device)
        self.dtype = self._dtype(torch, dtype, self.device)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(
                where, padding_side="left", trust_remote_code=trust_remote_code
            )
            self.lm = AutoModelForCausalLM.from_pretrained(
                where, dtype=self.dtype, trust_remote_code=trust_remote_code
            ).to(self.device)
        except (OSError, ValueError) as exc:
            raise BackendError(f"hf backend: cannot load model {model!r}: {one_line(exc)}") from None
        self.lm.eval()
        self.tokenizer.padding_side = "left"
        self._adopt()
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.convert_ids_to_tokens(self.eos_ids[0])
            self.pad_id = self.tokenizer.pad_token_id

    @classmethod
    def over(
        cls,
        lm,
        tokenizer,
        name: str,
        *,
        batch_size: int = 16,
        chat_template_kwargs: dict | None = None,
        share_prefill: bool = True,
    ) -> HFBackend:
        """A backend over a model already in memory, e.g. the one a trainer is training: nothing
        is loaded, copied or put in eval mode, and the tokenizer is not changed (rows are padded
        here); gradients stay off while it generates (no_grad, not inference_mode, whose tensors
        a model in training must never cache)."""
        if batch_size < 1:
            raise BackendError(f"hf backend: batch_size must be >= 1, got {batch_size}")
        self = cls.__new__(cls)
        self.model, self.batch_size, self.share_prefill = name, batch_size, share_prefill
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        first = next(lm.parameters())
        self.device, self.dtype = first.device, first.dtype
        self.tokenizer, self.lm = tokenizer, lm
        self._adopt()
        self._grad_mode = "no_grad"
        return self

    def _adopt(self) -> None:
        """What generation needs from the model and its tokenizer: context, EOS and pad ids."""
        model, tok = self.model, self.tokenizer
        self.context = getattr(self.lm.config, "max_position_embeddings", None)
        self._context_noted = False
        reminder = logging.getLogger("transformers.generation.stopping_criteria")
        if not any(isinstance(f, _GenerateLengthReminder) for f in reminder.filters):
            reminder.addFilter(_GenerateLengthReminder())
        if not getattr(tok, "chat_template", None):
            raise BackendError(f"hf backend: {model!r} has no chat template (a base model?); use a chat/instruct model")
        self.opens_think = template_opens_think(tok, self.chat_template_kwargs)
        gc = self.lm.generation_config
        eos = gc.eos_token_id if gc.eos_token_id is not None else tok.eos_token_id
        eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        if tok.eos_token_id is not None and tok.eos_token_id not in eos_ids:
            eos_ids.append(tok.eos_token_id)
        if not eos_ids:
            raise BackendError(f"hf backend: {model!r} defines no EOS token")
        self.eos_ids = eos_ids
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else eos_ids[0]

    # -- setup helpers ---------------------------------------------------------------------------
    @staticmethod
    def _device(torch, device: str):
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            return torch.device(device)
        except RuntimeError as exc:
            raise BackendError(f"hf backend: bad device {device!r}: {exc}") from None

    @staticmethod
    def _dtype(torch, dtype: str, device):
        if dtype == "auto":
            if device.type == "cuda":
                return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
            return torch.float32
        value = getattr(torch, str(dtype), None)
        if not isinstance(value, torch.dtype):
            raise BackendError(f"hf backend: unknown dtype {dtype!r} (auto, float32, bfloat16, float16)")
        return value

    def _note_context(self, encoded: list[list[int]], max_tokens: int) -> None:
        """Say once when prompts (plus the tokens to generate) do not fit the model's context."""
        ctx = self.context
        if self._context_noted or not isinstance(ctx, int) or ctx <= 0:
            return
        over = [len(e) for e in encoded if len(e) + max_tokens > ctx]
        if not over:
            return
        self._context_noted = True
        stage = self.stage or "the stage"
        longest = max(over)
        if longest >= ctx:
            fix = (
                f"shorten them with {PROMPT_LENGTH_SETTINGS[self.stage]}"
                if self.stage in PROMPT_LENGTH_SETTINGS
                else "use lower difficulty levels"
            )
            what = f"are longer than it (up to {longest} tokens)"
        else:
            fix = f"lower {stage}.max_tokens (now {max_tokens})"
            what = f"plus the {max_tokens} tokens to generate exceed it (up to {longest} + {max_tokens})"
        log.warning(
            f"{self.model} reads at most {ctx} tokens (its max_position_embeddings), and "
            f"{len(over)} of {len(encoded)} prompts {what}, so answers to them are unreliable: "
            f"{fix}, or use a model with a longer context"
        )

    # -- generation ------------------------------------------------------------------------------
    def render(self, conversation: Messages) -> str:
        """The prompt text the model sees: the chat template with the assistant turn opened."""
        return self.tokenizer.apply_chat_template(
            list(conversation), tokenize=False, add_generation_prompt=True, **self.chat_template_kwargs
        )

    def generate(
        self, prompts: Sequence[Messages], sampling: SamplingConfig, *, prompt_ids: Sequence[int] | None = None
    ) -> list[Generation]:
        ids = self._check(prompts, sampling, prompt_ids)
        if not prompts:
            return []
        encoded = [
            self.tokenizer(self.render(p), add_special_tokens=False, verbose=False)["input_ids"] for p in prompts
        ]
        self._note_context(encoded, sampling.max_tokens)
        per_prompt = 1 if sampling.greedy else sampling.n  # greedy copies are identical
        rows = [(i, j) for i in range(len(prompts)) for j in range(per_prompt)]
        rows.sort(key=lambda r: (len(encoded[r[0]]), r))  # less padding per batch
        results: dict[tuple[int, int], Completion] = {}
        errors: dict[int, str] = {}
        first_exc: BaseException | None = None
        self._report(0, len(rows))
        for start in range(0, len(rows), self.batch_size):
            batch = rows[start : start + self.batch_size]
            try:
                results.update(self._run(batch, encoded, ids, sampling))
            except Exception as exc:  # recorded per prompt; raised only if nothing worked
                first_exc = first_exc or exc
                for i, _ in batch:
                    errors.setdefault(i, one_line(exc))
            self._report(min(start + self.batch_size, len(rows)), len(rows))
        self.generated_tokens += sum(c.tokens for c in results.values())
        if first_exc is not None and not results:
            raise first_exc
        out = []
        for i in range(len(prompts)):
            comps = []
            for j in range(sampling.n):
                got = results.get((i, 0 if sampling.greedy else j))
                comps.append(
                    Completion(got.text, got.tokens, got.finish_reason, got.seed) if got else Completion("", 0, "error")
                )
            out.append(Generation(comps, len(encoded[i]), errors.get(i)))
        return out

    def _run(self, batch, encoded, ids, sampling: SamplingConfig) -> dict:
        """Generate one batch of rows; on out-of-memory, split it in halves and go on."""
        import torch

        try:
            return self._run_batch(batch, encoded, ids, sampling)
        except torch.OutOfMemoryError:
            if len(batch) == 1:
                raise
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            half = len(batch) // 2
            return {
                **self._run(batch[:half], encoded, ids, sampling),
                **self._run(batch[half:], encoded, ids, sampling),
            }

    def _run_batch(self, batch, encoded, ids, sampling: SamplingConfig) -> dict:
        import torch

        width = max(len(encoded[i]) for i, _ in batch)
        input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, (i, _) in enumerate(batch):
            seq = encoded[i]
            input_ids[r, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
            mask[r, width - len(seq) :] = 1
        kwargs: dict[str, Any] = dict(
            max_new_tokens=sampling.max_tokens,
            pad_token_id=self.pad_id,
            eos_token_id=self.eos_ids,
            do_sample=not sampling.greedy,
        )
        if sampling.greedy:  # neutral values: no "sampling flags set but do_sample=False" noise
            kwargs.update(temperature=1.0, top_p=1.0, top_k=None)
        else:
            kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=None)
        seed = None
        if sampling.seed is not None and not sampling.greedy:
            keys = ",".join(f"{ids[i]}:{j}" for i, j in batch)
            digest = hashlib.sha256(f"evoenv-hf:{sampling.seed}:{keys}".encode()).digest()
            seed = int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        with torch.random.fork_rng(devices=devices, enabled=seed is not None), getattr(torch, self._grad_mode)():
            cache = self._shared_prefill(batch, input_ids, mask)
            if cache is not None:
                kwargs[self._cache_kwarg()] = cache
            if seed is not None:
                torch.manual_seed(seed)
            out = self.lm.generate(input_ids=input_ids, attention_mask=mask, **kwargs)
        generated = out[:, width:].tolist()
        eos = set(self.eos_ids)
        results = {}
        for (i, j), toks in zip(batch, generated):
            stop_at = next((k for k, t in enumerate(toks) if t in eos), None)
            if stop_at is not None:
                body, n_tokens, reason = toks[:stop_at], stop_at + 1, "stop"
            else:
                body, n_tokens = toks, len(toks)
                reason = "length" if n_tokens >= sampling.max_tokens else "stop"
            text = self.tokenizer.decode(body, skip_special_tokens=True)
            results[(i, j)] = Completion(text, n_tokens, reason, seed)
        return results

    def _shared_prefill(self, batch, input_ids, mask):
        """When a batch holds several completions of one prompt, read each distinct prompt once:
        its KV cache is computed on the distinct rows and copied to every completion (on a CPU
        the prompt dominates the cost of short answers). None when every row is distinct, or
        the model's cache cannot be shared this way."""
        import torch

        firsts: dict[int, int] = {}
        for r, (i, _) in enumerate(batch):
            firsts.setdefault(i, r)
        if len(firsts) == len(batch) or input_ids.shape[1] < 2 or not self.share_prefill:
            return None
        rows = torch.tensor(list(firsts.values()), device=input_ids.device)
        try:
            pre = self.lm.generate(
                input_ids=input_ids[rows],
                attention_mask=mask[rows],
                max_new_tokens=1,
                do_sample=False,
                temperature=1.0,
                top_p=1.0,
                top_k=None,
                pad_token_id=self.pad_id,
                eos_token_id=self.eos_ids,
                return_dict_in_generate=True,
            )
            cache = getattr(pre, "cache", None) or getattr(pre, "past_key_values", None)
            if cache is None or not hasattr(cache, "batch_select_indices"):
                raise TypeError(f"{type(cache).__name__} cannot be shared")
            cache.crop(-1)  # the last prompt token is read again, with the real sampling settings
            order = list(firsts)
            cache.batch_select_indices(torch.tensor([order.index(i) for i, _ in batch], device=input_ids.device))
            return cache
        except (TypeError, ValueError, AttributeError, NotImplementedError):
            self.share_prefill = False  # this model's cache does not work so: plain batches from now on
            return None

    @staticmethod
    def _cache_kwarg() -> str:
        """transformers >= 5.2x names generate's cache `cache` (past_key_values is deprecated)."""
        try:
            from transformers.generation.utils import ALL_CACHE_NAMES
        except ImportError:
            return "past_key_values"
        return "cache" if "cache" in ALL_CACHE_NAMES else "past_key_values"

    def close(self) -> None:
        lm = getattr(self, "lm", None)
        if lm is not None:
            self.lm = None
            if self.device.type == "cuda":
                import torch

                del lm
                torch.cuda.empty_cache()


register(
    BackendKind(
        "hf",
        __name__,
        "HFBackend",
        "transformers, in-process",
        ("device", "dtype"),
        local_model=True,
        follows_policy=True,
    )
)
