"""The loop on a Ray cluster (`iterate.cluster: ray`; docs/cluster.md).

- `connect`: joins the cluster at `iterate.cluster_address` (this module).
- `sandbox.py`: a Runtime whose pools send each environment's calls to an actor on some node,
  each actor keeping its own local sandbox pool.
- `train.py`: the train stage on Ray Train workers (`TorchTrainer`), each running evoenv's own
  train entry point as `accelerate launch` would.

Ray is imported only here, and only when a recipe asks for a cluster (`pip install 'evoenv[ray]'`).
"""

from __future__ import annotations

import os

from evoenv_cli.errors import InputError

NEEDS_RAY = "iterate.cluster: ray needs Ray: pip install 'evoenv[ray]'"


def import_ray():
    try:
        import ray
    except ImportError:
        raise InputError(NEEDS_RAY) from None
    return ray


def connect(address: str = "auto"):
    """Ray, joined to the cluster at `address` (left joined; a second call reuses it). A driver
    that finds no cluster gets a one-line error, not a new single-node cluster started quietly."""
    ray = import_ray()
    if ray.is_initialized():
        return ray
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local test cluster; a real one sets its own
    host, _, port = address.rpartition(":")
    if host and port.isdigit() and "://" not in address:  # ray.init retries a dead address for minutes
        import socket

        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except OSError as exc:
            raise InputError(f"iterate.cluster_address {address!r}: no Ray cluster there ({exc})") from None
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except ConnectionError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"iterate.cluster_address {address!r}: no Ray cluster there ({first})") from None
    return ray


def alive_nodes(ray) -> list[dict]:
    """The cluster's live nodes with CPUs, head first then by id (a stable order)."""
    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
    head = [n for n in nodes if "node:__internal_head__" in n.get("Resources", {})]
    rest = sorted((n for n in nodes if n not in head), key=lambda n: n["NodeID"])
    return head + rest


def check_shared_storage(ray, run_dir) -> list[str]:
    """Refuse, before anything loads, a cluster where some node cannot read the run folder: the
    library, the rows, the Context train reads and the folders rank 0 writes must be one folder
    on storage every node mounts at the same path. Returns the node ids that read it."""
    import secrets
    from pathlib import Path

    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    run_dir = Path(run_dir).resolve()
    token = secrets.token_hex(8)
    probe = run_dir / f".cluster-probe-{token}"
    probe.write_text(token, encoding="utf-8")

    @ray.remote(num_cpus=0, max_retries=0)
    def reads(path: str) -> str | None:
        try:
            return Path(path).read_text(encoding="utf-8")
        except OSError:
            return None

    try:
        nodes = alive_nodes(ray)
        refs = [
            reads.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
                str(probe)
            )
            for n in nodes
        ]
        seen = ray.get(refs, timeout=120)
    finally:
        probe.unlink(missing_ok=True)
    blind = [n for n, got in zip(nodes, seen) if got != token]
    if blind:
        where = ", ".join(f"{n.get('NodeManagerAddress', '?')} ({n['NodeID'][:8]})" for n in blind)
        raise InputError(
            f"{run_dir}: {len(blind)} of {len(nodes)} cluster nodes cannot read the run folder ({where}); "
            "put it on storage every node mounts at the same path (docs/cluster.md)"
        )
    return [n["NodeID"] for n in nodes]
