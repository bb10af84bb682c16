"""The loop's train stage on Ray Train workers across two real nodes (`iterate.cluster: ray`,
`train.workers: 2`), against the same round trained by `accelerate launch --multi_gpu
--num_processes 2` on one machine (test_train_ranks.py's recipe and probe).

The cluster is tests/support/ray_nodes.py's: a head and a second node started with `ray start`, one CPU
each, so the two workers (one CPU each, placement SPREAD) land one on each node and train with
gloo. The train step runs alone (its record through `loop.wired`, tests/support/cluster_train_child.py) on a copy of the
one-machine run cut back to its sample: the same rows, pool and policy, so the two trainings are
comparable step for step."""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import ROOT
from support.ray_nodes import two_node_cluster
from support.two_ranks import PROBE, free_port, ray_recipe, recipe, records

CHILD = ROOT / "tests" / "support" / "cluster_train_child.py"
FIXTURE = Path(__file__).parents[1] / "fixtures" / "digit_share.py"
# per step, what must agree between the two runs: TRL's own logged numbers (rewards, loss,
# lengths) and evoenv's per-environment counts; times and throughput differ by nature
VOLATILE = ("time", "runtime", "per_second", "seconds", "eta", "elapsed", "wall")


def round_at_sample(tmp_path: Path) -> Path:
    """A run whose round 1 is done up to sample: its pool (the seeds and a partial-credit
    environment whose reward varies for the random model, so a GRPO group has something to
    learn and the weights change) and its sample's rows, of that environment only."""
    run = tmp_path / "run"
    pool = run / "pool"
    pool.mkdir(parents=True)
    for f in [FIXTURE, *(ROOT / "seeds").glob("*.py")]:
        (pool / f.name).write_bytes(f.read_bytes())
    rows = run / "round-01" / "sample" / "train.jsonl"
    rows.parent.mkdir(parents=True)
    argv = [sys.executable, "-m", "evoenv_cli", "sample", pool, "-o", rows, "-n", "2", "-d", "1"]
    r = subprocess.run(list(map(str, argv)), env=child_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    digits = [x for x in rows.read_text().splitlines() if '"digit_share"' in x]
    rows.write_text("\n".join(digits * 4) + "\n")
    return run


def one_machine_recipe(tmp_path: Path) -> Path:
    """test_train_ranks.py's recipe (two accelerate processes), every completion its answer."""
    p = recipe(tmp_path)
    p.write_text(p.read_text() + 'answer:\n  tag: ""\n')
    return p


def cut_to_sample(run: Path) -> None:
    """Round 1 back to its sample: train, evaluate and the round's summary gone."""
    shutil.rmtree(run / "round-01" / "train", ignore_errors=True)
    shutil.rmtree(run / "round-01" / "evaluate", ignore_errors=True)
    (run / "round-01" / "train-context.json").unlink(missing_ok=True)
    (run / "rounds.jsonl").unlink(missing_ok=True)


def child_env(probe: Path, **extra: str) -> dict:
    """The child's environment. Under accelerate its ranks inherit it (the probe's folder on
    PYTHONPATH); on Ray the driver's HF_*/TOKENIZERS_*/EVOENV_* settings reach the workers
    (cluster/train.py forwards them) and PYTHONPATH reaches them through the nodes' own."""
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(PROBE), os.environ.get("PYTHONPATH", "")]),
        "EVOENV_RANK_PROBE": str(probe),
        **extra,
    }


def train(run: Path, recipe: Path, model: Path, env: dict, wait: bool = True):
    """The loop's train step (cluster_train_child.py): (exit code, stderr), or the process."""
    argv = [sys.executable, CHILD, run, recipe, model, ROOT / "seeds"]
    proc = subprocess.Popen(
        list(map(str, argv)), env=env, cwd=run.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    if not wait:
        return proc
    _, err = proc.communicate(timeout=900)
    return proc.returncode, err


def steps(train_dir: Path) -> list[dict]:
    rows = [json.loads(x) for x in (train_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not any(w in k for w in VOLATILE)} for row in rows]


def weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def saves(probe: Path, rank: int) -> list[dict]:
    return [x for x in records(probe, rank) if x.get("event") == "save_start"]


@contextlib.contextmanager
def cluster_of_two(node_env: dict):
    """ray_nodes.two_node_cluster in a short folder of its own: Ray's sockets live under its
    temp dir, and a socket's path may not pass 107 bytes (pytest's tmp_path can)."""
    folder = Path(tempfile.mkdtemp(prefix="evr-"))
    try:
        with two_node_cluster(folder, cpus=(1, 1), env_vars=node_env) as cluster:
            yield cluster
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def alive_nodes(address: str) -> set[str]:
    import ray

    ray.init(address=address, log_to_driver=False)
    try:
        return {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_train_on_two_ray_nodes_matches_two_local_ranks_and_a_lost_node_leaves_no_marker(tiny_model, tmp_path):
    start = round_at_sample(tmp_path / "start")
    one = one_machine_recipe(tmp_path)

    # the reference: the loop's train on one machine, two accelerate processes (gloo)
    ref_run, ref_probe = tmp_path / "one-machine" / "run", tmp_path / "probe-one-machine"
    shutil.copytree(start, ref_run)
    ref_probe.mkdir()
    code, err = train(ref_run, one, tiny_model, child_env(ref_probe))
    assert code == 0, err[-4000:]
    ref_train = ref_run / "round-01" / "train"
    theirs = weights(ref_train)
    before = weights(tiny_model)
    assert any(not (before[k] == theirs[k]).all() for k in theirs), "training changed no weight"

    run, probe = tmp_path / "ray" / "run", tmp_path / "probe-ray"
    shutil.copytree(start, run)
    probe.mkdir()
    train_dir = run / "round-01" / "train"
    marker = train_dir / "train-manifest.json"
    node_env = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(PROBE)])}
    # one training on the cluster, its second node killed while its worker is in the
    # post-training writes (rank 1 holds there), then the rerun on a healthy cluster: what a
    # whole run shows is read from the two (a third training, run through, showed nothing more
    # and cost a quarter of this test's CPU)
    with cluster_of_two(node_env) as cluster:
        on_ray = ray_recipe(one, cluster.address)
        proc = train(run, on_ray, tiny_model, child_env(probe, EVOENV_RANK_PROBE_HOLD="1"), wait=False)
        deadline = time.monotonic() + 600
        while not (saves(probe, 0) and saves(probe, 1)) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert saves(probe, 0) and saves(probe, 1), proc.communicate()[1][-4000:]

        # one worker on each node: the head and the second node
        (r0,), (r1,) = saves(probe, 0), saves(probe, 1)
        nodes = alive_nodes(cluster.address)
        assert len(nodes) == 2 and {r0["node"], r1["node"]} == nodes
        # the gradients were all-reduced: both ranks ended training with the same weights, the
        # weights two accelerate processes trained on one machine
        (l0,), (l1,) = saves(ref_probe, 0), saves(ref_probe, 1)
        assert r0["digest"] == r1["digest"] == l0["digest"] == l1["digest"]

        # the lost node: the stage fails and no finished marker says otherwise
        cluster.kill_node(1)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 1 and "train failed" in err, err[-4000:]
        assert not marker.exists()
        assert not list(train_dir.glob(".*.tmp"))
        # only rank 0 wrote: rank 1's one file in the run is its RNG state in the trainer's
        # checkpoints (one per rank, as under accelerate launch)
        written = [x["write"] for x in records(probe, 1) if str(run) in x.get("write", "")]
        assert all(Path(w).name == "rng_state_1.pth" and str(train_dir / "checkpoints") in w for w in written), written

    # a rerun on a healthy cluster finishes the stage, from the stage's own checkpoints: the
    # weights two accelerate processes trained, step for step the same rewards, loss and counts
    with cluster_of_two(node_env) as cluster:
        code, err = train(run, ray_recipe(one, cluster.address), tiny_model, child_env(probe))
        assert code == 0, err[-4000:]
        assert marker.is_file() and (train_dir / "model.safetensors").is_file()
        assert any(x.get("write") == str(marker) for x in records(probe, 0))
        ours = weights(train_dir)
        assert ours.keys() == theirs.keys() and all((ours[k] == theirs[k]).all() for k in ours)
        assert steps(train_dir) == steps(ref_train)
        written = [x["write"] for x in records(probe, 1) if str(run) in x.get("write", "")]
        assert all(Path(w).name == "rng_state_1.pth" and str(train_dir / "checkpoints") in w for w in written), written
        # the workers' output is in the train log, by rank; Ray Train's records in the run folder
        log = (train_dir / "log.txt").read_text()
        assert "[rank 0] train step 4/4" in log and "[rank 1] " in log
        assert list((run / "round-01" / "train-ray").iterdir())


DUMP_ENV = """import json, os, sys
if os.environ.get("RANK", "0") == "0":
    with open(sys.argv[1], "w") as f:
        json.dump({k: v for k, v in os.environ.items() if k.startswith(("ACCELERATE_", "FSDP_"))}, f)
"""


@pytest.mark.slow
@pytest.mark.parametrize("config", ["zero2", "zero3", "fsdp"])
def test_a_ray_worker_gets_the_accelerate_environment_accelerate_launch_gives_its_ranks(config, tmp_path):
    """Under Ray no launcher runs: each worker sets, before accelerate reads them, the
    ACCELERATE_*/FSDP_* variables `accelerate launch --config_file` gives its ranks (the
    DeepSpeed stage, FSDP's sharding, mixed precision), computed by accelerate's own launch code.
    Here they are the ones a real `accelerate launch` gave a child, and the node count changes
    none of them."""
    from evoenv_cli.accelerate_configs import config_path
    from evoenv_cli.cluster.train import accelerate_env

    script, dumped = tmp_path / "dump_env.py", tmp_path / "env.json"
    script.write_text(DUMP_ENV)
    exe = Path(sys.executable).with_name("accelerate")
    argv = [exe, "launch", "--config_file", config_path(config), "--num_processes", "2", "--num_machines", "1"]
    argv += ["--main_process_port", str(free_port()), script, dumped]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "FSDP_"))}
    r = subprocess.run(list(map(str, argv)), env={**env, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    launched = json.loads(dumped.read_text())
    assert launched and accelerate_env(config, 2, 1) == launched
    assert accelerate_env(config, 32, 4) == launched


def test_on_a_cluster_the_train_check_needs_no_launcher_but_a_real_accelerate_config(tmp_path):
    """Ray Train is the launcher on a cluster: iterate's check before the first stage accepts
    train.accelerate_config without iterate.train_launch there, and still refuses a config
    that does not exist, in one line."""
    from evoenv_cli import config as cfgmod
    from evoenv_cli.errors import InputError
    from evoenv_cli.loop import Loop

    def loop(config: str) -> Loop:
        recipe = tmp_path / "r.yaml"
        recipe.write_text(f"train:\n  accelerate_config: {config}\n  workers: 4\niterate:\n  cluster: ray\n")
        return Loop(tmp_path / "run", recipe, "m", cfgmod.load_recipe(recipe).iterate, ROOT / "seeds")

    loop("zero3").check_train()
    with pytest.raises(InputError, match="neither one of zero2, zero3, fsdp"):
        loop("zero4").check_train()
