"""Sandboxed work on a real two-node Ray cluster (issue 44; evoenv_cli/cluster/sandbox.py):
validate through a RayRuntime gives the verdicts a local Runtime gives, both nodes ran calls
(node_stats), and a node lost mid-stage fails the stage rather than reading as verdicts. One
cluster for the module (tests/support/ray_nodes.py: a head and a second node, one CPU each); its health
checks are fast so that a killed node is noticed in seconds. The node-loss test kills the second
node, so it runs last."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import pytest
from conftest import SEEDS
from support.ray_nodes import two_node_cluster

from evoenv_cli.artifacts import EnvLibrary, prepare_out_dir, read_jsonl
from evoenv_cli.config import RuntimeConfig, load_recipe
from evoenv_cli.stages import validate

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "validate_corpus"
# invalid files rejected at different checks, the hash-seed one through the `fresh` pool
BAD = [
    "load__import_time_raise.py",
    "run__generate_returns_list.py",
    "budget__slow_solve_at_a_low_level.py",
    "reference__solve_off_by_one.py",
    "determinism__score_depends_on_hash_seed.py",
    "discrimination__always_one.py",
]
FAST_HEALTH = {"RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "3"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    saved = os.environ.get("RAY_AUTH_MODE")
    env_vars = {"PYTHONPATH": str(ROOT), **FAST_HEALTH}  # the actors import this checkout's evoenv_cli
    with two_node_cluster(tmp_path_factory.mktemp("cluster"), cpus=(1, 1), env_vars=env_vars) as c:
        import ray as ray_module

        from evoenv_cli.cluster import connect

        ray_module.shutdown()  # connect() reuses a joined Ray: let it join this cluster
        ray = connect(c.address)
        try:
            yield c, ray
        finally:
            ray.shutdown()
            if saved is None:
                os.environ.pop("RAY_AUTH_MODE", None)
            else:
                os.environ["RAY_AUTH_MODE"] = saved


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    lib = tmp_path_factory.mktemp("lib")
    for f in [*sorted(SEEDS.glob("*.py")), *(CORPUS / "bad" / name for name in BAD)]:
        shutil.copy(f, lib / f.name)
    return lib


def _validate(lib: Path, out: Path, session) -> dict[str, tuple[bool, str]]:
    cfg = load_recipe(CORPUS / "recipe.yaml").validate
    validate.run(
        EnvLibrary.open(lib), cfg, session.cfg, prepare_out_dir(out, resume=False, clean=False), session=session
    )
    return {r["file"]: (r["admitted"], r["stage"]) for r in read_jsonl(out / "verdicts.jsonl")}


def test_results_and_files_pickle():
    """What crosses between a node and the parent is the parent's own objects, unchanged."""
    from evoenv_cli.envfile import EnvFile
    from evoenv_cli.runtime.sandbox import resolve
    from evoenv_cli.runtime.workers import Call, CallResult, Limits

    env = EnvFile.from_path(next(SEEDS.glob("*.py")))
    for obj in (
        env,
        CallResult("ok", {"a": [1, 2.5]}, None, 0.1, 3),
        Call.score({"x": 1}, "2", 0.5),
        Limits(),
        resolve("auto"),
    ):
        assert pickle.loads(pickle.dumps(obj)) == obj


def test_validate_on_two_nodes_gives_the_local_verdicts(cluster, library, tmp_path):
    from evoenv_cli.cluster.sandbox import RayRuntime
    from evoenv_cli.runtime.session import Runtime

    c, ray = cluster
    cfg = RuntimeConfig(workers=1)
    with Runtime(cfg) as local:
        expected = _validate(library, tmp_path / "local", local)
        jails = local.jails
    with RayRuntime(cfg, ray) as rt:
        got = _validate(library, tmp_path / "ray", rt)
        stats = rt.node_stats()
        assert rt.lanes == 2 and rt.jails == jails
        # the same environment always goes to the same node, whatever came first
        envs = EnvLibrary.open(library).files
        assert [rt.node_of(e) for e in envs] == [rt.node_of(e) for e in envs]
    assert got == expected
    assert sum(admitted for admitted, _ in got.values()) == len(list(SEEDS.glob("*.py")))
    assert {stage for _, stage in got.values()} >= {"load", "run", "budget", "reference", "determinism"}
    assert len(stats) == 2 and {s["node"] for s in stats} == {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    for s in stats:  # both nodes ran environments' calls in sandboxes of their own
        assert s["calls"] > 0 and s["tasks"] > 0 and s["spawned"] > 0 and s["cpu_s"] > 0, stats


def test_run_many_over_both_nodes_returns_the_local_results_in_order(cluster):
    """What calibrate, evaluate and the reward send: one run_many over many environments, split
    by node and run at once, each result the CallResult a local pool gives, in input order."""
    from evoenv_cli.cluster.sandbox import RayRuntime
    from evoenv_cli.runtime.workers import Call, CallResult, EnvFile, SandboxWorkers

    _, ray = cluster
    envs = [EnvFile.from_path(p) for p in sorted(SEEDS.glob("*.py"))]
    broken = EnvFile(Path("broken.py"), b"raise ValueError('no')\n", "f" * 16)
    jobs = [(e, [Call.generate(s, 3) for s in range(4)]) for e in [*envs, broken]]
    with SandboxWorkers(workers=1) as local:
        expected = local.run_many(jobs)
        meta = local.describe(envs[0])
    with RayRuntime(RuntimeConfig(workers=1), ray) as rt:
        got = rt.workers.run_many(jobs)
        assert {rt.node_of(e) for e, _ in jobs} == {0, 1}
        assert rt.workers.calls == sum(len(c) for _, c in jobs)
        assert rt.workers.describe(envs[0]) == {
            **meta,
            "import_seconds": rt.workers.describe(envs[0])["import_seconds"],
        }
        assert "no" in rt.workers.load_error(broken) and rt.workers.load_error(envs[0]) is None
        rt.workers.discard(envs[0])  # its next call meets a new worker, and gives the same
        again = rt.workers.run(envs[0], jobs[0][1])
    assert all(type(r) is CallResult for rs in got for r in rs)
    strip = [[(r.status, r.value) for r in rs] for rs in got]  # all but the seconds each took
    assert strip == [[(r.status, r.value) for r in rs] for rs in expected]
    assert [(r.status, r.value) for r in again] == strip[0]
    assert [r.status for r in got[-1]] == ["crash"] * 4 and all(r.ok for rs in got[:-1] for r in rs)


def test_a_lost_node_fails_the_stage(cluster, library, tmp_path):
    """The second node killed after the actors started: validate raises NodeLost, writes no
    summary, and every verdict it did write is a node-0 environment's, as judged locally."""
    from evoenv_cli.cluster.sandbox import NodeLost, RayRuntime

    c, ray = cluster
    with RayRuntime(RuntimeConfig(workers=1), ray) as rt:
        assert len(rt.node_stats()) == 2  # the actors are up on both nodes
        c.kill_node(1)
        out = tmp_path / "out"
        with pytest.raises(NodeLost, match="lost its sandbox actor"):
            _validate(library, out, rt)
        on_node_1 = {e.path.name for e in EnvLibrary.open(library).files if rt.node_of(e) == 1}
    assert on_node_1, "no environment hashed to the second node"
    assert not (out / "summary.json").exists()
    written = {r["file"] for r in read_jsonl(out / "verdicts.jsonl")} if (out / "verdicts.jsonl").exists() else set()
    assert not written & on_node_1
