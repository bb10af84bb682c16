"""The `vllm_server` backend: an OpenAI-compatible server this process starts on the policy,
data-parallel over the GPUs the recipe names, and stops when the backend closes. Why the loop
needs it, the command template, how it samples as the other backends do, and the files it
writes: docs/backends.md.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from evoenv_cli.llm.base import BackendError, BackendKind, register
from evoenv_cli.llm.openai_compat import OpenAIBackend

STATE_FILE = "server.json"
HISTORY_FILE = "servers.jsonl"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def default_command(max_model_len: int | None, across_nodes: bool = False) -> str:
    """`vllm serve` from beside this Python (where `pip install 'evoenv[vllm]'` put it). Across
    nodes (a data-parallel size beyond this node's GPUs) it is vLLM's own Ray data parallelism:
    one command here starts the local ranks and has Ray place the rest on the cluster's nodes
    (vLLM's docs/serving/data_parallel_deployment.md, "--data-parallel-backend=ray"); the API
    server stays on this node."""
    cmd = (
        "{exe_dir}/vllm serve {model} --served-model-name {model} --host 127.0.0.1 --port {port} "
        "--data-parallel-size {dp} --tensor-parallel-size {tp} --dtype {dtype} "
        "--gpu-memory-utilization {gpu_memory_utilization} --generation-config vllm --seed {seed}"
    )
    if across_nodes:
        cmd += " --data-parallel-size-local {dp_local} --data-parallel-backend ray"
    return cmd + (" --max-model-len {max_model_len}" if max_model_len else "")


def visible_devices(gpus: list[int], inherited: str | None) -> str:
    """The server's CUDA_VISIBLE_DEVICES: `gpus` are indices among the devices this process
    sees (its own CUDA_VISIBLE_DEVICES, ids or UUIDs), or physical ids where it has none."""
    if inherited is None:
        return ",".join(map(str, gpus))
    seen = [d.strip() for d in inherited.split(",") if d.strip()]
    beyond = [g for g in gpus if g >= len(seen)]
    if beyond:
        raise BackendError(
            f"backend.gpus: GPU {beyond[0]} is not among the {len(seen)} that CUDA_VISIBLE_DEVICES={inherited!r} "
            "shows this process (gpus are indices among the visible GPUs)"
        )
    return ",".join(seen[g] for g in gpus)


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (children, their children, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


@dataclass
class ServerState:
    """What server.json says while a managed server runs."""

    pid: int
    port: int
    model: str
    argv: list[str]
    gpus: list[int]
    log: str
    cuda_visible_devices: str | None  # what the server was given (None: inherited unchanged)


class ManagedServer:
    """One server process (its own process group), from start to a stop that leaves nothing."""

    def __init__(
        self,
        model: str,
        command: str = "",
        gpus: list[int] | tuple[int, ...] = (),
        port: int = 0,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.9,
        startup_timeout_s: float = 1800.0,
        log_dir: str | Path | None = None,
        seed: int = 0,
        data_parallel_size: int = 0,
    ):
        self.model = model
        self.gpus = [int(g) for g in gpus]
        inherited = os.environ.get("CUDA_VISIBLE_DEVICES")
        self.visible = visible_devices(self.gpus, inherited) if self.gpus else None
        self.port = port or free_port()
        tp = max(1, int(tensor_parallel_size))
        dp_local = max(1, len(self.gpus) // tp) if self.gpus else 1
        # data_parallel_size beyond this node's GPUs: the other ranks go to the Ray cluster's nodes
        dp = max(dp_local, int(data_parallel_size or 0))
        values = {
            "model": model,
            "port": self.port,
            "dp": dp,
            "dp_local": dp_local,
            "tp": tp,
            "dtype": dtype,
            "max_model_len": max_model_len or "",
            "gpu_memory_utilization": gpu_memory_utilization,
            "seed": int(seed),
            "exe_dir": str(Path(sys.executable).parent),
        }
        template = command or default_command(max_model_len, across_nodes=dp > dp_local)
        try:
            self.argv = [w.format(**values) for w in shlex.split(template)]
        except (KeyError, IndexError, ValueError) as exc:
            raise BackendError(f"backend.serve_command: unknown placeholder {exc} in {template!r}") from None
        if not self.argv or (shutil.which(self.argv[0]) is None):
            raise BackendError(
                f"backend.serve_command: {self.argv[0] if self.argv else '(empty)'} is not an installed command"
                + (" (vLLM: pip install 'evoenv[vllm]' on the GPU machine)" if "vllm" in template else "")
            )
        self.startup_timeout_s = float(startup_timeout_s)
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.gettempdir()) / "evoenv-serve"
        self.log = self.log_dir / f"serve-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        """Start the server and wait for GET /health to answer 200; a server that exits or
        stays unhealthy past the timeout is stopped and reported with its log's tail."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        stop_stale(self.log_dir)
        if port_open(self.port):
            raise BackendError(f"port {self.port} is already in use: cannot start a server for {self.model} there")
        env = dict(os.environ)
        if self.visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.visible
        with self.log.open("ab") as out:
            out.write(f"$ {shlex.join(self.argv)}\n".encode())
            out.flush()
            # its own session: stop() signals the whole group (vLLM's data-parallel engines are
            # child processes that would otherwise outlive it and keep their GPUs)
            self.proc = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        state = asdict(
            ServerState(self.proc.pid, self.port, self.model, self.argv, self.gpus, str(self.log), self.visible)
        )
        (self.log_dir / STATE_FILE).write_text(json.dumps(state, indent=1))
        # every server this folder has seen: one line, appended here rather than through the
        # artifacts layer, which a backend does not import (tests/test_layering.py)
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with (self.log_dir / HISTORY_FILE).open("a", encoding="utf-8") as history:
            history.write(json.dumps({**state, "started": started}) + "\n")
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.stop()
                raise BackendError(f"the server for {self.model} exited with {code} at start: {self._tail()}")
            if self._healthy():
                return
            if time.monotonic() > deadline:
                self.stop()
                raise BackendError(
                    f"the server for {self.model} was not healthy after {self.startup_timeout_s:g} s "
                    f"(backend.startup_timeout_s): {self._tail()}"
                )
            time.sleep(0.5)

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def _tail(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return f"(no log at {self.log})"
        return f"{' | '.join(lines[-3:])} (log: {self.log})"

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM to the server's process group and to every process below it (vLLM's engine
        cores, and the data-parallel API servers that leave for a group of their own), SIGKILL
        to those left after `grace_s`; returns once each of them is gone and the port is closed."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        terminate(proc.pid, lambda: proc.poll() is None, grace_s)
        proc.wait()
        deadline = time.monotonic() + 10
        while port_open(self.port) and time.monotonic() < deadline:
            time.sleep(0.1)
        (self.log_dir / STATE_FILE).unlink(missing_ok=True)


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, exited but not yet reaped, holds no GPU and
    no port: not running)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def terminate(pid: int, leader_alive: Callable[[], bool], grace_s: float) -> None:
    """SIGTERM to `pid`'s process group and to every process below it, SIGKILL to those left
    after `grace_s`; returns once all are gone (or 10 s after the SIGKILL). The family is listed
    first: once the leader exits, its children are no one's and a group signal misses those
    that left the group."""
    family = descendants(pid)

    def alive() -> bool:
        return leader_alive() or any(map(running, family))

    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        for send, target in ((os.killpg, pid), *((os.kill, p) for p in family)):
            try:
                send(target, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait
        while alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not alive():
            return


def stop_stale(log_dir: Path) -> None:
    """Stop a server a killed loop left running (its server.json still there, its process
    still the command it recorded): it would hold its GPUs through the rerun's training."""
    path = log_dir / STATE_FILE
    try:
        state = json.loads(path.read_text())
        cmdline = Path(f"/proc/{int(state['pid'])}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError, KeyError, TypeError):
        path.unlink(missing_ok=True)
        return
    # a console script (vllm, transformers) shows as [python, script, ...]: either may be it
    if state.get("argv") and state["argv"][0] in [c.decode(errors="replace") for c in cmdline[:2]]:
        pid = int(state["pid"])
        terminate(pid, lambda: running(pid), 30.0)
    path.unlink(missing_ok=True)


class ServedBackend(OpenAIBackend):
    """The openai backend over a server it started itself on `model`; close() stops it."""

    name = "vllm_server"

    def __init__(
        self,
        model: str,
        serve_command: str = "",
        gpus: list[int] | tuple[int, ...] = (),
        port: int = 0,
        startup_timeout_s: float = 1800.0,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.9,
        log_dir: str | Path | None = None,
        seed: int = 0,
        data_parallel_size: int = 0,
        **openai_options,
    ):
        self.server = ManagedServer(
            model,
            serve_command,
            gpus,
            port,
            tensor_parallel_size,
            dtype,
            max_model_len,
            gpu_memory_utilization,
            startup_timeout_s,
            log_dir,
            seed,
            data_parallel_size,
        )
        # the server is seeded once (--seed); a seed per request is vLLM's slow path, and the only
        # way to reproducible samples from a server (vLLM: "the online serving API does not
        # support reproducibility" otherwise), so it is an option (llm.options.request_seeds)
        request_seeds = bool(openai_options.pop("request_seeds", False))
        super().__init__(model, base_url=self.server.base_url, request_seeds=request_seeds, **openai_options)
        self.server.start()

    def close(self) -> None:
        super().close()
        self.server.stop()


__all__ = [
    "ManagedServer",
    "ServedBackend",
    "ServerState",
    "default_command",
    "descendants",
    "free_port",
    "port_open",
    "running",
    "stop_stale",
    "terminate",
    "visible_devices",
]


register(
    BackendKind(
        "vllm_server",
        __name__,
        "ServedBackend",
        "a vllm serve started for the stage and stopped after it",
        (
            *("serve_command", "gpus", "port", "startup_timeout_s", "tensor_parallel_size", "dtype"),
            *("gpu_memory_utilization", "max_model_len", "api_key_env", "concurrency", "timeout_s", "max_retries"),
            "data_parallel_size",
        ),
        local_model=True,
        follows_policy=True,  # the loop starts one on each round's policy (llm/served.py)
    )
)
