"""The loop's training on two ranks, as far as a CPU shows it: `evoenv iterate` on the tiny
recipe with `iterate.train_launch: accelerate launch --multi_gpu --num_processes 2` (two
processes, gloo, on the CPU). tests/support/rank_probe/sitecustomize.py records each rank's writes and
when it reaches the post-training writes, and can kill a rank there."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from support.two_ranks import PROBE, pool_files, ray_recipe, recipe, records, verdicts

EXE = Path(sys.executable).with_name("evoenv")


def iterate(tmp_path: Path, model: Path, run: Path, probe: Path, kill: str | None = None, cluster: str = ""):
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(PROBE), os.environ.get("PYTHONPATH", "")]),
        "EVOENV_RANK_PROBE": str(probe),
    }
    if kill is not None:
        env["EVOENV_RANK_PROBE_KILL"] = kill
    spec = ray_recipe(recipe(tmp_path), cluster) if cluster else recipe(tmp_path)
    argv = [EXE, "iterate", "--rounds", "1", "--recipe", spec, "--model", model, "--run", run]
    argv += ["--seeds", ROOT / "seeds"]
    return subprocess.run(list(map(str, argv)), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=1500)


@pytest.mark.slow
def test_two_ranks_train_in_the_loop_rank_0_writes_and_a_lost_rank_leaves_no_marker(tiny_model, tmp_path):
    run, probe = tmp_path / "run", tmp_path / "probe"
    probe.mkdir()
    r = iterate(tmp_path, tiny_model, run, probe)
    assert r.returncode == 0, r.stderr[-4000:]
    train = run / "round-01" / "train"
    marker = train / "train-manifest.json"
    assert marker.is_file() and (train / "model.safetensors").is_file()

    # only rank 0 writes the run's files; rank 1 trained (it reached the post-training writes).
    # Rank 1's one write is its own RNG state in the trainer's checkpoints (transformers keeps
    # one per rank, rng_state_1.pth, for an exact resume), gone with the checkpoints.
    rank0, rank1 = records(probe, 0), records(probe, 1)
    assert any(x.get("write") == str(marker) for x in rank0)
    written = [x["write"] for x in rank1 if str(run) in x.get("write", "")]
    assert all(Path(w).name == "rng_state_1.pth" and str(train / "checkpoints") in w for w in written), written
    assert [x["event"] for x in rank1 if "event" in x] == ["save_start", "save_end"]
    # the finished marker came after every rank had finished training
    assert marker.stat().st_mtime >= max(x["t"] for x in rank1 if x.get("event") == "save_start")

    # per-environment stats cover both ranks' completions: 4 a step on each rank
    metrics = [json.loads(x) for x in (train / "metrics.jsonl").read_text().splitlines()]
    assert metrics and all(sum(v["n"] for v in m["per_env"].values()) == 2 * 4 for m in metrics if "per_env" in m)
    assert not (train / "checkpoints").exists()  # the round finished: its optimizer state went

    # the same round on a real two-node Ray cluster (issue 44): sandboxed work on both nodes'
    # pools, training on two Ray Train workers (one per node), the LLM stages on the driver.
    # The same pool and the same rounds.jsonl figures; config_hash differs by the recipe's
    # cluster settings alone
    from support.ray_nodes import two_node_cluster

    on_ray, ray_probe = tmp_path / "run-ray", tmp_path / "probe-ray"
    ray_probe.mkdir()
    with two_node_cluster(tmp_path / "cluster", env_vars={"PYTHONPATH": os.pathsep.join([str(ROOT), str(PROBE)])}) as c:
        r = iterate(tmp_path, tiny_model, on_ray, ray_probe, cluster=c.address)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "cluster: 2 nodes at" in r.stderr and "[rank 1]" in (on_ray / "round-01" / "train" / "log.txt").read_text()
    judged_here, judged_there = verdicts(run), verdicts(on_ray)
    first = next((k for k in judged_here if judged_here[k] != judged_there.get(k)), None)
    assert first is None, (first, verdicts(run, True)[first], verdicts(on_ray, True).get(first))  # where they parted
    assert pool_files(on_ray) == pool_files(run) and len(pool_files(run)) > 10  # the seeds and the composites
    here, there = (json.loads((d / "rounds.jsonl").read_text().splitlines()[0]) for d in (run, on_ray))
    assert here.pop("config_hash") != there.pop("config_hash")
    assert there == here
    spread = json.loads((on_ray / "cluster-nodes.json").read_text())["nodes"]
    assert len(spread) == 2 and all(n["calls"] > 0 and n["cpu_s"] > 0 for n in spread), spread  # both nodes' pools
    print("per node:", spread)
    nodes = {x.get("node") for rank in (0, 1) for x in records(ray_probe, rank) if x.get("node")}
    assert len(nodes) == 2  # one worker on each node
    written = [x["write"] for x in records(ray_probe, 1) if str(on_ray) in x.get("write", "")]
    assert all(Path(w).name == "rng_state_1.pth" for w in written), written  # rank 0 alone wrote

    # the round's training again, rank 1 killed as it reaches the post-training writes: the
    # loop fails, and no finished marker says otherwise
    (run / "rounds.jsonl").unlink()
    shutil.rmtree(train)
    shutil.rmtree(run / "round-01" / "evaluate")
    for f in probe.iterdir():
        f.unlink()
    r = iterate(tmp_path, tiny_model, run, probe, kill="1")
    assert r.returncode == 1 and "train failed" in r.stderr, r.stderr[-4000:]
    assert [x.get("event") for x in records(probe, 1) if "event" in x] == ["save_start"]
    assert not marker.exists()
    assert not list(train.glob(".*.tmp"))
