"""Validate on one node against two nodes of a local Ray cluster, side by side in one run
(issue 44; evoenv_cli/cluster/sandbox.py).

The same 200 candidates (the ten seeds, twenty copies of each under a NAME of its own: 200
distinct environments, each judged in full) are validated through a `RayRuntime` on the head
node alone and then on both nodes of one two-node cluster started here (tests/support/ray_nodes.py: a
head and a second node, one CPU each, so `runtime.workers` is 1 per node). Prints the wall
time of each, the ratio, whether the verdicts agree, and per node what it did: the calls and
Ray tasks its actor ran, the sandbox workers it started and the CPU-seconds its actor and its
sandboxes spent. On a machine whose two nodes share the same cores the ratio cannot show
more cores; the per-node lines show that the work really spread.

Run: `python benchmarks/bench_cluster.py [--n 200]` (part of `make bench`, and `make
bench-cluster`; about four minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))  # ray_nodes: the real local cluster the tests start

from ray_nodes import two_node_cluster  # noqa: E402

from evoenv_cli.artifacts import EnvLibrary, prepare_out_dir, read_jsonl  # noqa: E402
from evoenv_cli.cluster import connect  # noqa: E402
from evoenv_cli.cluster.sandbox import RayRuntime  # noqa: E402
from evoenv_cli.config import RuntimeConfig, ValidateConfig  # noqa: E402
from evoenv_cli.stages import validate  # noqa: E402

NAME_LINE = re.compile(r'^NAME = "([a-z0-9_]+)"$', re.M)


def candidates(lib: Path, n: int) -> None:
    """`n` distinct environments: the seeds in turn, each copy under a NAME of its own."""
    seeds = sorted((ROOT / "seeds").glob("*.py"))
    for k in range(n):
        seed = seeds[k % len(seeds)]
        source, found = NAME_LINE.subn(lambda m, k=k: f'NAME = "{m.group(1)}_v{k:03d}"', seed.read_text())
        assert found == 1, f"{seed.name}: no NAME line to rename"
        (lib / f"{seed.stem}_v{k:03d}.py").write_text(source)


def judge(lib: Path, out: Path, rt: RayRuntime) -> tuple[float, dict, list[dict]]:
    started = time.perf_counter()
    validate.run(
        EnvLibrary.open(lib), ValidateConfig(), rt.cfg, prepare_out_dir(out, resume=False, clean=False), session=rt
    )
    wall = time.perf_counter() - started
    verdicts = {r["file"]: (r["admitted"], r["stage"]) for r in read_jsonl(out / "verdicts.jsonl")}
    return wall, verdicts, rt.node_stats()


def per_node(stats: list[dict]) -> str:
    return " ".join(
        f"node{k}={s['node'][:8]}:calls={s['calls']},tasks={s['tasks']},workers={s['spawned']},cpu_s={s['cpu_s']:.1f}"
        for k, s in enumerate(stats)
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200, help="candidates")
    n = ap.parse_args().n
    cfg = RuntimeConfig(workers=1)  # a node of one CPU runs one sandbox worker at a time
    saved = os.environ.get("RAY_AUTH_MODE")
    with tempfile.TemporaryDirectory(prefix="evoenv-bench-") as tmp:
        lib = Path(tmp) / "lib"
        lib.mkdir()
        candidates(lib, n)
        with two_node_cluster(Path(tmp) / "cluster", cpus=(1, 1), env_vars={"PYTHONPATH": str(ROOT)}) as cluster:
            ray = connect(cluster.address)
            try:
                runs = {}
                for label, nodes in (("one_node", 1), ("two_nodes", 2)):
                    with RayRuntime(cfg, ray, max_nodes=nodes) as rt:
                        runs[label] = judge(lib, Path(tmp) / f"out-{label}", rt)
            finally:
                ray.shutdown()
                if saved is None:
                    os.environ.pop("RAY_AUTH_MODE", None)
    (one, v1, s1), (two, v2, s2) = runs["one_node"], runs["two_nodes"]
    admitted = sum(a for a, _ in v2.values())
    print(
        f"bench cluster validate: candidates={n} admitted={admitted}/{len(v2)} same_verdicts={v1 == v2} "
        f"workers_per_node={cfg.workers} wall_s one_node={one:.1f} two_nodes={two:.1f} ratio={one / two:.2f}"
    )
    print(f"bench cluster one_node: {per_node(s1)}")
    print(f"bench cluster two_nodes: {per_node(s2)}")


if __name__ == "__main__":
    main()
