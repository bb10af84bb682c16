import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SEEDS, ScriptedBackend

from evoenv_cli.artifacts import EnvLibrary, prepare_out_dir
from evoenv_cli.config import SynthesizeConfig
from evoenv_cli.stages import synthesize

GOOD = (SEEDS / "grid_shortest_path.py").read_text().replace('NAME = "grid_shortest_path"', 'NAME = "maze_steps"')


def reply(text, pid, j):
    if pid % 3 == 0:
        return f"<think>maybe a maze?</think>\nHere it is:\n```python\n{GOOD}```\n"
    if pid % 3 == 1:
        return "I would write a maze environment, but I ran out of ideas."
    return f"```python\ndef generate(:\n```\nFixed:\n```python\n{GOOD}```\nand a usage note:\n```\nprint(1)\n```"


def records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "generations.jsonl").read_text().splitlines()]


def test_candidates_and_every_generation_recorded(tmp_path):
    out = prepare_out_dir(tmp_path / "out", False, False)
    summary = synthesize.run(
        EnvLibrary.open(SEEDS), [], SynthesizeConfig(n=4, seed=3, batch=2), ScriptedBackend(reply), out, "scripted"
    )
    assert summary["candidates"] == 4
    rows = records(out)
    assert [r["outcome"] for r in rows] == ["ok", "no_code", "ok", "ok", "no_code", "ok"]
    files = sorted(p.name for p in (out / "envs").iterdir())
    assert files == ["g00000_maze_steps.py", "g00002_maze_steps.py", "g00003_maze_steps.py", "g00005_maze_steps.py"]
    assert (out / "envs" / files[0]).read_text() == GOOD
    for r in rows:
        assert len(r["parents"]) == 2 and r["topic"] and r["prompt_hash"] and r["model"] == "scripted"
        assert r["sampling"]["max_tokens"] == 4096
    index = [json.loads(x) for x in (out / "index.jsonl").read_text().splitlines()]
    assert [i["file"] for i in index] == files and all(i["origin"] == "synthesize" for i in index)


def test_offered_files_are_added_beside_the_policy_s_candidates_as_they_are(tmp_path):
    offered = tmp_path / "offered"
    offered.mkdir()
    (offered / "g00000_maze_steps.py").write_text(GOOD)  # the name a policy candidate takes
    (offered / "knapsack_max_value.py").write_bytes((SEEDS / "knapsack_max_value.py").read_bytes())
    out = prepare_out_dir(tmp_path / "out", False, False)
    summary = synthesize.run(
        EnvLibrary.open(SEEDS),
        [],
        SynthesizeConfig(n=1, seed=3, batch=1),
        ScriptedBackend(reply),
        out,
        "scripted",
        offered=EnvLibrary.open(offered),
    )
    assert summary["candidates"] == 1 and summary["offered"] == 2
    index = {i["file"]: i for i in map(json.loads, (out / "index.jsonl").read_text().splitlines())}
    assert set(index) == {"g00000_maze_steps.py", "o_g00000_maze_steps.py", "knapsack_max_value.py"}
    assert index["g00000_maze_steps.py"]["origin"] == "synthesize"
    for f in ("o_g00000_maze_steps.py", "knapsack_max_value.py"):
        assert index[f]["origin"] == "offered" and index[f]["parents"] == []
        assert (out / "envs" / f).read_bytes() == (offered / f.removeprefix("o_")).read_bytes()
    assert index["knapsack_max_value.py"]["offered_from"] == str(offered / "knapsack_max_value.py")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["offered"] == 2 and manifest["offered"] == str(offered)


def test_prompt_has_contract_asymmetry_examples_pool_and_topic():
    examples = synthesize.load_examples([EnvLibrary.open(SEEDS)])
    text, parents, topic = synthesize.build_prompt(7, SynthesizeConfig(seed=1), examples, ["bit puzzles"])
    assert "def score(instance: dict, answer: str) -> float" in text
    assert "Planted: hard to solve, easy to verify" in text
    for name in parents:
        assert f"## {name}\n```python" in text
    assert "- sat_planted:" in text and topic == "bit puzzles" and "area of: bit puzzles" in text
    again = synthesize.build_prompt(7, SynthesizeConfig(seed=1), examples, ["bit puzzles"])
    other = synthesize.build_prompt(8, SynthesizeConfig(seed=1), examples, ["bit puzzles"])
    assert again == (text, parents, topic) and other[0] != text


def test_code_extraction_is_robust():
    assert synthesize.extract_code("no code here") == (None, "no_code")
    assert synthesize.extract_code("```python\nx = (\n```")[1] == "syntax_error"
    assert synthesize.extract_code("```python\ndef generate(s, d): pass\n```")[1] == "missing_functions"
    code, outcome = synthesize.extract_code(f"<think>```python\n{GOOD}```</think>")
    assert outcome == "no_code"  # code only inside the thinking is not an answer
    assert synthesize.extract_code(f"<think>draft</think>```py\n{GOOD}```")[0] == GOOD


def test_resume_continues_until_n_without_repeating(tmp_path):
    out = prepare_out_dir(tmp_path / "out", False, False)
    seeds = EnvLibrary.open(SEEDS)
    synthesize.run(seeds, [], SynthesizeConfig(n=2, seed=3, batch=2), ScriptedBackend(reply), out, "m")
    first = records(out)
    backend = ScriptedBackend(reply)
    synthesize.run(seeds, [], SynthesizeConfig(n=4, seed=3, batch=2), backend, out, "m")
    rows = records(out)
    assert rows[: len(first)] == first
    assert [r["prompt_id"] for r in rows] == list(range(len(rows)))
    assert sum(r["outcome"] == "ok" for r in rows) == 4
    fresh = prepare_out_dir(tmp_path / "fresh", False, False)
    synthesize.run(seeds, [], SynthesizeConfig(n=4, seed=3, batch=4), ScriptedBackend(reply), fresh, "m")
    assert [r["prompt"] for r in records(fresh)] == [r["prompt"] for r in rows]


def test_backend_errors_are_recorded_not_fatal(tmp_path):
    out = prepare_out_dir(tmp_path / "out", False, False)
    summary = synthesize.run(
        EnvLibrary.open(SEEDS),
        [],
        SynthesizeConfig(n=2, max_requests=3, batch=3),
        ScriptedBackend(lambda t, p, j: None),
        out,
        "m",
    )
    assert summary["candidates"] == 0 and summary["outcomes"] == {"error": 3}


@pytest.mark.slow  # a real (tiny) model through transformers: ~11 CPU-s on a loaded box
def test_real_tiny_model_through_hf_writes_no_environment_but_records_all(tiny_model, tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("synthesize:\n  max_requests: 3\n  batch: 3\n")
    exe = Path(sys.executable).with_name("evoenv")
    r = subprocess.run(
        [
            exe,
            "synthesize",
            "--seeds",
            SEEDS,
            "--out",
            tmp_path / "s",
            "--n",
            "2",
            "--model",
            tiny_model,
            "--backend",
            "hf",
            "--max-tokens",
            "24",
            "--json",
            "--config",
            recipe,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["requests"] == 3 and summary["candidates"] == 0
    rows = records(tmp_path / "s")
    assert all(r["outcome"] in ("no_code", "syntax_error", "missing_functions") for r in rows)
    assert all(r["backend"] == "hf" and r["tokens"] > 0 for r in rows)


def test_the_contract_prompt_and_the_checker_agree():
    """The prompt is rendered from runtime/contract.py: every module it allows is accepted by
    check_source, every name it forbids is refused, its answer types, functions (with their
    arity) and constants are the checker's, and its limits are the contract's."""
    import re

    from evoenv_cli.runtime import contract

    text = synthesize.contract_text()
    assert "$" not in text  # every placeholder filled
    allowed = re.search(r"allowed imports: ([^)]*)\)", text).group(1)
    modules = [m.strip() for m in allowed.split(",")]
    assert set(modules) == contract.ALLOWED_IMPORTS - {"__future__"}

    def listed(pattern):
        found = re.search(pattern, " ".join(text.split())).group(1)
        return [n.strip() for n in found.split(",")]

    names = listed(r"must not use the names (.*?), nor these attributes")
    attributes = listed(r"nor these attributes of anything: (.*?), nor any attribute")
    assert set(names) == contract.FORBIDDEN_NAMES and set(attributes) == contract.FORBIDDEN_ATTRIBUTES

    good = GOOD.encode()
    assert contract.check_source(good).ok
    for m in modules:
        report = contract.check_source(good.replace(b"import random", f"import random\nimport {m}".encode(), 1))
        assert report.ok, (m, report.reason)
    for n in names:
        assert not contract.check_source(good + f"\n\ndef _probe():\n    return {n}\n".encode()).ok, n
    for n in attributes:  # as an attribute of an allowed module
        assert not contract.check_source(good + f"\n\ndef _probe():\n    return random.{n}\n".encode()).ok, n
    underscore = re.search(r"starts with an underscore but (.*?) \(as in", " ".join(text.split())).group(1)
    assert set(underscore.replace(" and ", ", ").split(", ")) == contract.ALLOWED_UNDERSCORE_ATTRIBUTES
    assert contract.check_source(good + b"\n\ndef _probe():\n    return type(1).__name__\n").ok
    assert not contract.check_source(good + b"\n\ndef _probe():\n    return type(1).__dict__\n").ok

    answer_types = re.search(r"ANSWER_TYPE = .*# one of: (.*)", text).group(1)
    assert tuple(t.strip() for t in answer_types.split(",")) == contract.ANSWER_TYPES
    defs = dict(re.findall(r"^def (\w+)\(([^)]*)\)", text, re.M))
    assert {fn: len(args.split(",")) for fn, args in defs.items()} == contract.REQUIRED_FUNCTIONS
    constants = set(re.findall(r"^([A-Z_]+) = ", text, re.M))
    assert "NAME" in constants and constants <= set(contract.CONTRACT_CONSTANTS)
    assert f"difficulty is {contract.LEVELS[0]} (easiest)" in text and f"to {contract.LEVELS[-1]} and" in text
    assert f"well under {contract.ASKED_CALL_SECONDS:g} s" in text
    assert f"under {contract.ASKED_INSTANCE_BYTES // 1000} KB" in text
    build = synthesize.build_prompt(0, SynthesizeConfig(), synthesize.load_examples([EnvLibrary.open(SEEDS)]), ["x"])
    assert text in build[0]
