"""The backend interface itself: sampling checks, seeds, make_backend's errors, building a
backend from the recipe's `backend:` section, and that none of it imports torch."""

from __future__ import annotations

import dataclasses
import importlib
import subprocess
import sys

import pytest

from evoenv_cli.config import BackendConfig, Recipe
from evoenv_cli.llm import (
    BACKENDS,
    BackendError,
    SamplingConfig,
    backend_from_config,
    make_backend,
    request_seed,
)
from evoenv_cli.llm.base import normalize_finish_reason


def test_importing_the_cli_and_every_backend_module_loads_no_torch():
    code = (
        "import sys, evoenv_cli.cli, evoenv_cli.llm, evoenv_cli.llm.hf, evoenv_cli.llm.openai_compat, "
        "evoenv_cli.llm.vllm_backend, evoenv_cli.llm.tiny; "
        "heavy = [m for m in ('torch', 'transformers', 'vllm') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_importing_a_backend_loads_neither_the_sandbox_pool_nor_the_artifacts_layer():
    """The records have their own modules (errors.InputError, envfile.EnvFile), so a backend,
    which raises InputError, does not drag the sandbox runtime in with it."""
    code = (
        "import sys, evoenv_cli.llm, evoenv_cli.llm.hf, evoenv_cli.llm.openai_compat, "
        "evoenv_cli.llm.vllm_backend, evoenv_cli.llm.starter, evoenv_cli.llm.tiny; "
        "loaded = [m for m in ('evoenv_cli.runtime.workers', 'evoenv_cli.runtime.sandbox', 'evoenv_cli.artifacts') "
        "if m in sys.modules]; assert not loaded, loaded"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"n": 0}, "n must be"),
        ({"temperature": -0.1}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"seed": 1.5}, "seed"),
        ({"temperature": float("nan")}, "temperature"),
    ],
)
def test_sampling_config_refuses_nonsense(kwargs, needle):
    with pytest.raises(BackendError, match=needle):
        SamplingConfig(**kwargs)


def test_request_seeds_are_stable_distinct_and_in_range():
    seeds = {request_seed(0, i, j) for i in range(50) for j in range(8)}
    assert len(seeds) == 400 and all(0 <= s < 2**31 for s in seeds)
    assert request_seed(0, 3, 1) == request_seed(0, 3, 1) != request_seed(1, 3, 1)
    assert request_seed(None, 3, 1) is None
    assert request_seed(0, 3, 1) == 621293539  # fixed across runs, machines and hash seeds


def test_finish_reasons_are_normalized():
    assert [normalize_finish_reason(r) for r in ("stop", "length", "eos", None, "tool_calls", "max_tokens")] == [
        "stop",
        "length",
        "stop",
        "stop",
        "stop",
        "length",
    ]


def test_make_backend_names_the_problem():
    with pytest.raises(BackendError, match="did you mean 'hf'"):
        make_backend("hff", "m")
    with pytest.raises(BackendError, match="did you mean 'openai'"):
        make_backend("opneai", "m")
    with pytest.raises(BackendError, match="needs a model"):
        make_backend("hf", None)
    assert set(BACKENDS) == {"hf", "openai", "vllm", "vllm_server"}
    # a recipe's backend.kind takes exactly the registered backends
    kind = next(f for f in dataclasses.fields(BackendConfig) if f.name == "kind")
    assert set(kind.metadata["choices"]) == set(BACKENDS)


def test_backend_from_the_recipe_section_with_flags_over_it():
    assert Recipe().backend == BackendConfig()
    cfg = BackendConfig(
        kind="openai", model="policy", base_url="http://127.0.0.1:9/v1", concurrency=3, options={"backoff_s": 0.5}
    )
    b = backend_from_config(cfg, base_url="http://127.0.0.1:10", model=None)
    assert (b.name, b.model, b.base_url, b.concurrency, b.backoff_s) == (
        "openai",
        "policy",
        "http://127.0.0.1:10/v1",
        3,
        0.5,
    )
    with pytest.raises(BackendError, match="needs a model"):
        backend_from_config(BackendConfig())
    with pytest.raises(BackendError, match="unknown backend"):
        backend_from_config(BackendConfig(kind="tgi", model="m"))


def test_the_backend_records_give_the_choices_the_help_and_the_loops_refusal(evoenv, tmp_path):
    """One record per backend (llm/base.py's BACKEND_KINDS): the recipe's backend.kind choices,
    `--backend`'s help and the loop's refusal of a backend that cannot follow the policy all
    come from it."""
    from evoenv_cli.llm.base import BACKEND_KINDS, backends_help

    choices = next(f.metadata["choices"] for f in dataclasses.fields(BackendConfig) if f.name == "kind")
    assert tuple(choices) == tuple(BACKEND_KINDS) == tuple(BACKENDS)
    assert all(f"{k.name} ({k.what})" in backends_help() for k in BACKEND_KINDS.values())
    recipe = tmp_path / "r.yaml"
    recipe.write_text("backend:\n  kind: openai\n  model: served-name\n")
    r = evoenv("iterate", "--config", recipe, "--run", tmp_path / "run")
    assert r.returncode == 2 and "backend.kind openai cannot follow the policy" in r.stderr, r.stderr
    assert "use backend hf or vllm or vllm_server for iterate" in r.stderr and not (tmp_path / "run").exists()


ECHO_BACKEND = """from evoenv_cli.llm.base import BackendKind, register


class EchoBackend:
    def __init__(self, model, shout=False):
        self.model, self.shout = model, shout


register(BackendKind("echo", __name__, "EchoBackend", "repeats the prompt", (), local_model=False, follows_policy=False))
"""


def test_a_backend_is_one_module_that_registers_its_record(tmp_path, monkeypatch):
    """Issue 40: a module that ends with `register(BackendKind(...))` is a backend: the recipe's
    backend.kind accepts it, --backend's help lists it and make_backend builds it (its own
    settings through backend.options); nothing else is edited."""
    from evoenv_cli.config import recipe_from_dict
    from evoenv_cli.llm.base import BACKEND_KINDS, backends_help

    saved = dict(BACKEND_KINDS)
    (tmp_path / "echo_backend.py").write_text(ECHO_BACKEND)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        importlib.import_module("echo_backend")
        assert list(BACKEND_KINDS) == sorted([*saved, "echo"])
        recipe = recipe_from_dict({"backend": {"kind": "echo", "model": "m", "options": {"shout": True}}}, "r.yaml")
        assert "echo (repeats the prompt)" in backends_help()
        built = backend_from_config(recipe.backend)
        assert (type(built).__name__, built.model, built.shout) == ("EchoBackend", "m", True)
        with pytest.raises(ValueError, match="already registered"):
            importlib.reload(sys.modules["echo_backend"])
    finally:
        BACKEND_KINDS.clear()
        BACKEND_KINDS.update(saved)
        sys.modules.pop("echo_backend", None)
