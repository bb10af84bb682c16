"""The managed server (backend.kind vllm_server, llm/served.py) on CPU, with a real
`transformers serve` standing in for `vllm serve`: started on the policy for the LLM stages,
down (process gone, port closed) while training runs, started again on the trained checkpoint."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from evoenv_cli.llm import BackendError, SamplingConfig, make_backend
from evoenv_cli.llm.served import ManagedServer, default_command, port_open, running, visible_devices

EXE = Path(sys.executable).with_name("evoenv")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
SERVE = "{exe_dir}/transformers serve {model} --host 127.0.0.1 --port {port} --device cpu"


def test_a_bad_command_is_refused_before_anything_starts(tiny_model):
    with pytest.raises(BackendError, match="unknown placeholder 'nope'"):
        ManagedServer(str(tiny_model), command="serve {nope}")
    with pytest.raises(BackendError, match="not an installed command"):
        ManagedServer(str(tiny_model), command="no-such-server-exe {model} --port {port}")
    # the default command: vllm serve from beside this Python, data-parallel over the GPUs given,
    # sampling as every other engine does (vLLM's neutral defaults, not the model's
    # generation_config) and seeded once, not per request
    assert default_command(4096).startswith("{exe_dir}/vllm serve {model}")
    assert "--data-parallel-size {dp}" in default_command(None) and "--max-model-len" not in default_command(None)
    assert "--generation-config vllm --seed {seed}" in default_command(None)
    if not Path(sys.executable).with_name("vllm").exists():
        with pytest.raises(BackendError, match=r"pip install 'evoenv\[vllm\]'"):
            ManagedServer(str(tiny_model), gpus=[0, 1, 2, 3], tensor_parallel_size=2)


def test_data_parallel_beyond_this_node_is_vllms_ray_data_parallelism(tiny_model):
    """backend.data_parallel_size above this node's GPUs: one vllm serve here, vLLM's Ray data
    parallelism placing the other ranks on the cluster (docs/serving/data_parallel_deployment.md)."""
    across = default_command(None, across_nodes=True)
    assert "--data-parallel-size {dp}" in across
    assert across.endswith("--data-parallel-size-local {dp_local} --data-parallel-backend ray")
    assert "--data-parallel-backend" not in default_command(None)
    echo = f"{sys.executable} -c pass"
    server = ManagedServer(str(tiny_model), command=echo + " {dp} {dp_local}", gpus=range(8), data_parallel_size=32)
    assert server.argv[-2:] == ["32", "8"]
    server = ManagedServer(str(tiny_model), command=echo + " {dp} {dp_local}", gpus=range(8), tensor_parallel_size=2)
    assert server.argv[-2:] == ["4", "4"]  # 0: the node's GPUs, as before


def test_the_managed_server_sends_seeds_per_request_only_when_asked(tiny_model, tmp_path, monkeypatch):
    """Seeded once by default (--seed; vLLM's batched sampler); backend.options.request_seeds:
    true makes its samples reproducible, each request carrying its own seed."""
    monkeypatch.setattr(ManagedServer, "start", lambda self: None)
    echo = f"{sys.executable} -c pass {{port}}"
    plain = make_backend("vllm_server", str(tiny_model), serve_command=echo, log_dir=tmp_path)
    seeded = make_backend("vllm_server", str(tiny_model), serve_command=echo, log_dir=tmp_path, request_seeds=True)
    try:
        assert plain.request_seeds is False and seeded.request_seeds is True
    finally:
        plain.close()
        seeded.close()


@pytest.mark.slow
def test_the_backend_starts_a_server_and_closing_it_leaves_nothing(tiny_model, tmp_path):
    backend = make_backend("vllm_server", str(tiny_model), serve_command=SERVE, startup_timeout_s=120, log_dir=tmp_path)
    try:
        server = backend.server
        pid, port = server.proc.pid, server.port
        state = json.loads((tmp_path / "server.json").read_text())
        assert state["pid"] == pid and state["model"] == str(tiny_model)
        gens = backend.generate([[{"role": "user", "content": "2+2?"}]], SamplingConfig(n=1, max_tokens=4))
        assert gens[0].error is None and gens[0].completions[0].tokens > 0
    finally:
        backend.close()
    assert not running(pid) and not port_open(port)
    assert not (tmp_path / "server.json").exists()
    # a loop killed with its server up leaves it running and server.json behind: the next
    # start stops that server first, so a rerun does not train beside it
    killed_loop = (
        "import os, sys; from evoenv_cli.llm.served import ManagedServer; "
        "s = ManagedServer(sys.argv[1], command=sys.argv[2], startup_timeout_s=120, log_dir=sys.argv[3]); "
        "s.start(); print(s.proc.pid, s.port); os._exit(0)"
    )
    out = subprocess.run(
        [sys.executable, "-c", killed_loop, str(tiny_model), SERVE, str(tmp_path)],
        capture_output=True,
        text=True,
        env=ENV,
    )
    stale_pid, stale_port = map(int, out.stdout.split())
    assert running(stale_pid) and port_open(stale_port)
    backend = make_backend("vllm_server", str(tiny_model), serve_command=SERVE, startup_timeout_s=120, log_dir=tmp_path)
    try:
        assert not running(stale_pid) and not port_open(stale_port)
        pid, port = backend.server.proc.pid, backend.server.port
    finally:
        backend.close()
    assert not running(pid) and not port_open(port)
    assert not (tmp_path / "server.json").exists()
    assert len((tmp_path / "servers.jsonl").read_text().splitlines()) == 3


@pytest.mark.slow
def test_the_loop_serves_each_policy_and_frees_the_server_for_training(tiny_model, tmp_path):
    run = tmp_path / "run"
    text = (ROOT / "tests" / "recipes" / "tiny.yaml").read_text()
    text = text.replace("build_model: tiny", "build_model: ''")
    text = text.replace("recipes/bench/", str(ROOT / "recipes" / "bench") + "/")
    text = text.replace(
        "backend:\n  kind: hf\n  model: runs/tiny-model\n  device: cpu\n",
        f"backend:\n  kind: vllm_server\n  model: runs/tiny-model\n  serve_command: '{SERVE}'\n"
        "  startup_timeout_s: 120\n  concurrency: 2\n",
    )
    probe = ROOT / "tests" / "support" / "train_probe.py"
    text += f"  train_launch: '{sys.executable} {probe} {run / 'serve'}'\n"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(text)
    argv = [EXE, "iterate", "--rounds", "1", "--recipe", recipe, "--model", tiny_model, "--run", run]
    done = subprocess.run(argv + ["--seeds", ROOT / "seeds"], capture_output=True, text=True, env=ENV, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    servers = [json.loads(x) for x in (run / "serve" / "servers.jsonl").read_text().splitlines()]
    at_train = [json.loads(x) for x in (run / "serve" / "at-train.jsonl").read_text().splitlines()]
    # the LLM stages before training ran on one server, on the starting model
    assert len(at_train) == 1 and at_train[0]["servers"] == [
        {"pid": s["pid"], "port": s["port"], "model": s["model"]} for s in servers[:1]
    ]
    assert servers[0]["model"] == str(tiny_model)
    # while training ran, that server was gone: process reaped, port closed, no state file
    assert at_train[0] == {**at_train[0], "any_alive": False, "any_listening": False, "state_file": False}
    # evaluate ran on a new server, on the trained checkpoint
    assert len(servers) == 2 and servers[1]["model"] == str(run / "round-01" / "train")
    assert (run / "round-01" / "evaluate" / "metrics.json").exists()
    # and the loop left nothing running
    assert not any(running(s["pid"]) or port_open(s["port"]) for s in servers)
    assert not (run / "serve" / "server.json").exists()


def test_gpus_are_indices_among_the_visible_ones():
    assert visible_devices([0, 2], None) == "0,2"  # nothing hidden: the physical ids
    assert visible_devices([1, 3], "4,5,6,7") == "5,7"
    assert visible_devices([0], "GPU-a1b2, GPU-c3d4") == "GPU-a1b2"
    with pytest.raises(BackendError, match=r"GPU 4 is not among the 4 that CUDA_VISIBLE_DEVICES='4,5,6,7' shows"):
        visible_devices([0, 4], "4,5,6,7")
    with pytest.raises(BackendError, match="not among the 0"):
        visible_devices([0], "")


def test_stop_waits_for_every_process_below_the_server(tmp_path, monkeypatch):
    """A worker that left the server's process group (vLLM's data-parallel API servers call
    os.setpgrp) is stopped too, and stop() returns only once it is gone; the server got the
    recipe's GPUs as indices among the visible ones."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    facts = tmp_path / "facts.json"
    command = f"{sys.executable} {ROOT / 'tests' / 'support' / 'serve_family.py'} {facts} {{port}}"
    server = ManagedServer("m", command=command, gpus=[1, 3], startup_timeout_s=60, log_dir=tmp_path)
    server.start()
    pid, port = server.proc.pid, server.port
    seen = json.loads(facts.read_text())
    assert seen["cuda_visible_devices"] == "5,7"
    assert json.loads((tmp_path / "server.json").read_text())["cuda_visible_devices"] == "5,7"
    assert running(seen["worker"]) and os.getpgid(seen["worker"]) != os.getpgid(pid)
    server.stop()
    assert not running(pid) and not running(seen["worker"]) and not port_open(port)
