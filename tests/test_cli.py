"""The command line as a newcomer meets it: clean pipes, no traps, the conventions of the field.

Every test drives the real `evoenv` command and checks the exact message and exit code."""

import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from importlib import metadata
from pathlib import Path

import pytest
from conftest import ROOT, SEEDS

EXE = Path(sys.executable).with_name("evoenv")
ONE_ENV = "edit_distance.py"


def run(*args, cwd, env=None, umask=None, stdin=None, timeout=600):
    """The real command, in `cwd`, with a clean environment (no HF_HUB_OFFLINE unless given)."""
    base = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    full = {**base, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    preexec = (lambda: os.umask(umask)) if umask is not None else None
    return subprocess.run(
        [str(EXE), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full,
        preexec_fn=preexec,
        input=stdin,
        timeout=timeout,
    )


def error_line(r, code: int = 2) -> str:
    """The one line a failed command writes (stderr holds nothing else)."""
    assert r.returncode == code, (r.returncode, r.stderr[-3000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.fixture
def one_env(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    shutil.copy(SEEDS / ONE_ENV, lib / ONE_ENV)
    return lib


def modes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mode & 0o777 for p in folder.rglob("*") if p.is_file()}


# -- clean stdout and pipes -------------------------------------------------------------------
def test_a_closed_pipe_ends_the_command_quietly(tmp_path):
    cmd = f"set -o pipefail; '{EXE}' sample '{SEEDS}' --out - --per-env 64 | head -1"
    r = subprocess.run(
        ["bash", "-c", cmd],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert json.loads(r.stdout)["env_name"]
    data = tmp_path / "data.jsonl"
    assert run("sample", SEEDS, "--out", data, "--per-env", "2", cwd=tmp_path).returncode == 0
    r = subprocess.run(
        ["bash", "-c", f"set -o pipefail; '{EXE}' preview '{data}' -n 10 | head -1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    r = subprocess.run(
        ["bash", "-c", f"set -o pipefail; '{EXE}' --help | head -1"], capture_output=True, text=True, timeout=60
    )
    assert "Traceback" not in r.stderr and "Error" not in r.stderr, r.stderr


@pytest.mark.slow
def test_train_json_is_the_only_thing_on_stdout_and_says_when_nothing_was_learned(tiny_model, tmp_path):
    """Seeds rows score 0 for a random model: every group has zero variance, so the weights
    must come out unchanged, and the command must say so; TRL's log dicts go to stderr."""
    data = tmp_path / "rows.jsonl"
    assert run("sample", SEEDS, "--out", data, "--per-env", "1", "--difficulty", "1", cwd=tmp_path).returncode == 0
    (tmp_path / "r.yaml").write_text(
        "train:\n  num_generations: 2\n  per_device_train_batch_size: 4\n"
        "  max_completion_length: 8\n  save_steps: 2\n  gradient_checkpointing: true\n"
        "  mask_truncated_completions: false\n"  # the random model's completions are all cut
    )
    args = ["train", data, "--library", SEEDS, "--model", tiny_model, "--config", "r.yaml", "--max-steps", "2"]
    r = run(*args, "--out", "ck", "--json", cwd=tmp_path, umask=0o022)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout[:2000]
    summary = json.loads(lines[0])
    assert summary["steps"] == 2 and summary["all_groups_zero_variance"] is True
    assert "deprecated" not in r.stderr, r.stderr[-3000:]  # gradient_checkpointing's FutureWarnings

    from safetensors.torch import load_file

    before, after = (
        load_file(str(tiny_model / "model.safetensors")),
        load_file(str(tmp_path / "ck" / "model.safetensors")),
    )
    assert all((before[k] == after[k]).all() for k in before), "weights changed with zero-variance groups"
    wrong = {k: oct(m) for k, m in modes(tmp_path / "ck").items() if m != 0o644}
    assert not wrong, wrong  # the model, checkpoints and manifests follow the umask

    r = run(*args, "--out", "ck2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == ""
    assert (
        "the weights did not change: in every GRPO group all completions scored the same (zero "
        "variance), so no completion was better than another to learn from"
    ) in r.stderr.splitlines()

    # resuming under changed settings is refused before anything loads; more steps are fine
    r = run(*args, "--out", "ck", "--resume", "--lr", "0.5", cwd=tmp_path)
    assert error_line(r) == (
        "error: ck: was started with other settings (train.learning_rate: 1e-06 -> 0.5); "
        "resume with the same ones, or pass --clean to start over"
    )
    r = run(*args, "--out", "ck", cwd=tmp_path)
    assert error_line(r) == "error: ck: already holds results; pass --resume to continue or --clean to start over"


# -- a failed start does not block the rerun ----------------------------------------------------
@pytest.mark.slow
def test_a_failed_start_does_not_block_the_rerun(tiny_model, one_env, tmp_path):
    r = run("calibrate", one_env, "--out", "cal", "--backend", "vllm", "--model", tiny_model, cwd=tmp_path)
    # square brackets survive: rich markup is escaped in every message
    assert error_line(r) == "error: the vllm backend needs vLLM: pip install 'evoenv[vllm]' on a GPU machine"
    (tmp_path / "r.yaml").write_text(
        "calibrate:\n  instances: 1\n  samples: 1\n  max_tokens: 4\n  on_no_answers: admit\n"
    )
    r = run(
        "calibrate",
        one_env,
        "--out",
        "cal",
        "--model",
        tiny_model,
        "--backend",
        "hf",
        "-c",
        "r.yaml",
        cwd=tmp_path,
        env={"COLUMNS": "100"},
    )
    assert r.returncode == 0, r.stderr
    # admitted without a measurement is its own row, and said in words
    assert re.search(r"admitted, calibrated\W+0\W", r.stderr), r.stderr
    assert re.search(r"admitted uncalibrated\W+1\W", r.stderr), r.stderr
    assert (
        "1 of 1 admitted uncalibrated: the solver gave no extractable answer, so no difficulty was "
        "measured (calibrate.on_no_answers: admit)"
    ) in r.stderr.splitlines()
    summary = json.loads((tmp_path / "cal" / "summary.json").read_text())
    assert summary["admitted"] == 1 and summary["admitted_uncalibrated"] == 1


def test_an_output_folder_with_no_results_counts_as_empty(one_env, tmp_path):
    left = tmp_path / "v"
    (left / "envs").mkdir(parents=True)
    (left / "verdicts.jsonl").write_text("")  # what a start that failed at once leaves
    r = run("validate", one_env, "--out", left, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["admitted"] == 1
    r = run("validate", one_env, "--out", left, cwd=tmp_path)
    assert error_line(r) == f"error: {left}: already holds results; pass --resume to continue or --clean to start over"


# -- local model paths never go to the hub -----------------------------------------------------
class _Hub(http.server.BaseHTTPRequestHandler):
    requests: list = []

    def _answer(self):
        type(self).requests.append(self.path)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_hub():
    """A local stand-in for huggingface.co that answers 404 and records every request."""
    _Hub.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Hub.requests
    finally:
        server.shutdown()


@pytest.mark.slow
def test_a_local_model_path_is_never_looked_up_online(fake_hub, one_env, tmp_path):
    url, requests = fake_hub
    (tmp_path / "runs").mkdir()
    rows = tmp_path / "rows.jsonl"
    assert run("sample", one_env, "--out", rows, "--per-env", "2", cwd=tmp_path).returncode == 0
    env = {"HF_ENDPOINT": url, "HF_HOME": str(tmp_path / "hf-home")}
    for name in ("runs/nope", "./nope", "~/evoenv-no-such-model", "a/b/c"):
        r = run("review", one_env, "--out", "rev", "--model", name, cwd=tmp_path, env=env)
        assert error_line(r) == f"error: {name}: no such model folder" + (
            " (a/b does not exist either)" if name == "a/b/c" else ""
        ), name
        r = run("train", rows, "--library", one_env, "--model", name, "--out", "ck", cwd=tmp_path, env=env)
        assert error_line(r).startswith(f"error: {name}: no such model folder"), name
    (tmp_path / "runs" / "tiny").mkdir()
    r = run("calibrate", one_env, "--out", "cal", "--model", "runs/tinny", cwd=tmp_path, env=env)
    assert error_line(r) == "error: runs/tinny: no such model folder (did you mean runs/tiny?)"
    assert requests == []
    assert not (tmp_path / "ck").exists()  # train checks before it makes its folder

    offline = {**env, "HF_HUB_OFFLINE": "1"}
    for cmd in (["review", one_env, "--out", "rev"], ["train", rows, "--library", one_env, "--out", "ck"]):
        r = run(*cmd, "--model", "org/nope", cwd=tmp_path, env=offline)
        assert error_line(r) == (
            "error: org/nope: not a local folder, and not in the Hugging Face cache "
            "(HF_HUB_OFFLINE is set, so nothing is downloaded)"
        )
    assert requests == []

    # the control: a hub id is looked up (so the checks above could have seen a request)
    r = run("review", one_env, "--out", "rev", "--model", "org/nope", cwd=tmp_path, env=env)
    assert r.returncode == 2 and "org/nope" in r.stderr.strip().splitlines()[-1], r.stderr
    assert any("org/nope" in p for p in requests), requests


# -- options, messages, version -----------------------------------------------------------------
def test_no_command_gives_one_short_flag_to_two_options(tmp_path):
    import typer

    from evoenv_cli.cli import app

    group = typer.main.get_command(app)
    for name, command in [("evoenv", group), *group.commands.items()]:
        seen: dict[str, str] = {}
        for param in command.params:
            for flag in (*param.opts, *param.secondary_opts):
                if re.fullmatch(r"-[^-]", flag):
                    assert flag not in seen, f"{name}: {flag} is both {seen[flag]} and {param.name}"
                    seen[flag] = param.name
    (tmp_path / "runs").mkdir()
    r = run("calibrate", SEEDS, "--out", "cal", "-m", "runs/nope", cwd=tmp_path)
    assert error_line(r) == "error: runs/nope: no such model folder"


def test_square_brackets_survive_in_messages(tmp_path):
    r = run("sample", "lib[bold]", "--out", "x.jsonl", cwd=tmp_path)
    assert error_line(r) == "error: lib[bold]: no such library (a folder of environment .py files)"


def test_version_and_verbose_version(tmp_path):
    r = run("--version", cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, f"evoenv {metadata.version('evoenv')}\n", "")
    r = run("--version", "--verbose", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0] == f"evoenv {metadata.version('evoenv')}"
    assert lines[1] == f"python {sys.version.split()[0]}"
    for name in ("torch", "transformers", "trl", "vllm"):
        try:
            expected = metadata.version(name)
        except metadata.PackageNotFoundError:
            expected = "not installed"
        assert f"{name} {expected}" in lines, (name, lines)
    bwrap = shutil.which("bwrap")
    if bwrap:
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True).stdout.split()[-1]
        assert f"bubblewrap {version} ({bwrap})" in lines, lines
    else:
        assert "bubblewrap not installed (the sandbox falls back to a weaker one)" in lines


# -- file modes ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_outputs_follow_the_umask(one_env, tmp_path):
    for umask, want in ((0o022, 0o644), (0o077, 0o600)):
        out = tmp_path / f"v{umask:o}"
        r = run("validate", one_env, "--out", out, cwd=tmp_path, umask=umask)
        assert r.returncode == 0, r.stderr
        got = modes(out)
        assert {"index.jsonl", "summary.json", "manifest.json", "verdicts.jsonl", f"envs/{ONE_ENV}"} <= set(got)
        assert set(got.values()) == {want}, {k: oct(v) for k, v in got.items()}
        data = tmp_path / f"data{umask:o}.jsonl"
        assert run("sample", one_env, "--out", data, "--per-env", "2", cwd=tmp_path, umask=umask).returncode == 0
        assert data.stat().st_mode & 0o777 == want
    r = run("tiny-model", tmp_path / "tiny", cwd=tmp_path, umask=0o022)
    assert r.returncode == 0, r.stderr
    assert set(modes(tmp_path / "tiny").values()) == {0o644}, modes(tmp_path / "tiny")


# -- help ------------------------------------------------------------------------------------------
def commands() -> dict:
    import typer

    from evoenv_cli.cli import app

    return typer.main.get_command(app).commands


WIDE = {"COLUMNS": "400", "TERMINAL_WIDTH": "400"}


@pytest.fixture(scope="module")
def top_help(tmp_path_factory):
    """`evoenv --help`, wide: run once for the module's help tests (each a process start)."""
    return run("--help", cwd=tmp_path_factory.mktemp("help"), env=WIDE)


def test_help_lists_the_stages_in_round_order_from_their_records_then_the_other_commands(top_help):
    from evoenv_cli import stages

    r = top_help
    assert r.returncode == 0
    listed = re.findall(r"^│ ([a-z][a-z-]+) {2,}", r.stdout.split("Commands")[1], re.MULTILINE)
    steps = [st.name for st in stages.round_steps() if st.name in listed]
    assert listed[: len(steps)] == steps  # the order is each record's `place`, nothing else
    assert steps == [
        "synthesize",
        "validate",
        "review",
        "compose",
        "dedupe",
        "calibrate",
        "sample",
        "train",
        "evaluate",
    ]
    assert set(listed) == {name for name, c in commands().items() if not c.hidden}


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_command_has_clean_help_with_an_example(name, tmp_path, top_help):
    r = run(name, "--help", cwd=tmp_path, env=WIDE)
    assert r.returncode == 0, r.stderr
    assert "Example:" in r.stdout
    assert "<bool>" not in r.stdout  # a plain on/off flag has no type to show
    out_lines = [line.strip() for line in r.stdout.splitlines()]
    for paragraph in commands()[name].help.split("\n\n"):  # at this width, one line each
        plain = re.sub(r"\[/?[a-z ]*\]", "", paragraph).strip()
        assert plain in out_lines, (name, plain)
    r = top_help
    listed = re.search(rf"^│ {name} ", r.stdout, re.MULTILINE)
    assert "<bool>" not in r.stdout and bool(listed) != commands()[name].hidden  # run-context: the loop's, unlisted


# -- resume refuses changed settings ------------------------------------------------------------
def test_resume_refuses_changed_settings_and_the_manifest_carries_their_hash(one_env, tmp_path):
    r = run("validate", one_env, "--out", "v", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    record = json.loads((tmp_path / "v" / "run-config.json").read_text())
    manifest = json.loads((tmp_path / "v" / "manifest.json").read_text())
    assert re.fullmatch(r"[0-9a-f]{16}", record["config_hash"]) and manifest["config_hash"] == record["config_hash"]
    (tmp_path / "r.yaml").write_text("validate:\n  seeds_per_level: 2\n")
    r = run("validate", one_env, "--out", "v", "--resume", "-c", "r.yaml", cwd=tmp_path)
    assert error_line(r) == (
        "error: v: was started with other settings (validate.seeds_per_level: 3 -> 2); "
        "resume with the same ones, or pass --clean to start over"
    )
    r = run("validate", one_env, "--out", "v", "--resume", "--workers", "1", cwd=tmp_path)  # not a setting
    assert r.returncode == 0, r.stderr
    r = run("validate", one_env, "--out", "v", "--clean", "-c", "r.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "v" / "run-config.json").read_text())["config_hash"] != record["config_hash"]


def test_iterate_says_when_the_recipe_changed_and_records_both(tmp_path):
    text = (ROOT / "tests" / "recipes" / "tiny.yaml").read_text().replace("build_model: tiny", "build_model: ''")
    (tmp_path / "a.yaml").write_text(text)
    (tmp_path / "b.yaml").write_text(text.replace("learning_rate: 0.0001", "learning_rate: 0.001"))
    (tmp_path / "runs").mkdir()
    args = ["iterate", "--run", "run", "--model", "runs/nope", "--seeds", SEEDS]
    r = run(*args, "--recipe", "a.yaml", cwd=tmp_path)  # a wrong model is bad input, found before any stage
    assert r.returncode == 2 and r.stderr.strip() == "error: runs/nope: no such model folder"
    r = run(*args, "--recipe", "a.yaml", "--offered", "gone", cwd=tmp_path)  # so is a missing offered folder
    assert error_line(r) == "error: gone: no such library (a folder of environment .py files)"
    assert not (tmp_path / "run").exists()
    from evoenv_cli import loop as stage

    said = []
    (tmp_path / "run").mkdir()
    for name in ("a.yaml", "b.yaml"):
        loop = stage.Loop(tmp_path / "run", tmp_path / name, "runs/nope", None, Path(SEEDS), log=said.append)
        stage.record_recipe(loop, 1)
    assert said == [
        f"the settings changed since this run was started (recipe.train.learning_rate: 0.0001 -> "
        f"0.001): finished stages keep their results, the stages still to run use the new ones (both "
        f"are recorded in {tmp_path / 'run' / 'run-config.json'})"
    ]
    history = json.loads((tmp_path / "run" / "run-config.json").read_text())["history"]
    assert [h["settings"]["recipe"]["train"]["learning_rate"] for h in history] == [0.0001, 0.001]
    assert [h["from_round"] for h in history] == [1, 1]


# -- noise -----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_prompt_longer_than_the_context_is_one_evoenv_note(tiny_model, tmp_path):
    (tmp_path / "r.yaml").write_text("synthesize:\n  max_requests: 2\n  batch: 2\n  max_tokens: 8\n")
    r = run(
        "synthesize",
        "--seeds",
        SEEDS,
        "--out",
        "syn",
        "--n",
        "1",
        "--model",
        tiny_model,
        "--backend",
        "hf",
        "-c",
        "r.yaml",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    notes = [line for line in r.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1, r.stderr
    assert re.fullmatch(
        rf"note: {re.escape(str(tiny_model))} reads at most 4096 tokens \(its max_position_embeddings\), and "
        r"\d+ of \d+ prompts are longer than it \(up to \d+ tokens\), so answers to them are unreliable: shorten "
        r"them with synthesize\.examples \(example environments per request\) or synthesize\.max_avoid, or use "
        r"a model with a longer context",
        notes[0],
    ), notes[0]
    assert "Token indices sequence length" not in r.stderr and "friendly reminder" not in r.stderr


# -- the working tree ------------------------------------------------------------------------------
def readme_outputs() -> list[str]:
    """What the shell examples of the README and docs/ write: every --out / -o value and
    tiny-model's folder."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    blocks = [b for p in pages for b in re.findall(r"```bash\n(.*?)```", p.read_text(), re.DOTALL)]
    outs = set()
    for block in blocks:
        for line in block.splitlines():
            outs.update(x for x in re.findall(r"(?:--out|-o) (\S+)", line) if x != "-")
            outs.update(re.findall(r"evoenv tiny-model (\S+)", line))
    return sorted(o for o in outs if not o.startswith(("/", "~")))  # outside the clone: nothing to ignore


def test_gitignore_covers_what_the_readme_examples_write():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    outs = readme_outputs()
    assert {"runs/hand/synth", "data.jsonl", "runs/tiny-model", "runs/r1/validate"} <= set(outs)
    r = subprocess.run(["git", "check-ignore", "--no-index", "-v", *outs], cwd=ROOT, capture_output=True, text=True)
    ignored = {line.split("\t")[-1] for line in r.stdout.splitlines()}
    assert ignored == set(outs), sorted(set(outs) - ignored)
    r = subprocess.run(
        ["git", "check-ignore", "--no-index", "seeds/edit_distance.py", "README.md", "recipes/cpu-demo.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert (r.returncode, r.stdout) == (1, "")  # the clone's own files are not swept up


def test_an_option_that_overrides_the_recipe_is_made_from_its_field(tmp_path):
    """Flag name, help and default come from the field's metadata (RECIPE_FIELDS and the
    override rename maps are gone); every field with help is some command's option."""
    import dataclasses

    import typer

    from evoenv_cli.cli import app
    from evoenv_cli.config import Recipe, flag_of

    group = typer.main.get_command(app)
    seen = set()
    for command in group.commands.values():
        for param in command.params:
            m = re.search(r"Default (.*) \(recipe: (\w+)\.(\w+)\)\.$", param.help or "")
            if m is None:
                continue
            shown, section, name = m.groups()
            f = next(f for f in dataclasses.fields(getattr(Recipe(), section)) if f.name == name)
            value = getattr(getattr(Recipe(), section), name)
            assert param.opts[0] == flag_of(f), (command.name, param.opts)
            assert shown == (",".join(map(str, value)) if isinstance(value, list) else str(value))
            assert param.help.startswith(f.metadata["help"].rstrip(".")), (command.name, name)
            seen.add(f"{section}.{name}")
    documented = {
        f"{section.name}.{f.name}"
        for section in dataclasses.fields(Recipe)
        for f in dataclasses.fields(getattr(Recipe(), section.name))
        if "help" in f.metadata
    }
    assert documented == seen
    r = run("synthesize", "--help", cwd=tmp_path, env={"COLUMNS": "200"})
    assert r.returncode == 0
    assert (
        "Default 32 (recipe: synthesize.n)." in r.stdout and "Default 1.0 (recipe: synthesize.temperature)." in r.stdout
    )
    r = run("evaluate", "--help", cwd=tmp_path, env={"COLUMNS": "200"})
    assert r.returncode == 0 and "Default 4 (recipe: evaluate.samples)." in r.stdout


def test_a_flag_s_bound_is_its_field_s_and_the_error_names_the_flag(tmp_path):
    r = run("evaluate", "--model", "m", "--out", tmp_path / "e", "--bench", "x.jsonl", "--n", "0", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].endswith("--n: must be at least 1 (got 0)")


def test_preview_labels_the_demonstration_turns_roles(tmp_path):
    rows = tmp_path / "rows.jsonl"
    r = run(
        "sample", SEEDS, "-o", rows, "-n", "1", "-d", "1", "--config", ROOT / "recipes" / "cpu-demo.yaml", cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    r = run("preview", rows, "-n", "10", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    shown = [line.strip("│ ") for line in r.stdout.splitlines()]
    labels = [line for line in shown if re.fullmatch(r"(user|assistant)( \(demonstration\))?:", line)]
    # a row is asked with its demonstration, or alone where every candidate would share its answer
    turns = " ".join(labels).replace("user (demonstration): assistant (demonstration): user:", "D").split()
    assert set(turns) == {"D", "user:"} or turns.count("D") == len(turns), r.stdout
    assert turns.count("D") >= len(turns) // 2, r.stdout
