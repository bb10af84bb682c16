"""`evoenv import reasoning-gym TASK... --out DIR`: environment files that sample, solve and
score through reasoning-gym, run in the real sandbox, and pass validate, compose, sample and
train like any environment. The sandbox's properties hold: only evoenv's exact import template
(or compose's embedding of it) may import the one pinned package, its jail sees that package's
files and nothing else of the host's Python, read-only; any other source keeps the
standard-library allow-list and sees no package at all."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SEEDS

from evoenv_cli.envfile import EnvFile
from evoenv_cli.integrations import reasoning_gym_tasks as rg
from evoenv_cli.runtime.contract import check_source
from evoenv_cli.runtime.packages import grant_for
from evoenv_cli.runtime.workers import Call, SandboxWorkers

pytest.importorskip("reasoning_gym", reason="the [rg] extra is part of `make setup`")
EXE = Path(sys.executable).with_name("evoenv")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
TASKS = ("chain_sum", "basic_arithmetic")


def evoenv(*args):
    return subprocess.run([EXE, *map(str, args)], capture_output=True, text=True, env=ENV, timeout=900)


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("rg") / "lib"
    r = evoenv("import", "reasoning-gym", *TASKS, "--out", out)
    assert r.returncode == 0, r.stderr
    return out


def test_import_writes_one_file_per_task_and_is_idempotent(imported):
    files = sorted(p.name for p in imported.glob("*.py"))
    assert files == ["rg_basic_arithmetic.py", "rg_chain_sum.py"]
    text = (imported / "rg_chain_sum.py").read_text()
    assert f"REQUIRES = ['{rg.requirement()}']" in text and "TASK = 'chain_sum'" in text
    assert evoenv("import", "reasoning-gym", "chain_sum", "--out", imported).returncode == 0
    assert (imported / "rg_chain_sum.py").read_text() == text


@pytest.mark.parametrize(
    "args, needle",
    [
        (["reasoning-gym", "chain_sun"], "did you mean 'chain_sum'"),
        (["hub", "chain_sum"], "hub: unknown source"),
    ],
)
def test_import_bad_names_exit_2_in_one_line(args, needle, tmp_path):
    r = evoenv("import", *args, "--out", tmp_path / "x")
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "x").exists()


def test_import_never_overwrites_a_changed_file_without_force(imported, tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "rg_chain_sum.py").write_text("# mine\n")
    r = evoenv("import", "reasoning-gym", "chain_sum", "--out", lib)
    assert r.returncode == 2 and "exists and differs" in r.stderr
    assert (lib / "rg_chain_sum.py").read_text() == "# mine\n"
    assert evoenv("import", "reasoning-gym", "chain_sum", "--out", lib, "--force").returncode == 0


def test_only_the_exact_template_may_import_the_package(imported):
    source = (imported / "rg_chain_sum.py").read_bytes()
    assert check_source(source).ok and grant_for(source).modules == {"reasoning_gym"}
    tampered = [
        source.replace(b"return value if 0.0 <= value <= 1.0 else 0.0", b"return 1.0"),  # forged score
        source.replace(b"import reasoning_gym\n", b"import reasoning_gym\nimport sympy\n"),
        source.replace(rg.requirement().encode(), b"reasoning-gym==0.0.1"),  # another pin
        source + b"\n# a comment\n",
    ]
    for bad in tampered:
        assert grant_for(bad) is None
        report = check_source(bad)
        assert not report.ok and "not allowed" in report.reason, report
    synthesized = b'"""x"""\nimport reasoning_gym\nNAME = "x"\n' + b"\n".join(
        f"def {f}(*a):\n    return 0".encode() for f in ("generate", "prompt", "solve", "score")
    )
    assert "import of 'reasoning_gym' is not allowed" in check_source(synthesized).reason


PROBE = b"""

def generate(seed, difficulty):
    return {"seed": seed}


def prompt(instance):
    return "probe"


def solve(instance):
    return "x"


def score(instance, answer):
    if answer.startswith("write:"):
        try:
            with open(answer[6:], "w") as f:
                f.write("x")
            return 1.0
        except OSError:
            return 0.0
    try:
        __import__(answer)
        return 1.0
    except ImportError:
        return 0.0
"""


def probe_sources(imported):
    """A composite-shaped file holding compose's embedding of the template (so it is granted
    the package) plus hostile top-level code that validate would reject, run straight in the
    pool to see what its jail holds; and the same probe without the trusted part."""
    from evoenv_cli.stages.compose import embed

    part = embed((imported / "rg_chain_sum.py").read_text(), "_part_0")
    granted = ('"""probe"""\nNAME = "probe"\n\n' + part + "\n_PART = _part_0()\n").encode() + PROBE
    plain = b'"""probe"""\nNAME = "probe"\n' + PROBE
    assert grant_for(granted) is not None and grant_for(plain) is None
    assert "not allowed" in check_source(granted).reason  # the probe's own code is not trusted
    return granted, plain


@pytest.mark.parametrize("mode", ["bwrap", "process"])
def test_a_granted_jail_sees_the_pinned_closure_only_and_read_only(imported, tmp_path, mode):
    granted, plain = probe_sources(imported)
    (tmp_path / "granted.py").write_bytes(granted)
    (tmp_path / "plain.py").write_bytes(plain)
    envs = [EnvFile.from_path(tmp_path / f) for f in ("granted.py", "plain.py")]
    target = next(iter(sorted(grant_for(granted).entries)))
    names = [
        "reasoning_gym",
        "sympy",
        "torch",
        "transformers",
        "typer",
        "evoenv_cli",
        "json",
        f"write:/evoenv-packages/{target.name}/evoenv-probe" if mode == "bwrap" else f"write:{target}/evoenv-probe",
    ]
    with SandboxWorkers(sandbox_mode=mode, workers=2) as pool:
        results = pool.run_many([(e, [Call.score({}, n) for n in names]) for e in envs])
    got = [{n: r.value for n, r in zip(names, rs)} for rs in results]
    assert got[0] == {
        "reasoning_gym": 1.0,
        "sympy": 1.0,
        "torch": 0.0,
        "transformers": 0.0,
        "typer": 0.0,
        "evoenv_cli": 0.0,
        "json": 1.0,
        names[-1]: 0.0,
    }
    assert got[1]["reasoning_gym"] == got[1]["sympy"] == 0.0 and got[1]["json"] == 1.0
    assert not (target / "evoenv-probe").exists()


@pytest.mark.slow
def test_imported_files_pass_validate_compose_sample_and_train(imported, tiny_model, tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    for f in imported.glob("*.py"):
        (lib / f.name).write_bytes(f.read_bytes())
    r = evoenv("validate", lib, "--out", tmp_path / "v", "--json")
    assert r.returncode == 0, r.stderr
    verdicts = [json.loads(x) for x in (tmp_path / "v" / "verdicts.jsonl").read_text().splitlines()]
    assert all(v["admitted"] for v in verdicts), verdicts
    # compose: PARALLEL composites with an imported part, judged by the full execution contract
    both = tmp_path / "both"
    both.mkdir()
    for f in [*imported.glob("*.py"), SEEDS / "edit_distance.py"]:
        (both / f.name).write_bytes(f.read_bytes())
    r = evoenv("compose", both, "--out", tmp_path / "c", "--ops", "parallel", "--n", "3", "--seed", "1", "--json")
    assert r.returncode == 0, r.stderr
    made = [json.loads(x) for x in (tmp_path / "c" / "verdicts.jsonl").read_text().splitlines()]
    admitted = [v for v in made if v["admitted"]]
    assert admitted, made
    composite = next((tmp_path / "c" / "envs").glob("*.py")).read_bytes()
    assert grant_for(composite) is not None and check_source(composite).ok
    # sample and train on them
    rows = tmp_path / "rows.jsonl"
    r = evoenv("sample", tmp_path / "v", "-o", rows, "-n", "4", "-d", "1")
    assert r.returncode == 0, r.stderr
    data = [json.loads(x) for x in rows.read_text().splitlines()]
    assert {d["env_name"] for d in data} == {"rg_chain_sum", "rg_basic_arithmetic"}
    assert all("State the final answer" in d["prompt"][-1]["content"] for d in data if d["env_name"] == "rg_chain_sum")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "train:\n  num_generations: 2\n  per_device_train_batch_size: 4\n"
        "  max_completion_length: 8\n  gradient_checkpointing: false\n"
        "  mask_truncated_completions: false\n"  # the random model's completions are all cut
    )
    r = evoenv(
        "train",
        rows,
        "--library",
        tmp_path / "v",
        "--model",
        tiny_model,
        "--out",
        tmp_path / "t",
        "--config",
        recipe,
        "--max-steps",
        "1",
        "--json",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["steps"] == 1


def test_imported_scores_match_reasoning_gym_in_process(imported):
    """The jail's score is reasoning-gym's own score_answer on the same item."""
    import reasoning_gym

    env = EnvFile.from_path(imported / "rg_chain_sum.py")
    with SandboxWorkers() as pool:
        inst = pool.run(env, [Call.generate(7, 3)])[0].value
        answers = [inst["answer"], f"+0{inst['answer']}.00", f"it is {inst['answer']}", "nope"]
        got = [r.value for r in pool.run(env, [Call.score(inst, a) for a in answers])]
    levels = rg.curriculum_levels("chain_sum")
    ds = reasoning_gym.create_dataset("chain_sum", size=1, seed=7, **levels["3"])
    assert inst["question"] == ds[0]["question"]
    assert got == [ds.score_answer(a, ds[0]) for a in answers] and got[:2] == [1.0, 1.0] and 0 < got[2] < 1
