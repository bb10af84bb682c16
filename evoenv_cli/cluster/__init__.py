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
