import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SEEDS

from evoenv_cli.artifacts import EnvLibrary
from evoenv_cli.config import SampleConfig
from evoenv_cli.conversations import EXAMPLE
from evoenv_cli.runtime.workers import SandboxWorkers
from evoenv_cli.stages import sample

EXE = Path(sys.executable).with_name("evoenv")
FIELDS = {"prompt", "answer", "solution", "env_id", "env_name", "instance", "seed", "difficulty", "data_source"}
FIELDS |= {"answer_tag", "format_weight"}  # the answer rule the prompt was made with


def test_rows_have_trl_fields_and_spread_difficulties():
    lib = EnvLibrary.open(SEEDS)
    with SandboxWorkers() as pool:
        report = sample.run(lib, SampleConfig(per_env=10, seed=3), pool)
    assert not report.skipped
    assert len(report.rows) == 10 * len(lib.files)
    for row in report.rows:
        assert set(row) == FIELDS
        assert row["prompt"][-1]["role"] == "user"
        assert "<answer>" in row["prompt"][-1]["content"]
        assert row["answer"] == row["solution"]
        assert isinstance(json.loads(row["instance"]), dict)
        assert 0 <= row["seed"] < 2**31
    for name, count in report.per_env.items():
        levels = {r["difficulty"] for r in report.rows if r["env_name"] == name}
        assert count == 10 and levels == set(range(1, 11))


def test_a_demonstration_turn_shows_another_instance_answered_in_tags():
    lib = EnvLibrary.open(SEEDS)
    with SandboxWorkers() as pool:
        plain = sample.run(lib, SampleConfig(per_env=6, seed=3), pool).rows
        shown = sample.run(lib, SampleConfig(per_env=6, seed=3, demonstrations=1), pool).rows
    assert [r["seed"] for r in plain] == [r["seed"] for r in shown]  # the same questions
    differ = 0
    for a, b in zip(plain, shown):
        assert a["prompt"][-1] == b["prompt"][-1] and a["answer"] == b["answer"]
        if b["prompt"] == a["prompt"]:  # every candidate wrote the asked answer: asked bare
            differ += 1
            continue
        user, assistant = b["prompt"][-3], b["prompt"][-2]
        assert user["role"] == "user" and assistant["role"] == "assistant"
        assert user["content"] != b["prompt"][-1]["content"]  # never the asked instance
        demo = re.fullmatch(r"<answer>(.*)</answer>", assistant["content"], re.DOTALL).group(1)
        differ += demo.strip() != b["answer"].strip()
    assert differ == len(shown)  # copying the demonstration never scores on the seeds
    assert sum(len(b["prompt"]) > len(a["prompt"]) for a, b in zip(plain, shown)) >= 0.9 * len(shown)


def test_a_prompt_cap_drops_demonstrations_first_then_skips_the_task():
    """Over `max_prompt_chars` a conversation loses its demonstration turns, keeping the
    demonstration's answer alone where that fits; a task longer than the cap alone is skipped
    with its reason."""
    lib = EnvLibrary.open(SEEDS)
    with SandboxWorkers() as pool:
        shown = sample.run(lib, SampleConfig(per_env=4, seed=3, demonstrations=1), pool).rows
        tasks = sorted(len(r["prompt"][-1]["content"]) for r in shown)
        cap = tasks[len(tasks) // 2] + 60  # half the tasks fit alone, none with its demonstration
        capped = sample.run(lib, SampleConfig(per_env=4, seed=3, demonstrations=1, max_prompt_chars=cap), pool)
    demonstrated = [r for r in shown if len(r["prompt"]) > 2]  # system, demonstration pair, task
    assert len(demonstrated) >= 0.9 * len(shown)
    assert all(sum(len(m["content"]) for m in r["prompt"]) > cap for r in demonstrated)
    assert capped.rows and all(len(r["prompt"]) == 1 and len(r["prompt"][0]["content"]) <= cap for r in capped.rows)
    assert len(capped.rows) + len(capped.skipped) == len(shown)
    assert all("sample.max_prompt_chars" in s["reason"] for s in capped.skipped)
    by_seed = {(r["env_name"], r["seed"]): r for r in shown}
    examples = 0
    for r in capped.rows:
        text = r["prompt"][0]["content"]
        full = by_seed[(r["env_name"], r["seed"])]["prompt"]
        if EXAMPLE in text:  # the answer of the demonstration it had, tagged, after the instruction
            examples += 1
            assert text == full[-1]["content"] + "\n" + EXAMPLE + full[-2]["content"]
        else:
            assert text == full[-1]["content"]
    assert examples  # some tasks fit with the answer of their demonstration


def test_heldout_seeds_never_meet_training_seeds():
    train = {sample.instance_seed(s, "x", i) for s in range(3) for i in range(2000)}
    held = {sample.instance_seed(s, "x", i, split="heldout") for s in range(3) for i in range(2000)}
    assert not train & held
    assert all(h >= 2**31 for h in held)


def test_same_arguments_give_byte_identical_file(evoenv, tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for out in (a, b):
        r = evoenv("sample", SEEDS, "--out", out, "--per-env", "3", "--seed", "7")
        assert r.returncode == 0, r.stderr
    assert a.read_bytes() == b.read_bytes()
    r = evoenv("sample", SEEDS, "--out", "-", "--per-env", "3", "--seed", "7")
    assert r.stdout.encode() == a.read_bytes()
    c = tmp_path / "c.jsonl"
    evoenv("sample", SEEDS, "--out", c, "--per-env", "3", "--seed", "8")
    assert c.read_bytes() != a.read_bytes()


def test_rows_load_with_datasets(evoenv, tmp_path):
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "d.jsonl"
    assert evoenv("sample", SEEDS, "-o", out, "-n", "2", "-d", "4").returncode == 0
    ds = datasets.load_dataset("json", data_files=str(out), split="train")
    assert len(ds) == 20 and set(ds.column_names) == FIELDS
    assert set(ds["difficulty"]) == {4}
    assert ds[0]["prompt"][0]["role"] == "user"


@pytest.fixture(scope="module")
def two_per_env(tmp_path_factory):
    """`evoenv sample SEEDS -n 2 --format FMT` as JSON lines, by format: each format sampled once
    for the module's tests that compare formats (every sample a jail per environment)."""
    folder, done = tmp_path_factory.mktemp("two-per-env"), {}

    def rows_in(fmt: str):
        if fmt not in done:
            out = folder / f"{fmt}.jsonl"
            r = subprocess.run([str(EXE), "sample", str(SEEDS), "-o", str(out), "-n", "2", "--format", fmt],
                               capture_output=True, text=True, cwd=folder, timeout=300)  # fmt: skip
            assert r.returncode == 0, r.stderr
            done[fmt] = out
        return done[fmt]

    return rows_in


@pytest.mark.parametrize("fmt", ["verl", "openrlhf"])
def test_other_formats_are_views_of_the_same_rows(two_per_env, fmt):
    base, other = two_per_env("trl"), two_per_env(fmt)
    rows = [json.loads(x) for x in base.read_text().splitlines()]
    views = [json.loads(x) for x in other.read_text().splitlines()]
    for row, view in zip(rows, views, strict=True):
        if fmt == "verl":
            assert view["reward_model"]["ground_truth"] == row["answer"]
            assert view["extra_info"]["instance"] == row["instance"]
            assert view["prompt"] == row["prompt"]
        else:  # OpenRLHF keeps only these three columns: the label carries the instance
            assert set(view) == {"input", "label", "datasource"} and view["input"] == row["prompt"]
            label = json.loads(view["label"])
            assert label["answer"] == row["answer"] and label["instance"] == row["instance"]
            assert label["env_id"] == row["env_id"] and label["env_name"] == row["env_name"]


def test_parquet_holds_the_same_rows(evoenv, tmp_path, two_per_env):
    import pyarrow.parquet as pq

    for fmt in ("trl", "verl"):
        r = evoenv("sample", SEEDS, "-o", tmp_path / f"{fmt}.parquet", "-n", "2", "--format", fmt)
        assert r.returncode == 0, r.stderr
        rows = [json.loads(x) for x in two_per_env(fmt).read_text().splitlines()]
        assert pq.read_table(tmp_path / f"{fmt}.parquet").to_pylist() == rows
    assert not list(tmp_path.glob(".*.tmp"))


def test_heldout_split_sets_bit_31_and_says_so(evoenv, tmp_path):
    r = evoenv("sample", SEEDS, "-o", tmp_path / "v.jsonl", "-n", "3", "--format", "verl", "--split", "heldout")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in (tmp_path / "v.jsonl").read_text().splitlines()]
    assert all(x["extra_info"]["split"] == "heldout" and x["extra_info"]["seed"] >= 2**31 for x in rows)
    evoenv("sample", SEEDS, "-o", tmp_path / "t.jsonl", "-n", "3", "--format", "verl")
    train = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert all(x["extra_info"]["split"] == "train" and x["extra_info"]["seed"] < 2**31 for x in train)
    assert {x["extra_info"]["seed"] & 0x7FFFFFFF for x in rows} == {x["extra_info"]["seed"] for x in train}
    r = evoenv("sample", SEEDS, "-o", tmp_path / "x.jsonl", "--split", "test")
    assert r.returncode == 2 and "--split: must be one of train, heldout" in r.stderr


def test_difficulty_from_index_uses_calibrated_levels(tmp_path, evoenv):
    lib = tmp_path / "lib"
    (lib / "envs").mkdir(parents=True)
    for name in ("knapsack_max_value", "edit_distance"):
        (lib / "envs" / f"{name}.py").write_bytes((SEEDS / f"{name}.py").read_bytes())
    envs = EnvLibrary.open(lib).files
    index = [
        {"file": e.path.name, "env_id": e.env_id, "name": e.name, "calibration": {"levels": [3, 6] if i == 0 else [9]}}
        for i, e in enumerate(envs)
    ]
    (lib / "index.jsonl").write_text("".join(json.dumps(r) + "\n" for r in index))
    out = tmp_path / "d.jsonl"
    r = evoenv("sample", lib, "-o", out, "-n", "4", "--difficulty-from", "index")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    by_env = {}
    for row in rows:
        by_env.setdefault(row["env_id"], set()).add(row["difficulty"])
    assert by_env == {envs[0].env_id: {3, 6}, envs[1].env_id: {9}}


def one_line_error(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_bad_input_is_one_line_exit_2_and_leaves_nothing(evoenv, tmp_path):
    out = tmp_path / "o.jsonl"
    one_line_error(evoenv("sample", tmp_path / "missing", "-o", out), "missing", "no such library")
    (tmp_path / "notes.txt").write_text("hello")
    one_line_error(evoenv("sample", tmp_path / "notes.txt", "-o", out), "notes.txt", "not a Python file")
    (tmp_path / "empty").mkdir()
    one_line_error(evoenv("sample", tmp_path / "empty", "-o", out), "empty", "empty library")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "bad_env.py").write_text("def generate(:\n")
    one_line_error(evoenv("sample", broken, "-o", out), "bad_env.py", "not valid Python")
    one_line_error(evoenv("sample", SEEDS, "-o", tmp_path / "nodir" / "o.jsonl"), "does not exist")
    one_line_error(evoenv("sample", SEEDS, "-o", out, "-d", "11"), "--difficulty")
    one_line_error(evoenv("sample", SEEDS, "-o", out, "--format", "csv"), "--format")
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".o.jsonl")]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_unwritable_output_is_refused(evoenv, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    one_line_error(evoenv("sample", SEEDS, "-o", ro / "o.jsonl"), "not writable")


def test_existing_output_is_not_corrupted_by_a_failed_run(evoenv, tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text("precious\n")
    one_line_error(evoenv("sample", tmp_path / "missing", "-o", out))
    assert out.read_text() == "precious\n"


def test_broken_environment_rows_are_skipped_not_fatal(tmp_path, evoenv):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "edit_distance.py").write_bytes((SEEDS / "edit_distance.py").read_bytes())
    (lib / "crashy.py").write_text(
        "NAME = 'crashy'\n"
        "def generate(seed, difficulty):\n    raise RuntimeError('boom')\n"
        "def prompt(i):\n    return 'x'\n"
        "def solve(i):\n    return '1'\n"
        "def score(i, a):\n    return 0.0\n"
    )
    out = tmp_path / "o.jsonl"
    r = evoenv("sample", lib, "-o", out, "-n", "3")
    assert r.returncode == 0, r.stderr
    assert "crashy.py" in r.stderr and "boom" in r.stderr
    assert len(out.read_text().splitlines()) == 3


@pytest.mark.parametrize("fmt", ["trl", "verl", "openrlhf", "parquet"])
def test_rows_stream_in_batches_as_one_batch_wrote_them(tmp_path, monkeypatch, fmt):
    """`sample` draws and writes rows a batch at a time (memory flat in the rows): cut into
    batches of 3 rows and Parquet row groups of 4, the file holds what one batch gave, byte for
    byte in JSONL and row for row in Parquet (one row group, as before, is byte for byte too)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from evoenv_cli import artifacts

    row_format = "trl" if fmt == "parquet" else fmt
    cfg = SampleConfig(per_env=2, seed=5, format=row_format)
    lib = EnvLibrary.open(SEEDS)
    with SandboxWorkers() as pool:
        whole = [sample.to_format(r, row_format, i) for i, r in enumerate(sample.run(lib, cfg, pool).rows)]
        monkeypatch.setattr(sample, "BATCH_ROWS", 3)
        monkeypatch.setattr(artifacts, "PARQUET_GROUP_ROWS", 4)
        report = sample.SampleReport()
        drawn = (sample.to_format(r, row_format, i) for i, r in enumerate(sample.stream(lib, cfg, pool, report)))
        out = tmp_path / ("rows.parquet" if fmt == "parquet" else "rows.jsonl")
        write = artifacts.write_parquet_atomic if fmt == "parquet" else artifacts.write_jsonl_atomic
        assert write(out, drawn) == len(whole) == 2 * len(lib.files)
    assert report.per_env == {name: 2 for name in report.per_env} and len(report.per_env) == len(lib.files)
    if fmt != "parquet":
        assert out.read_bytes() == b"".join((artifacts.dumps(r) + "\n").encode() for r in whole)
        return
    table = pq.read_table(out)
    assert table.to_pylist() == whole and pq.ParquetFile(out).num_row_groups == 5
    before, now = tmp_path / "before.parquet", tmp_path / "now.parquet"
    pq.write_table(pa.Table.from_pylist(whole), before)  # how the whole table was written
    monkeypatch.setattr(artifacts, "PARQUET_GROUP_ROWS", 8192)
    artifacts.write_parquet_atomic(now, iter(whole))
    assert now.read_bytes() == before.read_bytes()


def test_a_parquet_write_that_fails_midway_leaves_no_file(tmp_path, monkeypatch):
    from evoenv_cli import artifacts

    monkeypatch.setattr(artifacts, "PARQUET_GROUP_ROWS", 4)
    out = tmp_path / "rows.parquet"
    with pytest.raises(ZeroDivisionError):
        artifacts.write_parquet_atomic(out, ({"i": i} if i < 9 else 1 / 0 for i in range(12)))
    assert not out.exists() and not list(tmp_path.iterdir())
