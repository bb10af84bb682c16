"""Generation backends behind one small interface (see `base.py`).

    from evoenv_cli.llm import SamplingConfig, make_backend
    with make_backend("hf", "runs/tiny") as llm:            # or "openai" (base_url=...), "vllm"
        gens = llm.generate([[{"role": "user", "content": "2+2?"}]], SamplingConfig(n=4))
    gens[0].texts, gens[0].completions[0].finish_reason, gens[0].prompt_tokens

Importing this package is cheap: torch, transformers and vllm load only when a backend is built.
"""

from evoenv_cli.llm.base import (
    BACKENDS,
    FINISH_REASONS,
    Backend,
    BackendConnectionError,
    BackendError,
    BackendUnavailable,
    BaseBackend,
    Completion,
    Generation,
    Messages,
    SamplingConfig,
    backend_from_config,
    check_backend,
    make_backend,
    request_seed,
    resolve_model,
)

__all__ = [
    "BACKENDS",
    "FINISH_REASONS",
    "Backend",
    "BackendConnectionError",
    "BackendError",
    "BackendUnavailable",
    "BaseBackend",
    "Completion",
    "Generation",
    "Messages",
    "SamplingConfig",
    "backend_from_config",
    "check_backend",
    "make_backend",
    "request_seed",
    "resolve_model",
]
