"""Sandboxed work on every node of a Ray cluster (`iterate.cluster: ray`; docs/cluster.md).

A `RayRuntime` is a `runtime.session.Runtime` whose pools live on the cluster's nodes: one actor
per live CPU node, pinned to it, each keeping local `SandboxWorkers`s (hash seeds 0 and 1,
`runtime.workers` workers each), built once and reused for the whole program. The parent's
`workers` and `fresh` are proxies with SandboxWorkers's interface: an environment's calls go to the
node its env_id picks (a stable hash, so its warm workers and loaded module are reused, and where
a call runs never depends on which call came first), and `run_many` groups its jobs by node and
runs the groups at once. A node returns the very `CallResult`s its SandboxWorkers made, so budgets,
re-checks and quarantine, which the stages decide here in the parent, decide as on one machine.

A lost node (its actor died: the node failed or was killed) raises `NodeLost`, which fails the
stage: a call that never ran is never read as a verdict. The environments travel with the calls
(an `EnvFile` carries its bytes); the library folder itself is on the cluster's shared storage.
"""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

from evoenv_cli.cluster import alive_nodes
from evoenv_cli.envfile import EnvFile
from evoenv_cli.runtime import sandbox
from evoenv_cli.runtime.session import Runtime
from evoenv_cli.runtime.workers import Call, CallResult, EnvLoadError, Limits, SandboxWorkers, Worker, WorkerSet

ACTOR_THREADS = 64  # calls a node's actor serves at once (its pools bound the work: the rest wait there)


class NodeLost(RuntimeError):
    """A node's sandbox actor died (the node failed, or was killed) while the parent needed it."""


def _stat(pid: int) -> tuple[int, float] | None:
    """(start time in ticks, CPU-seconds: user + system) of a live process, from /proc."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    rest = data[data.rindex(b")") + 2 :].split()  # fields from the 3rd on: the name may hold spaces
    return int(rest[19]), (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            out += [int(c) for c in children.read_text().split()]
        except OSError:
            continue
    return out


class CpuMeter:
    """CPU-seconds this process and every process below it spent. A killed sandbox worker is
    never reaped into this process's rusage (its namespace dies with bwrap), so its CPU is read
    from /proc: just before each kill (`MeteredWorker`) and, for the live ones, at each reading;
    the last value of every process is kept."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, int], float] = {}  # (pid, start ticks) -> its CPU-seconds
        self.lock = threading.Lock()

    def read(self, root: int) -> None:
        """Note the CPU of `root` and every process below it."""
        todo = [root]
        found = {}
        while todo:
            pid = todo.pop()
            got = _stat(pid)
            if got is not None:
                found[(pid, got[0])] = got[1]
                todo += _children(pid)
        with self.lock:
            self.seen.update(found)

    def seconds(self) -> float:
        me = os.getpid()
        for pid in _children(me):
            self.read(pid)
        t = os.times()
        with self.lock:
            return t.user + t.system + sum(self.seen.values())


METER = CpuMeter()  # this process's: a node's actor is one process


class MeteredWorker(Worker):
    def kill(self) -> None:
        METER.read(self.proc.pid)
        super().kill()


class MeteredWorkers(SandboxWorkers):
    worker_class = MeteredWorker


class NodeSandbox:
    """The actor on one node (a threaded Ray actor): its local sandbox pools, by key (the
    runtime's hash seeds, and any private pool a check opens), made on first use and kept."""

    def __init__(self, sandbox_mode: str, node_id: str) -> None:
        self.mode, self.node_id = sandbox_mode, node_id
        self.pools: dict[str, SandboxWorkers] = {}
        self.lock = threading.Lock()
        self.calls = 0
        self.tasks = 0
        self.spawned_before = 0  # by the pools dropped since

    def hello(self) -> tuple[str, int, sandbox.LaunchPlan]:
        """Where this actor runs (the node id Ray gives it, its pid) and the jail it resolved."""
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid(), sandbox.resolve(self.mode)

    def _pool(self, key: str, spec: tuple[Limits, int, int]) -> SandboxWorkers:
        with self.lock:
            if key not in self.pools:
                limits, workers, hash_seed = spec
                self.pools[key] = MeteredWorkers(limits, self.mode, workers, hash_seed=hash_seed)
            return self.pools[key]

    def run_many(
        self, key: str, spec: tuple, jobs: list[tuple[EnvFile, list[Call]]], stop_on_failure: bool
    ) -> list[list[CallResult]]:
        pool = self._pool(key, spec)
        with self.lock:
            self.tasks += 1
            self.calls += sum(len(calls) for _, calls in jobs)
        return pool.run_many(jobs, stop_on_failure)

    def describe(self, key: str, spec: tuple, env: EnvFile) -> tuple[dict | None, str | None]:
        """(meta, None), or (None, the load error): an EnvLoadError is an answer, not a failure."""
        pool = self._pool(key, spec)
        with self.lock:
            self.tasks += 1
        try:
            return pool.describe(env), None
        except EnvLoadError as exc:
            return None, str(exc)

    def discard(self, key: str, spec: tuple, env: EnvFile) -> None:
        self._pool(key, spec).discard(env)

    def drop(self, key: str) -> None:
        with self.lock:
            pool = self.pools.pop(key, None)
            self.spawned_before += pool.spawned if pool is not None else 0
        if pool is not None:
            pool.close()

    def stats(self) -> dict:
        with self.lock:
            spawned = self.spawned_before + sum(p.spawned for p in self.pools.values())
            return {
                "node": self.node_id,
                "pid": os.getpid(),
                "calls": self.calls,
                "tasks": self.tasks,
                "spawned": spawned,
                "cpu_s": round(METER.seconds(), 3),
            }

    def close(self) -> None:
        with self.lock:
            pools, self.pools = self.pools, {}
        for p in pools.values():
            p.close()


class RayWorkers(WorkerSet):
    """The parent's side of one pool key on every node: SandboxWorkers's interface (`run`,
    `run_many`, `describe`, `load_error`, `discard`, `solo`, `plan`, `limits`, `workers`,
    `hash_seed`, `calls`), each environment's calls sent to its node."""

    def __init__(self, runtime: RayRuntime, key: str, limits: Limits, workers: int, hash_seed: int, own: bool = False):
        self.runtime, self.key = runtime, key
        self.limits, self.workers, self.hash_seed = limits, workers, hash_seed
        self.own = own  # a private pool (`solo`): dropped on every node when closed
        self.calls = 0  # asked for, as SandboxWorkers counts them
        self._meta: dict[str, tuple[dict | None, str | None]] = {}
        self._used: set[int] = set()
        self._lock = threading.Lock()

    @property
    def plan(self) -> sandbox.LaunchPlan:
        return self.runtime.plan

    @property
    def spawned(self) -> int:
        return sum(s["spawned"] for s in self.runtime.node_stats())

    @property
    def parallel(self) -> int:
        """Environments at once: `workers` on each node."""
        return max(1, self.workers) * self.runtime.lanes

    def _spec(self) -> tuple[Limits, int, int]:
        return (self.limits, self.workers, self.hash_seed)

    def run_many(self, jobs: list[tuple[EnvFile, list[Call]]], stop_on_failure: bool = False) -> list[list[CallResult]]:
        """Every job on its environment's node, the nodes' groups at once; results in input order."""
        groups: dict[int, list[int]] = {}
        for j, (env, _) in enumerate(jobs):
            groups.setdefault(self.runtime.node_of(env), []).append(j)
        with self._lock:
            self.calls += sum(len(calls) for _, calls in jobs)
            self._used |= set(groups)
        refs = {
            n: self.runtime.actor(n).run_many.remote(self.key, self._spec(), [jobs[j] for j in js], stop_on_failure)
            for n, js in groups.items()
        }
        out: list[list[CallResult]] = [[] for _ in jobs]
        for n, js in groups.items():
            for j, results in zip(js, self.runtime.get(refs[n], n)):
                out[j] = results
        return out

    def describe(self, env: EnvFile) -> dict:
        if env.env_id not in self._meta:
            n = self.runtime.node_of(env)
            with self._lock:
                self._used.add(n)
            self._meta[env.env_id] = self.runtime.get(
                self.runtime.actor(n).describe.remote(self.key, self._spec(), env), n
            )
        meta, error = self._meta[env.env_id]
        if error is not None:
            raise EnvLoadError(error)
        return dict(meta)

    def discard(self, env: EnvFile) -> None:
        n = self.runtime.node_of(env)
        self.runtime.get(self.runtime.actor(n).discard.remote(self.key, self._spec(), env), n)

    def solo(self, limits: Limits) -> RayWorkers:
        """A private pool on each environment's node: one worker, `limits`, this hash seed."""
        return RayWorkers(self.runtime, f"solo-{uuid.uuid4().hex}", limits, 1, self.hash_seed, own=True)

    def close(self) -> None:
        if self.own:
            with self._lock:
                used, self._used = sorted(self._used), set()
            for n in used:
                self.runtime.get(self.runtime.actor(n).drop.remote(self.key), n)


class RayRuntime(Runtime):
    """`Runtime`'s interface (`workers`, `fresh`, `calls`, `jails`, `lanes`, `close`, a
    context manager) on the cluster's live CPU nodes (at most `max_nodes` of them, head first),
    plus `node_stats()`: per node, the calls and tasks it ran and the CPU-seconds its actor and
    sandboxes spent. The actors start on first use, one per node, each pinned to its node."""

    def __init__(self, cfg, ray, max_nodes: int | None = None) -> None:
        super().__init__(cfg)
        self.ray = ray
        self.max_nodes = max_nodes
        self._actors: list | None = None
        self.nodes: list[str] = []  # node ids, in the order env ids are hashed over
        self.plans: list[sandbox.LaunchPlan] = []
        self._lock = threading.Lock()

    # -- the nodes ------------------------------------------------------------------------------
    def _start(self) -> list:
        with self._lock:
            if self._actors is not None:
                return self._actors
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            nodes = alive_nodes(self.ray)[: self.max_nodes]
            if not nodes:
                raise NodeLost("the Ray cluster has no live node with CPUs to run sandboxes on")
            remote = self.ray.remote(NodeSandbox)
            actors = [
                remote.options(
                    num_cpus=0,  # its sandboxes use the node's cores; Ray's CPUs stay for train's workers
                    max_concurrency=ACTOR_THREADS,
                    max_restarts=0,  # a restarted actor would have lost its pools: a loss is a loss
                    scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
                ).remote(self.cfg.sandbox, n["NodeID"])
                for n in nodes
            ]
            self._actors = actors
            self.nodes = [n["NodeID"] for n in nodes]
            hellos = [self.get(a.hello.remote(), k) for k, a in enumerate(actors)]
            for (where, _, _), n in zip(hellos, self.nodes):
                if where != n:
                    raise NodeLost(f"the sandbox actor for node {n[:12]} started on {where[:12]}")
            self.plans = [plan for _, _, plan in hellos]
            jails = {p.jail for p in self.plans}
            if len(jails) > 1:  # the same candidate could pass on one node and fail on another
                raise sandbox.SandboxUnavailable(
                    f"the cluster's nodes resolve different jails ({', '.join(sorted(jails))}): "
                    f"install the same sandbox on every node, or set runtime.sandbox"
                )
            sandbox._resolved.setdefault(self.cfg.sandbox, self.plans[0])  # the manifests' record
            return actors

    def actor(self, n: int):
        return self._start()[n]

    def node_of(self, env: EnvFile) -> int:
        """The node that runs `env`'s calls: its env_id (a hash of its bytes) over the nodes."""
        return int(env.env_id, 16) % len(self._start())

    def get(self, ref, n: int):
        """`ray.get`, a dead actor or node raised as NodeLost (the environment's own errors come
        back as results, never as exceptions)."""
        from ray import exceptions as rx

        try:
            return self.ray.get(ref)
        except rx.RayTaskError:
            raise
        except rx.RayError as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise NodeLost(f"node {self.nodes[n][:12] if self.nodes else n} lost its sandbox actor: {first}") from None

    @property
    def plan(self) -> sandbox.LaunchPlan:
        self._start()
        return self.plans[0]

    # -- Runtime's interface ----------------------------------------------------------------------
    def _make(self, hash_seed: int) -> RayWorkers:
        c = self.cfg
        return RayWorkers(self, f"seed-{hash_seed}", c.limits, c.workers, hash_seed)

    @property
    def jails(self) -> list[str]:
        return sorted({p.mode for p in self.plans}) if self._pools else []

    @property
    def lanes(self) -> int:
        return len(self._start())

    def lane(self, env: EnvFile) -> int:
        return self.node_of(env)

    def node_stats(self) -> list[dict]:
        """Per node (in hash order): node id, calls and tasks its actor ran, sandbox workers it
        spawned, and CPU-seconds its actor and sandbox children spent since it started."""
        actors = self._start()
        refs = [a.stats.remote() for a in actors]
        return [self.get(ref, n) for n, ref in enumerate(refs)]

    def close(self) -> None:
        """Close every node's pools and end the actors; a node already lost is let go quietly
        (close runs on the way out of a failure and must not hide it)."""
        from ray import exceptions as rx

        with self._lock:
            actors, self._actors, self._pools = self._actors or [], None, {}
        for a in actors:
            try:
                self.ray.get(a.close.remote(), timeout=30)
            except (rx.RayError, TimeoutError):
                pass
            try:
                self.ray.kill(a)
            except (rx.RayError, ValueError):
                pass
