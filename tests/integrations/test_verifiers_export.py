"""`evoenv export verifiers`: a library as a verifiers v1 taskset package, driven by verifiers
0.4 itself: its loader resolves the taskset by id and iterates its tasks, its `Task.score`
runs the task's `@vf.reward` on a `vf.Trace` (as verifiers' own tests build one), and
`vf-eval --dry-run` resolves the installed package from its command line."""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SEEDS

EXE = Path(sys.executable).with_name("evoenv")
NAME = "evoenv_seeds_export"


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    out = tmp_path_factory.mktemp("vf") / "pkg"
    r = subprocess.run(
        [EXE, "export", "verifiers", SEEDS, "--out", out, "--name", NAME, "-n", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return out


def test_the_package_is_self_contained(package):
    pkg = package / NAME
    assert sorted(p.name for p in (pkg / "library").glob("*.py")) == sorted(p.name for p in SEEDS.glob("*.py"))
    rows = [json.loads(x) for x in (pkg / "tasks.jsonl").read_text().splitlines()]
    assert len(rows) == 20 and all(r["seed"] >= 2**31 for r in rows)  # held-out seeds by default
    assert f'name = "{NAME.replace("_", "-")}"' in (package / "pyproject.toml").read_text()


def _trace(vf, data, reply):
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.types import AssistantMessage, UserMessage

    return vf.Trace(
        agent=vf.AgentInfo(config=vf.AgentConfig()),
        task=vf.TraceTask(type="EvoenvTask", data=data),
        nodes=[
            MessageNode(parent=None, message=UserMessage(content="task"), sampled=False),
            MessageNode(parent=0, message=AssistantMessage(content=reply), sampled=True),
        ],
    )


@pytest.mark.slow  # imports verifiers and scores in the sandbox: ~11 s
def test_verifiers_loads_the_taskset_and_scores_with_the_environments(package, monkeypatch):
    import verifiers.v1 as vf
    from verifiers.v1.utils.loaders import load_taskset, taskset_config_type

    monkeypatch.syspath_prepend(str(package))
    taskset = load_taskset(taskset_config_type(NAME)(id=NAME))
    tasks = list(taskset.take(20))
    assert len(tasks) == 20 and len({t.key for t in tasks}) == 20
    first = tasks[0]
    assert first.data.prompt[-1].content.endswith("</answer> at the very end of your response.")
    planted = next(t for t in tasks if t.data.env_name == "graph_coloring_planted")
    other = " ".join(str((int(c) + 1) % 3) for c in planted.data.answer.split())
    cases = [
        (first, f"so <answer>{first.data.answer}</answer>", 1.0, 1.0),
        (planted, f"<answer>{other}</answer>", 1.0, 1.0),  # a valid answer that is not the reference
        (first, first.data.answer, 0.0, 0.0),  # no answer block
        (first, "<answer>surely wrong</answer>", 0.0, 1.0),
    ]

    async def score_all():
        traces = [_trace(vf, t.data, reply) for t, reply, _, _ in cases]
        await asyncio.gather(*[t.score(tr) for (t, _, _, _), tr in zip(cases, traces)])
        return traces

    for (_, _, reward, answered), tr in zip(cases, asyncio.run(score_all())):
        assert tr.rewards["env_score"].score == reward and tr.metrics["answered"] == answered


@pytest.mark.slow
def test_vf_eval_resolves_the_exported_taskset(package, tmp_path):
    exe = Path(sys.executable).with_name("vf-eval")
    env = {**os.environ, "PYTHONPATH": str(package)}
    args = [
        "-m",
        "tiny",
        "--client.base-url",
        "http://127.0.0.1:8000/v1",
        "-n",
        "2",
        "--env.agent.harness.id",
        "null",
        "--dry-run",
    ]
    ok = subprocess.run([exe, NAME, *args], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert list((tmp_path / "outputs").glob(f"{NAME}--tiny--null--*/configs/resolved/eval.json"))
    missing = subprocess.run(
        [exe, NAME + "_missing", *args], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert missing.returncode != 0 and "not found" in missing.stdout + missing.stderr


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--name", "Bad-Name"], "a package name is lowercase"),
        (["--out", "used"], "already holds files"),
        (["--split", "test"], "--split: must be one of"),
    ],
)
def test_bad_export_arguments_exit_2_in_one_line(evoenv, tmp_path, args, needle):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("x")
    if "--out" not in args:
        args = [*args, "--out", "new"]
    r = evoenv("export", "verifiers", SEEDS, *args)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "new").exists()
