"""One hostile file never stops a stage, and bad input is one line and exit 2 (issue 12),
through the real `evoenv` command.

Hostile values (a lone surrogate in a message, a NAME or a prompt; instances nested 900 deep;
rich markup in a skip reason; a NAME that is a list) become verdicts or skipped rows while the
rest of the library is judged, and `--resume` goes on. The library's own entries: a symlink
that leaves it, a file name that is not UTF-8, a 50 MB source. Bad input: rows with fields of
the wrong type, recipes with values of the wrong type or range, outputs of the wrong kind, a
temp file left by a killed write. And the sandbox the stage ran in is recorded.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SEEDS

from evoenv_cli.runtime import sandbox

GOOD = SEEDS / "coin_change_ways.py"

BODY = """

def generate(seed: int, difficulty: int) -> dict:
    {generate}


def prompt(instance: dict) -> str:
    {prompt}


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    return 1.0 if answer.strip() == str(instance["n"]) else 0.0
"""


def env_source(
    name: str,
    generate: str = 'return {"n": seed % 97}',
    prompt: str = 'return "Repeat " + str(instance["n"]) + "."',
    head: str = "",
) -> str:
    """A small environment whose generate or prompt carries the hostile value."""
    return f'"""Hostile test environment {name}."""\n{head}NAME = {name!r}\n' + BODY.format(
        generate=generate, prompt=prompt
    )


HOSTILE = {
    "surrogate_prompt.py": env_source("surrogate_prompt", prompt='return "Say \\ud800 " + str(instance["n"])'),
    "surrogate_error.py": env_source("surrogate_error", generate='raise ValueError("bad \\udcff value")'),
    "deep_instance.py": env_source(
        "deep_instance", generate='d = {"n": 1}\n    for _ in range(900):\n        d = {"d": d}\n    return d'
    ),
    "markup_error.py": env_source("markup_error", generate='raise ValueError("[bold red]x[/] [/oops] [link=x]")'),
    "surrogate_doc.py": '"""Doc with \\ud800 in it."""\n' + env_source("surrogate_doc").split("\n", 1)[1],
}
LIST_NAME = env_source("x").replace("NAME = 'x'", 'NAME = ["a", "list"]')


def make_lib(path: Path, files: dict[str, str | Path]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, src in files.items():
        (path / name).write_text(src.read_text() if isinstance(src, Path) else src)
    return path


def read_text_strict(path: Path) -> str:
    return path.read_bytes().decode("utf-8")  # strict: raises on anything but valid UTF-8


def verdicts(out: Path) -> dict[str, dict]:
    return {r["file"]: r for r in map(json.loads, read_text_strict(out / "verdicts.jsonl").splitlines())}


def assert_one_line_error(r, *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for needle in needles:
        assert needle in r.stderr, r.stderr


# -- hostile values: a verdict, never the end of the run ---------------------------------------------
def test_validate_judges_hostile_files_and_the_rest(evoenv, tmp_path):
    lib = make_lib(tmp_path / "lib", {**HOSTILE, "good.py": GOOD})
    r = evoenv("validate", lib, "--out", "out", "--json")
    assert r.returncode == 0, r.stderr
    v = verdicts(tmp_path / "out")
    assert set(v) == set(HOSTILE) | {"good.py"}
    assert v["good.py"]["admitted"], v["good.py"]
    assert v["surrogate_error.py"]["stage"] == "run" and "\ufffd" in v["surrogate_error.py"]["reason"]
    assert v["deep_instance.py"]["stage"] == "run" and "nested deeper" in v["deep_instance.py"]["reason"]
    assert v["markup_error.py"]["stage"] == "run" and "[/oops]" in v["markup_error.py"]["reason"]
    assert all(record.get("sandbox") == sandbox.resolve("auto").jail for record in v.values())
    read_text_strict(tmp_path / "out" / "index.jsonl")
    # killed and resumed: nothing crashes at the same file again, nothing is judged twice
    lines = (tmp_path / "out" / "verdicts.jsonl").read_bytes().splitlines(keepends=True)
    (tmp_path / "out" / "verdicts.jsonl").write_bytes(b"".join(lines[:2]))
    r = evoenv("validate", lib, "--out", "out", "--resume", "--json")
    assert r.returncode == 0, r.stderr
    assert {f: x["stage"] for f, x in verdicts(tmp_path / "out").items()} == {f: x["stage"] for f, x in v.items()}


def test_sample_skips_hostile_files_and_samples_the_rest(evoenv, tmp_path):
    lib = make_lib(tmp_path / "lib", {**HOSTILE, "list_name.py": LIST_NAME, "good.py": GOOD})
    r = evoenv("sample", lib, "--out", "rows.jsonl", "--per-env", "2")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in read_text_strict(tmp_path / "rows.jsonl").splitlines()]
    names = {row["env_name"] for row in rows}
    assert names == {"coin_change_ways", "surrogate_prompt", "surrogate_doc"}
    assert all("\ufffd" in row["prompt"][-1]["content"] for row in rows if row["env_name"] == "surrogate_prompt")
    assert "[bold red]x[/] [/oops]" in r.stderr  # the reason printed as it is, not as markup
    assert "NAME must be a snake_case string" in r.stderr  # the list NAME: skipped, said why
    assert "nested deeper" in r.stderr


def test_compose_skips_a_part_with_a_list_name_and_composes_the_rest(evoenv, tmp_path):
    lib = make_lib(
        tmp_path / "lib",
        {
            "list_name.py": LIST_NAME,
            "surrogate_doc.py": HOSTILE["surrogate_doc.py"],
            "a.py": SEEDS / "coin_change_ways.py",
            "b.py": SEEDS / "edit_distance.py",
        },
    )
    r = evoenv("compose", lib, "--out", "out", "--n", "2", "--ops", "parallel", "--json")
    assert r.returncode == 0, r.stderr
    manifest = json.loads(read_text_strict(tmp_path / "out" / "manifest.json"))
    assert any(s.startswith("list_name.py: NAME must be") for s in manifest["skipped_parts"]), manifest
    assert json.loads(r.stdout)["admitted"] >= 1
    for source in (tmp_path / "out" / "envs").glob("*.py"):
        read_text_strict(source)


# -- the library's own entries -----------------------------------------------------------------------
def test_links_out_of_the_library_and_bad_names_are_refused_unread(evoenv, tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text(GOOD.read_text().replace("coin_change_ways", "outside_secret"))
    lib = make_lib(tmp_path / "lib", {"good.py": GOOD})
    (lib / "shadow.py").symlink_to("/etc/shadow" if Path("/etc/shadow").exists() else "/etc/passwd")
    (lib / "outside.py").symlink_to(outside)
    (lib / "inside.py").symlink_to(lib / "good.py")  # a link within the library is its own file
    bad_name = os.fsencode(lib) + b"/bad\xff.py"
    with open(bad_name, "wb") as f:
        f.write(GOOD.read_bytes())
    r = evoenv("validate", lib, "--out", "out", "--json")
    assert r.returncode == 0, r.stderr
    v = verdicts(tmp_path / "out")
    for name in ("shadow.py", "outside.py"):
        assert v[name]["stage"] == "library" and "outside the library" in v[name]["reason"], v[name]
        assert v[name]["env_id"] is None
    assert v["bad\\xff.py"]["stage"] == "library" and "not valid UTF-8" in v["bad\\xff.py"]["reason"]
    assert v["good.py"]["admitted"]
    envs = tmp_path / "out" / "envs"
    assert all("outside_secret" not in p.read_text() for p in envs.glob("*.py"))
    assert json.loads(r.stdout)["rejected_by_stage"]["library"] == 3
    r = evoenv("sample", lib, "--out", "rows.jsonl", "--per-env", "1")
    assert r.returncode == 0, r.stderr
    assert "outside the library" in r.stderr
    assert {json.loads(x)["env_name"] for x in read_text_strict(tmp_path / "rows.jsonl").splitlines()} == {
        "coin_change_ways"
    }


@pytest.mark.parametrize("megabytes", [50, 0.5])
def test_an_oversized_source_is_refused_in_sample_and_validate(evoenv, tmp_path, megabytes):
    """50 MB of statements is not read at all (over the 1 MB a library file may have); 0.5 MB
    is read but never parsed in the parent nor run (over the contract's 100 KB)."""
    lib = make_lib(tmp_path / "lib", {"good.py": GOOD})
    big = GOOD.read_text().replace("coin_change_ways", "big_env")
    with (lib / "big.py").open("w") as f:
        f.write(big)
        f.write("x = 1\n" * int(megabytes * 1_000_000 / 6))
    r = evoenv("sample", lib, "--out", "rows.jsonl", "--per-env", "1")
    assert r.returncode == 0, r.stderr
    assert "over 1000000 bytes" in r.stderr or "over 100000" in r.stderr, r.stderr
    r = evoenv("validate", lib, "--out", "out", "--json")
    assert r.returncode == 0, r.stderr
    v = verdicts(tmp_path / "out")
    assert v["big.py"]["stage"] in ("library", "static") and not v["big.py"]["admitted"]
    assert v["good.py"]["admitted"]


# -- bad rows, recipes and outputs: one line, exit 2, before any work --------------------------------
@pytest.fixture(scope="module")
def sampled(tmp_path_factory) -> bytes:
    """The seeds' rows, one per environment, as `evoenv sample` writes them: sampled once for
    the module (a jail per environment), each test given its own copy."""
    out = tmp_path_factory.mktemp("rows") / "rows.jsonl"
    subprocess.run(
        [
            shutil.which("evoenv", path=str(Path(sys.executable).parent)),
            "sample",
            str(SEEDS),
            "--out",
            str(out),
            "--per-env",
            "1",
        ],
        check=True,
        capture_output=True,
    )
    return out.read_bytes()


@pytest.fixture
def rows_file(tmp_path, sampled) -> Path:
    out = tmp_path / "rows.jsonl"
    out.write_bytes(sampled)
    return out


@pytest.mark.parametrize(
    "field,value,needle",
    [
        ("env_id", ["a", "list"], "env_id must be a string"),
        ("env_name", {"a": 1}, "env_name must be a string"),
        ("instance", "{not json", "instance must be a JSON object"),
        ("instance", [1, 2], "instance must be a JSON object"),
        ("prompt", [{"role": "user", "content": ["a", "list"]}], "prompt must be chat messages"),
        ("answer", ["7"], "answer must be a string"),
    ],
)
def test_train_refuses_rows_with_fields_of_the_wrong_type(evoenv, tmp_path, rows_file, field, value, needle):
    rows = rows_file
    lines = rows.read_text().splitlines()
    bad = json.loads(lines[1])
    bad[field] = value
    rows.write_text("\n".join([lines[0], json.dumps(bad), *lines[2:]]) + "\n")
    r = evoenv("train", rows, "--library", SEEDS, "--model", tmp_path / "no-model", "--out", "ckpt")
    assert_one_line_error(r, f"{rows}:2", needle)
    assert not (tmp_path / "ckpt").exists()


def test_preview_shows_rows_with_odd_fields_without_crashing(evoenv, tmp_path, rows_file):
    rows = rows_file
    lines = rows.read_text().splitlines()
    odd = json.loads(lines[0])
    odd.update(
        env_id=["unhashable"],
        env_name=["a"],
        answer={"x": "[bold]y[/]"},
        prompt=[{"role": "user", "content": ["a", "[/oops]"]}],
    )
    rows.write_text(json.dumps(odd) + "\n" + "\n".join(lines[1:]) + "\n")
    r = evoenv("preview", rows, "-n", "2")
    assert r.returncode == 0, r.stderr
    assert "[/oops]" in r.stdout and "[bold]y[/]" in r.stdout
    rows.write_text(json.dumps({**odd, "prompt": 7}) + "\n")
    assert_one_line_error(evoenv("preview", rows), "prompt must be chat messages")


def test_env_reward_scores_bad_rows_zero_and_the_rest(tmp_path, rows_file):
    from evoenv_cli.integrations.rewards import EnvReward

    rows = [json.loads(x) for x in rows_file.read_text().splitlines()[:3]]
    rows[1] = {**rows[1], "instance": "{not json"}
    rows[2] = {**rows[2], "env_id": ["a", "list"]}
    reward = EnvReward(SEEDS)
    try:
        got = reward.score_rows(
            rows + ["not a row"],
            [f"<answer>{r['answer'] if isinstance(r, dict) else ''}</answer>" for r in rows + ["not a row"]],
        )
    finally:
        reward.close()
    assert got == [1.0, 0.0, 0.0, 0.0]
    assert reward.stats["bad_row"] == 3


RECIPES = {
    "workers: two": ("runtime:\n  workers: two\n", "runtime.workers: expected an integer"),
    "levels: a": ('validate:\n  levels: "a"\n', "validate.levels: expected a list"),
    "seeds_per_level: 0": ("validate:\n  seeds_per_level: 0\n", "validate.seeds_per_level: must be at least 1"),
    "memory_mb: -5": ("runtime:\n  limits:\n    memory_mb: -5\n", "runtime.limits.memory_mb: must be at least 64"),
    "limits: 5": ("runtime:\n  limits: 5\n", "runtime.limits: expected a mapping"),
    "on_no_answers: admitt": (
        "calibrate:\n  on_no_answers: admitt\n",
        "calibrate.on_no_answers: must be one of reject, admit (did you mean 'admit'?)",
    ),
    "band of one": ("calibrate:\n  band: [0.5]\n", "calibrate.band: must hold exactly 2"),
}


@pytest.mark.parametrize("case", list(RECIPES))
def test_recipe_values_are_checked_at_load_time(evoenv, tmp_path, case):
    text, needle = RECIPES[case]
    recipe = tmp_path / "bad.yaml"
    recipe.write_text(text)
    r = evoenv("validate", SEEDS, "--out", "out", "--config", recipe)
    assert_one_line_error(r, f"{recipe}: {needle}")
    assert not (tmp_path / "out").exists()


def test_iterate_checks_the_recipe_before_synthesize_runs(evoenv, tmp_path):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("validate:\n  seeds_per_level: 0\n")
    r = evoenv("iterate", "--recipe", recipe, "--model", tmp_path / "m", "--run", "run", "--seeds", SEEDS)
    assert_one_line_error(r, "validate.seeds_per_level")
    assert not (tmp_path / "run").exists()


def test_outputs_of_the_wrong_kind_are_refused_before_any_work(evoenv, tmp_path, rows_file):
    (tmp_path / "a_folder.jsonl").mkdir()
    r = evoenv("sample", SEEDS, "--out", "a_folder.jsonl", "--per-env", "1")
    assert_one_line_error(r, "a_folder.jsonl: is a folder")
    (tmp_path / "a_file").write_text("x")
    rows = rows_file
    r = evoenv("train", rows, "--library", SEEDS, "--model", tmp_path / "no-model", "--out", "a_file")
    assert_one_line_error(r, "a_file: is a file")


def test_a_killed_write_leaves_no_temp_file_after_a_rerun(evoenv, tmp_path):
    """A writer killed in the middle of the atomic write leaves its temp file; the next write
    of the same output (here `evoenv sample`) replaces it rather than adding another."""
    out = tmp_path / "rows.jsonl"
    script = (
        "import sys, time\n"
        "from evoenv_cli.artifacts import write_jsonl_atomic\n"
        "def rows():\n"
        "    for i in range(1000):\n"
        "        yield {'i': i, 'pad': 'x' * 1000}\n"
        "    print('written', flush=True)\n"
        "    time.sleep(60)\n"
        "    yield {'i': -1}\n"
        f"write_jsonl_atomic({str(out)!r}, rows())\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "written"
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.wait(timeout=10)
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert leftovers, "the killed writer left no temp file: the test did not kill it mid-write"
    assert not out.exists()
    r = evoenv("sample", SEEDS, "--out", out, "--per-env", "1")
    assert r.returncode == 0, r.stderr
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    assert len(out.read_text().splitlines()) == len(list(SEEDS.glob("*.py")))


def test_a_write_that_fails_leaves_the_old_file_and_no_temp_file(tmp_path):
    from evoenv_cli import artifacts

    out = tmp_path / "x.json"
    artifacts.write_json_atomic(out, {"old": True})
    for write in (
        lambda: artifacts.write_json_atomic(out, {"bad": float("nan")}),  # allow_nan=False
        lambda: artifacts.write_jsonl_atomic(out, ({"i": i} if i < 3 else 1 / 0 for i in range(5))),
    ):
        with pytest.raises((ValueError, ZeroDivisionError)):
            write()
        assert json.loads(out.read_text()) == {"old": True}
        assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_every_file_evoenv_replaces_goes_through_the_one_atomic_writer():
    """artifacts.atomic_file is the one writer that replaces a file (temp file, fsync, rename);
    a hand-rolled copy elsewhere is how one lost its fsync before."""
    import re

    root = Path(__file__).resolve().parents[1] / "evoenv_cli"
    found = [
        f"{p.relative_to(root)}:{n + 1}"
        for p in sorted(root.rglob("*.py"))
        if p.name != "artifacts.py"
        for n, line in enumerate(p.read_text().splitlines())
        if re.search(r"\bos\.replace\(|\btmp\.replace\(|\.tmp\b[\"']", line)
    ]
    assert found == []


# -- which jail: a weaker one is a choice, not a surprise ---------------------------------------------
def test_a_fallback_from_auto_is_said_and_recorded(evoenv, tmp_path):
    """Without bubblewrap on PATH, `auto` falls back to the process sandbox: stderr says so
    loudly, the manifest records the fallback and its reason, every verdict the jail."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("setpriv", "git"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    exe = shutil.which("evoenv", path=str(Path(sys.executable).parent))
    lib = make_lib(tmp_path / "lib", {"good.py": GOOD})
    t0 = time.monotonic()
    r = subprocess.run(
        [exe, "validate", str(lib), "--out", str(tmp_path / "out"), "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": str(bin_dir)},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "WARNING" in r.stderr and "WEAKER" in r.stderr and "bubblewrap" in r.stderr, r.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    (plan,) = manifest["sandbox"]
    assert plan["requested"] == "auto" and "not installed" in plan["fallback"], plan
    assert plan["jail"].startswith("process")
    assert verdicts(tmp_path / "out")["good.py"]["sandbox"] == plan["jail"]
    assert time.monotonic() - t0 < 300
