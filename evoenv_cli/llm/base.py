"""The one small interface every generation backend implements.

A stage hands a backend a list of chat conversations and a `SamplingConfig`, and gets back one
`Generation` per conversation, in order, each with exactly `n` `Completion`s (text, token count,
finish reason). Stages never see which backend produced them.

Failures are data: a request that still fails after the backend's retries gives completions
with `finish_reason == "error"` and the message in `Generation.error`; `generate` raises only
when nothing at all could be done (every request failed to connect, the model cannot load).

Seeds: completion `j` of the prompt with id `p` is sampled with `request_seed(sampling.seed,
p, j)`. Prompt ids default to positions in the call (0, 1, ...); a stage that generates in
chunks (or resumes) passes stable ids (`prompt_ids=`) so a prompt gets the same seeds however
the work is split. Backends honour the seeds where they can: `openai` per request (servers
differ in how faithfully), `hf` per batch (same call, same output); `vllm` seeds its engine once
instead (a seed per request would put vLLM's sampler on its slow per-request path).

Heavy libraries (torch, transformers, vllm) are imported only when a backend is built.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import importlib.util
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from evoenv_cli.errors import InputError
from evoenv_cli.thinking import final_text, strip_thinking

Messages = list[dict[str, Any]]  # one chat conversation: [{"role": ..., "content": ...}, ...]
FINISH_REASONS = ("stop", "length", "error")


class BackendError(InputError, ValueError):
    """A backend asked for wrongly (unknown kind, bad option, missing model): exit 2 in the CLI."""


class BackendUnavailable(InputError, RuntimeError):
    """The backend's library is not installed here (e.g. vLLM on a CPU box): exit 2 in the CLI."""


class BackendConnectionError(RuntimeError):
    """Every request failed to reach the server: a run error (exit 1), naming the URL."""


@dataclass(frozen=True)
class SamplingConfig:
    """How to sample: `n` completions per prompt; temperature 0 means greedy."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int | None = 0  # None: unseeded (not reproducible)

    def __post_init__(self) -> None:
        problems = []
        if not isinstance(self.n, int) or self.n < 1:
            problems.append(f"n must be an integer >= 1, got {self.n!r}")
        if not self.temperature >= 0:
            problems.append(f"temperature must be >= 0, got {self.temperature!r}")
        if not 0 < self.top_p <= 1:
            problems.append(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            problems.append(f"max_tokens must be an integer >= 1, got {self.max_tokens!r}")
        if self.seed is not None and not isinstance(self.seed, int):
            problems.append(f"seed must be an integer or None, got {self.seed!r}")
        if problems:
            raise BackendError("sampling: " + "; ".join(problems))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def record(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class Completion:
    text: str
    tokens: int  # generated tokens (0 when the backend could not say)
    finish_reason: str  # "stop" (EOS or stop string) | "length" (hit max_tokens) | "error"
    seed: int | None = None  # the seed of the request that produced it


@dataclass
class Generation:
    """What one prompt got: exactly `n` completions, in order."""

    completions: list[Completion]
    prompt_tokens: int  # 0 when unknown (e.g. the request failed)
    error: str | None = None  # set when any completion failed after retries

    @property
    def texts(self) -> list[str]:
        return [c.text for c in self.completions]

    @property
    def ok(self) -> bool:
        return self.error is None

    def record(self) -> dict:
        return dataclasses.asdict(self)


@runtime_checkable
class Backend(Protocol):
    name: str  # "hf" | "openai" | "vllm"
    model: str

    def generate(
        self, prompts: Sequence[Messages], sampling: SamplingConfig, *, prompt_ids: Sequence[int] | None = None
    ) -> list[Generation]: ...

    def close(self) -> None: ...


class BaseBackend:
    """Shared plumbing: context manager, argument checks, seeds, progress."""

    name = "base"
    model = ""
    # Set by a caller that shows progress: called as progress(done, total) with completions
    # finished so far in the current `generate` call (0 at its start). Never raises into it.
    progress: Callable[[int, int], None] | None = None
    generated_tokens = 0  # over the backend's life, for run statistics
    # the chat template opens `<think>` in the prompt (see `thinking`): set by backends that
    # render the template themselves; None: not known (a server's template)
    opens_think: bool | None = None

    def _report(self, done: int, total: int) -> None:
        if self.progress is not None:
            try:
                self.progress(done, total)
            except Exception:  # a display problem must never cost a generation
                pass

    stage: str | None = None  # the stage it serves (set by the CLI), named in its notes

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.model}>"

    @staticmethod
    def _check(prompts: Sequence[Messages], sampling: SamplingConfig, prompt_ids: Sequence[int] | None) -> list[int]:
        if not isinstance(sampling, SamplingConfig):
            raise BackendError(f"sampling must be a SamplingConfig, got {type(sampling).__name__}")
        for i, conv in enumerate(prompts):
            if (
                not isinstance(conv, (list, tuple))
                or not conv
                or not all(
                    isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                    for m in conv
                )
            ):
                raise BackendError(
                    f"prompt {i}: expected a non-empty list of chat messages {{'role': str, 'content': str}}"
                )
        if prompt_ids is None:
            return list(range(len(prompts)))
        ids = list(prompt_ids)
        if len(ids) != len(prompts):
            raise BackendError(f"prompt_ids has {len(ids)} ids for {len(prompts)} prompts")
        return ids


def request_seed(seed: int | None, prompt_id: int, j: int) -> int | None:
    """The seed of completion `j` of prompt `prompt_id`: stable, in [0, 2**31), None if unseeded."""
    if seed is None:
        return None
    digest = hashlib.sha256(f"evoenv:{seed}:{prompt_id}:{j}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def prompt_tokens(tokenizer: Any, prompt: Messages | str, chat_template_kwargs: dict | None = None) -> int:
    """How many tokens a prompt is once the model sees it: chat messages rendered by the chat
    template with the assistant turn opened, text as it is."""
    if not isinstance(prompt, str):
        prompt = tokenizer.apply_chat_template(
            list(prompt), tokenize=False, add_generation_prompt=True, **(chat_template_kwargs or {})
        )
    return len(tokenizer(prompt, add_special_tokens=False)["input_ids"])


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type and the first line of its message."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def normalize_finish_reason(reason: Any) -> str:
    """Map what servers say to "stop" | "length" (an unknown or missing reason is a stop)."""
    if reason in ("length", "max_tokens", "max_output_tokens", "model_length"):
        return "length"
    if reason == "error":
        return "error"
    return "stop"


def resolve_model(model: str) -> str:
    """Where transformers or vLLM should load `model` from, decided without the network.

    A name is a local path when it starts with '.', '/' or '~', when it exists, when it has
    more than one '/', or when the folder it sits in exists (`runs/nope` with a runs/ folder
    here); a path must be a model folder, and a mistyped one fails at once instead of being
    looked up on the hub and retried. Anything else is a hub id ('org/name'); with
    HF_HUB_OFFLINE set it must be in the local Hugging Face cache, and without it the hub must
    answer within a second and a half (an offline machine fails at once, naming the fix)."""
    path = Path(model).expanduser()
    parent = Path(model).parent
    is_path = (
        model.startswith((".", "/", "~"))
        or path.exists()
        or model.count("/") > 1
        or (str(parent) not in ("", ".") and parent.is_dir())
    )
    if is_path:
        if not path.exists():
            raise BackendError(f"{model}: no such model folder{_nearby(path)}")
        if path.is_file() and path.suffix != ".gguf":
            raise BackendError(f"{model}: not a model folder (a file)")
        if path.is_dir() and not any((path / f).is_file() for f in ("config.json", "adapter_config.json")):
            raise BackendError(f"{model}: not a model folder (no config.json)")
        return str(path)
    from huggingface_hub import constants, try_to_load_from_cache

    cached = isinstance(try_to_load_from_cache(model, "config.json"), str)
    if constants.HF_HUB_OFFLINE:
        if not cached:
            raise BackendError(
                f"{model}: not a local folder, and not in the Hugging Face cache "
                "(HF_HUB_OFFLINE is set, so nothing is downloaded)"
            )
        return model
    host = _unreachable_hub(constants.ENDPOINT)
    if host is not None:  # else the hub client retries for a minute before it gives up
        fix = (
            "set HF_HUB_OFFLINE=1 to load it from the Hugging Face cache, where it is"
            if cached
            else "pass a local model folder (e.g. runs/starter-model), or set HF_HUB_OFFLINE=1 once it is cached"
        )
        raise BackendError(f"{model}: not a local folder, and the hub ({host}) cannot be reached: {fix}")
    return model


def _unreachable_hub(endpoint: str, timeout: float = 1.5) -> str | None:
    """The hub's host when no connection to it opens within `timeout` seconds (no name
    resolution, no route, refused), else None. The lookup runs in a daemon thread so that a
    resolver that hangs costs `timeout`, not its own minute."""
    import socket
    import threading
    from urllib.parse import urlsplit

    url = urlsplit(endpoint)
    host, port = url.hostname or endpoint, url.port or (443 if url.scheme == "https" else 80)
    reached = threading.Event()

    def connect() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                reached.set()
        except OSError:
            pass

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(timeout)
    return None if reached.is_set() else host


def _nearby(path: Path) -> str:
    """' (did you mean X?)' for a sibling folder whose name is close to the missing one."""
    parent = path.parent
    if not parent.is_dir():
        return f" ({parent} does not exist either)"
    try:
        names = [p.name for p in parent.iterdir() if p.is_dir()]
    except OSError:
        return ""
    hint = difflib.get_close_matches(path.name, names, n=1)
    return f" (did you mean {parent / hint[0]}?)" if hint else ""


def check_backend(kind: str, model: str | None) -> None:
    """What can be known about a backend request before building it (cheap, no network, no
    model load): the kind exists, a model is named, a local model path exists, vLLM is
    installed for the vllm backend. A BackendError or BackendUnavailable otherwise."""
    if kind not in BACKENDS:
        hint = difflib.get_close_matches(str(kind), list(BACKENDS), n=1)
        more = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise BackendError(f"unknown backend {kind!r}{more}; choose one of {', '.join(BACKENDS)}")
    if not model or not isinstance(model, str):
        raise BackendError(f"the {kind} backend needs a model: pass --model or set backend.model")
    record = BACKEND_KINDS[kind]
    if record.needs and importlib.util.find_spec(record.needs) is None:
        raise BackendUnavailable(record.needs_hint)
    if record.local_model:  # an openai backend's model is the name the server serves
        resolve_model(model)


@dataclass(frozen=True)
class BackendKind:
    """One generation backend, all evoenv knows of it: `make_backend`, the recipe's backend.kind
    choices, `--backend`'s help and the loop read this record. Each backend's module registers
    its own record (`register`, last in the module), and importing this module imports every
    module of the package, so a new backend is its one module (its settings beyond
    `config_fields` go in the recipe's `backend.options`)."""

    name: str
    module: str  # the module that defines `cls` (its own: __name__)
    cls: str
    what: str  # how it generates, in a few words (for --backend's help)
    config_fields: tuple[str, ...]  # the BackendConfig fields it takes (the rest do not apply to it)
    local_model: bool  # the model is a checkpoint folder or hub name, resolved here (not a served name)
    follows_policy: bool  # it can load each round's new checkpoint, so the loop may use it
    needs: str = ""  # a module that must be importable, checked before one is built
    needs_hint: str = ""  # the one line said when it is not


BACKEND_KINDS: dict[str, BackendKind] = {}  # by name, in name order (every backend module's record)


def register(kind: BackendKind) -> BackendKind:
    """Add a backend's record (its module calls this, last). A name already taken is a ValueError."""
    if kind.name in BACKEND_KINDS:
        raise ValueError(f"backend {kind.name!r} is already registered")
    BACKEND_KINDS[kind.name] = kind
    ordered = sorted(BACKEND_KINDS.items())  # one order whichever module was imported first
    BACKEND_KINDS.clear()
    BACKEND_KINDS.update(ordered)
    return kind


class _Backends(Mapping):
    """kind -> (module, class name): a live view of BACKEND_KINDS."""

    def __getitem__(self, kind: str) -> tuple[str, str]:
        return BACKEND_KINDS[kind].module, BACKEND_KINDS[kind].cls

    def __iter__(self) -> Iterator[str]:
        return iter(BACKEND_KINDS)

    def __len__(self) -> int:
        return len(BACKEND_KINDS)


BACKENDS = _Backends()


def backends_help() -> str:
    """'hf (how), openai (how) or vllm (how)': the kinds as --backend's help lists them."""
    items = [f"{k.name} ({k.what})" for k in BACKEND_KINDS.values()]
    return ", ".join(items[:-1]) + " or " + items[-1] if len(items) > 1 else items[0]


def make_backend(kind: str, model: str, **options: Any) -> Backend:
    """Build a backend: "hf" (transformers), "openai" (an OpenAI-compatible server) or "vllm"
    (in-process). Options are the backend's keyword arguments; unknown ones are a BackendError."""
    import inspect

    check_backend(kind, model)
    module, cls_name = BACKENDS[kind]
    cls = getattr(importlib.import_module(module), cls_name)
    params = inspect.signature(cls.__init__).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        unknown = [k for k in options if k not in params or k in ("self", "model")]
        if unknown:
            hint = difflib.get_close_matches(unknown[0], [p for p in params if p not in ("self", "model")], n=1)
            more = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise BackendError(f"the {kind} backend has no option {unknown[0]!r}{more}")
    return cls(model, **options)


def backend_from_config(cfg: Any, **overrides: Any) -> Backend:
    """A backend from a recipe's `backend:` section (a `config.BackendConfig`), with the flags the
    user gave (`kind=`, `model=`, `base_url=`, ...; None means not given) over it."""
    given = {k: v for k, v in overrides.items() if v is not None}
    cfg = dataclasses.replace(cfg, **given) if dataclasses.is_dataclass(cfg) else cfg
    kind = cfg.kind
    fields = BACKEND_KINDS[kind].config_fields if kind in BACKEND_KINDS else ()
    options = {k: getattr(cfg, k) for k in fields if getattr(cfg, k, None) is not None}
    if getattr(cfg, "chat_template_kwargs", None):
        options["chat_template_kwargs"] = cfg.chat_template_kwargs
    options.update(getattr(cfg, "options", None) or {})
    return make_backend(kind, cfg.model, **options)


__all__ = [
    "BACKEND_KINDS",
    "FINISH_REASONS",
    "Backend",
    "BackendConnectionError",
    "BackendKind",
    "BackendError",
    "BackendUnavailable",
    "BaseBackend",
    "Completion",
    "Generation",
    "Messages",
    "SamplingConfig",
    "backend_from_config",
    "backends_help",
    "check_backend",
    "final_text",
    "make_backend",
    "register",
    "normalize_finish_reason",
    "one_line",
    "prompt_tokens",
    "request_seed",
    "resolve_model",
    "strip_thinking",
]


def _import_backends() -> None:
    """Import every module of this package (in name order): each backend's registers its record.
    They import only the standard library at their top, so this stays cheap."""
    import importlib
    import pkgutil

    for module in sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])):
        if module != "base":
            importlib.import_module(f"{__package__}.{module}")


_import_backends()
