import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SEEDS, ScriptedBackend

from evoenv_cli.artifacts import EnvLibrary, prepare_out_dir
from evoenv_cli.config import ReviewConfig, RuntimeConfig
from evoenv_cli.stages import review

YES = json.dumps(
    {
        "reference_answers_prompt": True,
        "well_posed": True,
        "format_stated": True,
        "trivially_guessable": False,
        "asymmetry": "algorithmic",
        "rationale": "A BFS.",
    }
)
ILL_POSED = json.dumps(
    {
        "reference_answers_prompt": True,
        "well_posed": False,
        "format_stated": True,
        "trivially_guessable": False,
        "asymmetry": "none",
        "rationale": "Two answers fit.",
    }
)


def library(tmp_path, names=("grid_shortest_path", "knapsack_max_value", "sat_planted")) -> EnvLibrary:
    lib = tmp_path / "lib"
    lib.mkdir()
    for n in names:
        shutil.copy(SEEDS / f"{n}.py", lib)
    return EnvLibrary.open(lib)


def script(text, pid, j):
    """grid: 3 yes; knapsack: yes, no, garbage (1/3: rejected); sat: yes, yes, garbage (admitted)."""
    if "grid" in text.split("# Source")[1][:400]:
        return f"<think>let me check</think> Verdict: {YES}"
    if 'NAME = "knapsack_max_value"' in text:
        return [f"```json\n{YES}\n```", ILL_POSED, "I am not sure."][j]
    return [YES, YES, "{'well_posed': yes"][j]


def verdicts(out: Path) -> dict[str, dict]:
    return {json.loads(x)["file"]: json.loads(x) for x in (out / "verdicts.jsonl").read_text().splitlines()}


def test_majority_of_votes_decides_with_rationales(tmp_path):
    lib = library(tmp_path)
    out = prepare_out_dir(tmp_path / "out", False, False)
    backend = ScriptedBackend(script)
    summary = review.run(lib, ReviewConfig(votes=3), RuntimeConfig(), backend, out, "m")
    v = verdicts(out)
    assert v["grid_shortest_path.py"]["admitted"] and v["grid_shortest_path.py"]["approvals"] == 3
    knap = v["knapsack_max_value.py"]
    assert not knap["admitted"] and knap["stage"] == "review" and knap["approvals"] == 1
    assert "well_posed=false: Two answers fit." in knap["reason"]
    assert any(not vote["parsed"] for vote in knap["votes"])
    assert v["sat_planted.py"]["admitted"] and v["sat_planted.py"]["approvals"] == 2
    assert summary.admitted == 2
    assert sorted(p.name for p in (out / "envs").iterdir()) == ["grid_shortest_path.py", "sat_planted.py"]
    shown = backend.calls[0][0]
    assert "# Sampled instances" in shown and "Reference answer:" in shown and "(difficulty 10)" in shown


def test_an_offered_candidate_is_admitted_unvoted_and_the_others_are_voted(tmp_path):
    lib = library(tmp_path, ("grid_shortest_path", "knapsack_max_value"))
    knap = next(e for e in lib.files if e.name == "knapsack_max_value")
    (lib.root / "index.jsonl").write_text(
        json.dumps({"file": knap.path.name, "env_id": knap.env_id, "name": knap.name, "origin": "offered"}) + "\n"
    )
    out = prepare_out_dir(tmp_path / "out", False, False)
    backend = ScriptedBackend(lambda text, pid, j: "I am not sure.")
    summary = review.run(EnvLibrary.open(lib.root), ReviewConfig(votes=3), RuntimeConfig(), backend, out, "m")
    v = verdicts(out)
    assert v["knapsack_max_value.py"]["admitted"] and v["knapsack_max_value.py"]["reason"] == review.OFFERED
    assert not v["grid_shortest_path.py"]["admitted"] and summary.admitted == 1
    assert len(backend.calls) == 1 and 'NAME = "knapsack_max_value"' not in backend.calls[0][0]
    index = [json.loads(x) for x in (out / "index.jsonl").read_text().splitlines()]
    assert [(i["file"], i["origin"]) for i in index] == [("knapsack_max_value.py", "offered")]


def test_backend_failures_are_asked_again_on_resume(tmp_path):
    lib = library(tmp_path, ("grid_shortest_path",))
    out = prepare_out_dir(tmp_path / "out", False, False)
    review.run(lib, ReviewConfig(votes=3), RuntimeConfig(), ScriptedBackend(lambda t, p, j: None), out, "m")
    assert verdicts(out)["grid_shortest_path.py"]["stage"] == "backend_error"
    summary = review.run(lib, ReviewConfig(votes=3), RuntimeConfig(), ScriptedBackend(lambda t, p, j: YES), out, "m")
    assert summary.admitted == 1
    lines = (out / "verdicts.jsonl").read_text().splitlines()
    assert [json.loads(x)["stage"] for x in lines] == ["admitted"]  # the failed try is not kept


def test_parse_vote_rejects_malformed_fields():
    assert review.parse_vote(YES)[0]["asymmetry"] == "algorithmic"
    assert review.parse_vote(YES.replace("true", '"yes"', 1))[0] is None
    assert review.parse_vote(YES.replace('"algorithmic"', '"clever"'))[0] is None
    assert review.parse_vote("")[1] == "no JSON verdict in the response"


@pytest.mark.slow
def test_real_tiny_model_votes_are_unparseable_rejections(tiny_model, tmp_path):
    library(tmp_path, ("grid_shortest_path",))
    exe = Path(sys.executable).with_name("evoenv")
    r = subprocess.run(
        [
            exe,
            "review",
            tmp_path / "lib",
            "--out",
            tmp_path / "out",
            "--model",
            tiny_model,
            "--backend",
            "hf",
            "--votes",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["admitted"] == 0
    v = verdicts(tmp_path / "out")["grid_shortest_path.py"]
    assert v["stage"] == "review" and "unparseable verdict" in v["reason"] and len(v["votes"]) == 2
