"""A real two-node Ray cluster on this machine, for the cluster tests: a head and a second node
started with `ray start`, each with the CPUs it is given, in a temp folder of their own. Teardown
kills only this cluster's processes (`ray stop` would stop every Ray cluster on the machine,
another test's included), and `kill_node(1)` kills the second node's processes, as a node that
fails mid-round."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

RAY = Path(sys.executable).with_name("ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _naming(mark: str) -> list[int]:
    """The processes whose command line holds `mark` (a cluster's temp folder)."""
    import psutil

    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if mark in " ".join(p.info["cmdline"] or []):
                found.append(p.info["pid"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _start(argv: list[str], env: dict) -> None:
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    if r.returncode:
        raise RuntimeError(f"{' '.join(argv[:4])} ... failed (exit {r.returncode}): {(r.stderr or r.stdout)[-1500:]}")


@dataclass
class LocalCluster:
    address: str
    temp_dir: Path
    env: dict
    node_ids: list[str] = field(default_factory=list)  # in start order: the head first
    node_pids: list[set[int]] = field(default_factory=list)  # processes each `ray start` left

    def kill_node(self, index: int) -> None:
        """SIGKILL every process node `index` started (its raylet, its workers)."""
        for pid in _with_children(set(self.node_pids[index])):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        for pid in _naming(str(self.temp_dir)) + [p for s in self.node_pids for p in s]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _ray_pids_now() -> set[int]:
    import psutil

    out = set()
    for p in psutil.process_iter(["pid", "cmdline", "name"]):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            line = " ".join(p.info["cmdline"] or [])
            if "ray" in line or "raylet" in (p.info["name"] or ""):
                out.add(p.info["pid"])
    return out


def _ours(new: set[int], temp_dir: Path, other: set[int] = frozenset()) -> set[int]:
    """Of the Ray processes that appeared, those of this cluster: the ones whose command line
    names its temp folder (`ray start`'s gcs_server, raylet, monitors) and their children (the
    raylet's agents, renamed `ray::...`). Another test's cluster, started on another xdist
    worker meanwhile, appears too: counted as ours, its GCS was killed at our teardown, and
    its driver (that test's pytest worker) exited 60 s later ("Failed to connect to GCS").
    `other`: an earlier node's processes; what they started since (the head's Ray workers name
    the same folder) stays theirs, so killing the second node leaves the head whole."""
    theirs = _with_children(set(other))
    return _with_children((new & set(_naming(str(temp_dir)))) - theirs) - theirs


def _with_children(pids: set[int]) -> set[int]:
    import psutil

    out = set(pids)
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            out |= {c.pid for c in psutil.Process(pid).children(recursive=True)}
    return out


@contextlib.contextmanager
def two_node_cluster(
    tmp: Path, cpus: tuple[int, int] = (1, 1), env_vars: dict | None = None, hide: Path | None = None
) -> Iterator[LocalCluster]:
    """Start a head (`cpus[0]` CPUs) and a second node (`cpus[1]`), yield the cluster, kill its
    processes after. `env_vars` go into both nodes' environment (their workers inherit them).
    `hide`: a folder the second node does not see (bubblewrap mounts an empty tmpfs over it
    for the node's processes), as a node without the shared storage."""
    tmp = Path(tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "OMP_NUM_THREADS": "1", **(env_vars or {})}
    # a short folder: Ray's socket paths under it must fit AF_UNIX's 107 bytes
    temp_dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    common = ["--disable-usage-stats"]
    cluster = LocalCluster(f"127.0.0.1:{port}", temp_dir, env)
    try:
        before = _ray_pids_now()
        _start(
            [str(RAY), "start", "--head", f"--num-cpus={cpus[0]}", "--num-gpus=0", f"--port={port}",
             "--include-dashboard=false", f"--temp-dir={temp_dir}", *common],
            env,
        )  # fmt: skip
        head = _ours(_ray_pids_now() - before, temp_dir)
        cluster.node_pids.append(head)
        jail = ["bwrap", "--dev-bind", "/", "/", "--tmpfs", str(hide)] if hide else []
        _start(
            [*jail, str(RAY), "start", f"--address={cluster.address}", f"--num-cpus={cpus[1]}", "--num-gpus=0", *common],
            env,
        )  # fmt: skip
        cluster.node_pids.append(_ours(_ray_pids_now() - before - head, temp_dir, head))
        deadline = time.monotonic() + 60
        import ray

        while True:
            ray.init(address=cluster.address, log_to_driver=False)
            alive = [n for n in ray.nodes() if n["Alive"]]
            ray.shutdown()
            if len(alive) >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert len(alive) == 2, f"the local cluster has {len(alive)} live nodes, not 2"
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            import ray

            ray.shutdown()
        cluster.stop()
        shutil.rmtree(temp_dir, ignore_errors=True)
