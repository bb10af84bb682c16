"""The two-rank loop's recipe and probe, shared by test_train_ranks.py (two `accelerate launch`
ranks on one machine) and test_cluster_train.py (two Ray Train workers on two nodes):
rank_probe/sitecustomize.py, put on each rank's PYTHONPATH, records its writes to
$EVOENV_RANK_PROBE/rank-R.jsonl."""

import json
import socket
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).parent / "rank_probe"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def recipe(tmp_path: Path) -> Path:
    text = (ROOT / "tests" / "recipes" / "tiny.yaml").read_text()
    text = text.replace("build_model: tiny", "build_model: ''")
    text = text.replace("recipes/bench/", str(ROOT / "recipes" / "bench") + "/")
    launch = f"accelerate launch --multi_gpu --num_processes 2 --main_process_port {free_port()}"
    # the random model's completions all run to the length limit: masked (the default), none
    # would count in the loss
    text = text.replace("iterate:\n", f"iterate:\n  train_launch: '{launch}'\n")
    text = text.replace("train:\n", "train:\n  mask_truncated_completions: false\n")
    p = tmp_path / "recipe.yaml"
    p.write_text(text)
    return p


def ray_recipe(one_machine: Path, address: str) -> Path:
    """A recipe on a Ray cluster: `one_machine`'s, with two Ray Train workers instead of the
    launcher (beside it, recipe-ray.yaml)."""
    lines = [x for x in one_machine.read_text().splitlines() if "train_launch:" not in x]
    text = "\n".join(lines) + "\n"
    text = text.replace("iterate:\n", f"iterate:\n  cluster: ray\n  cluster_address: '{address}'\n")
    p = one_machine.with_name("recipe-ray.yaml")
    p.write_text(text.replace("train:\n", "train:\n  workers: 2\n"))
    return p


def records(probe: Path, rank: int) -> list[dict]:
    path = probe / f"rank-{rank}.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def verdicts(run: Path, reasons: bool = False) -> dict[str, list[tuple]]:
    """Round 1's verdicts per stage folder, (name, stage) each, to say where two runs that
    should agree first parted; with `reasons`, (name, stage, reason) for the failure message
    (a reason may quote a measured time, which two runs need not share)."""
    out = {}
    for path in sorted((run / "round-01").glob("*/verdicts.jsonl")):
        rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        out[path.parent.name] = [(v.get("name"), v.get("stage"), *([v.get("reason")] if reasons else [])) for v in rows]
    return out


def pool_files(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "pool" / "envs").iterdir())
