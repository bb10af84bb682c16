"""`evoenv validate` against a corpus of known verdicts (tests/validate_corpus/).

good/ holds correct environments that must be admitted; bad/ holds environments with exactly
one defect each, named `<stage>__<defect>.py`, that must be rejected by that stage and no
earlier one; a file whose first-line docstring ends "(probe: NAME)." must be rejected by that
probe, and the verdict must name it. Together with the seeds they form one library, validated once per module by the
real command; the other tests reuse that output (copied, so none of them disturbs another).
"""

import ast
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from evoenv_cli.stages import validate

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "validate_corpus"
SEEDS = ROOT / "seeds"
STAGES = validate.STAGES  # the checks, in the order they run: validate's own list
# The least the corpus must hold per stage (the brief it was written to).
MIN_PER_STAGE = {
    "static": 8,
    "load": 3,
    "run": 9,
    "determinism": 3,
    "diversity": 2,
    "reference": 3,
    "discrimination": 5,
    "constant_answer": 2,
    "leak": 2,
    "budget": 3,
}
TIMEOUT_S = 1200

GOOD = sorted((CORPUS / "good").glob("*.py"))
BAD = sorted((CORPUS / "bad").glob("*.py"))
SEED_FILES = sorted(p for p in SEEDS.glob("*.py") if not p.name.startswith("_"))
RECIPE = CORPUS / "recipe.yaml"
EXPECTED = {p.name: "admitted" for p in GOOD + SEED_FILES} | {p.name: p.name.split("__")[0] for p in BAD}
_PROBE = re.compile(r"\(probe: ([a-z0-9_]+)\)\.\"\"\"$")
PROBES = {p.name: m.group(1) for p in BAD if (m := _PROBE.search(p.read_text(encoding="utf-8").splitlines()[0]))}


def evoenv(*args, cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("evoenv", path=str(Path(sys.executable).parent)) or "evoenv"
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=TIMEOUT_S)


def read_verdicts(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines() if line.strip()]


def summary_json(stdout: str) -> dict:
    try:
        return json.loads(stdout)
    except ValueError:
        return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def validated(tmp_path_factory):
    """One run of `evoenv validate LIB --out OUT --json` over good + bad + seeds."""
    base = tmp_path_factory.mktemp("validate_corpus")
    lib = base / "lib"
    lib.mkdir()
    for path in GOOD + BAD + SEED_FILES:
        assert not (lib / path.name).exists(), f"two corpus files are named {path.name}"
        shutil.copyfile(path, lib / path.name)
    out = base / "out"
    result = evoenv("validate", lib, "--out", out, "--json", "--config", RECIPE, cwd=base)
    verdicts = read_verdicts(out) if (out / "verdicts.jsonl").is_file() else []
    return {"base": base, "lib": lib, "out": out, "result": result, "verdicts": verdicts}


# -- the corpus itself (no CLI) --------------------------------------------------------------------
def test_corpus_is_well_formed():
    assert len(GOOD) >= 3
    counts = Counter(p.name.split("__")[0] for p in BAD)
    assert set(counts) <= set(STAGES), f"unknown stage prefixes: {set(counts) - set(STAGES)}"
    for stage, least in MIN_PER_STAGE.items():
        assert counts[stage] >= least, f"only {counts[stage]} bad files for {stage}"
    for path in BAD:
        assert path.name.count("__") == 1, path.name
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith('"""') and first.endswith('"""') and len(first) > 6, (
            f"{path.name}: the first line must be a one-line docstring naming the defect"
        )
    names = Counter()
    for path in GOOD + SEED_FILES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "NAME" for t in node.targets):
                names[ast.literal_eval(node.value)] += 1
    assert all(n == 1 for n in names.values()), f"duplicate NAMEs among good files and seeds: {names}"


# -- one validate run ----------------------------------------------------------------------------
@pytest.mark.slow
def test_validate_exits_zero_with_a_json_summary(validated):
    result, verdicts = validated["result"], validated["verdicts"]
    assert result.returncode == 0, result.stderr[-3000:]
    summary = summary_json(result.stdout)
    admitted = [v for v in verdicts if v["admitted"]]
    assert summary["entered"] == len(EXPECTED) == len(verdicts)
    assert summary["admitted"] == len(admitted) == sum(1 for s in EXPECTED.values() if s == "admitted")
    assert summary["rejected"] == len(verdicts) - len(admitted)
    by_stage = {s: n for s, n in summary["rejected_by_stage"].items() if n}
    expected_by_stage = Counter(s for s in EXPECTED.values() if s != "admitted")
    assert by_stage == dict(expected_by_stage)


@pytest.mark.slow
def test_one_record_per_file_with_the_contract_fields(validated):
    verdicts = validated["verdicts"]
    files = [v["file"] for v in verdicts]
    assert len(files) == len(set(files)), "a file was judged twice"
    assert set(files) == set(EXPECTED)
    for v in verdicts:
        assert {"file", "env_id", "name", "admitted", "stage", "reason"} <= set(v), v
        assert isinstance(v["admitted"], bool)
        assert isinstance(v["env_id"], str) and v["env_id"]
        assert v["admitted"] == (v["stage"] == "admitted")
        assert v["stage"] in STAGES + ("admitted",)


@pytest.mark.slow
@pytest.mark.parametrize("filename", sorted(EXPECTED))
def test_verdict_stage_matches_the_corpus(validated, filename):
    by_file = {v["file"]: v for v in validated["verdicts"]}
    assert filename in by_file, f"no verdict for {filename}"
    v = by_file[filename]
    expected = EXPECTED[filename]
    assert v["stage"] == expected, f"{filename}: expected stage {expected!r}, got {v['stage']!r}: {v['reason']}"
    reason = v["reason"]
    assert isinstance(reason, str) and reason.strip() and "\n" not in reason, repr(reason)
    if expected == "admitted":
        assert v["admitted"] is True and isinstance(v["name"], str) and v["name"]
    else:
        assert v["admitted"] is False
    if filename in PROBES:
        assert v.get("probe") == PROBES[filename], (
            f"{filename}: expected probe {PROBES[filename]!r}, got {v.get('probe')!r}: {reason}"
        )
        assert PROBES[filename] in reason, reason


def test_every_gameable_verifier_probe_has_a_corpus_file():
    wanted = {
        "empty",
        "flood",
        "random_shape",
        "magic_constant",
        "expression",
        "near_miss_duplicate",
        "near_miss_missing",
        "near_miss_number",
        "score_repeat",
        "score_fresh_worker",
        "score_after_many_calls",
        "generate_repeat",
        "generate_fresh_worker",
        "import_budget",
        "leak_plain",
        "leak_reversed",
        "leak_base64",
        "leak_hex",
        "leak_spelled_out",
        # the scorer fuzzer, the prompt-only leak solvers and training-shaped state (issue 29)
        "fuzz_alternatives",
        "fuzz_range",
        "fuzz_random_shape",
        "fuzz_superset",
        "fuzz_permutation",
        "fuzz_number_format",
        "fuzz_sign",
        "fuzz_neighbour",
        "fuzz_echo",
        "fuzz_formula",
        "fuzz_literal",
        "leak_solver_fullwidth",
        "leak_solver_number_words",
        "leak_solver_thousands",
        "leak_solver_think_block",
        "leak_solver_split_digits",
        "leak_solver_cipher",
        "leak_solver_neighbour",
        "leak_solver_arithmetic",
        "score_grpo_group",
        "score_many_instances",
        "generate_after_many_calls",
        "generate_hash_seed",
        # pay measured against chance (issue 42): a case-only change, a positional prior
        "fuzz_case",
        "constant_option_prior",
    }
    assert wanted <= set(PROBES.values()), wanted - set(PROBES.values())


@pytest.mark.slow
def test_envs_folder_holds_exactly_the_admitted_files_unchanged(validated):
    out, lib = validated["out"], validated["lib"]
    admitted = {v["file"] for v in validated["verdicts"] if v["admitted"]}
    present = {p.name for p in (out / "envs").iterdir()}
    assert present == admitted
    for name in admitted:
        assert (out / "envs" / name).read_bytes() == (lib / name).read_bytes(), name


# -- reruns ----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_rerun_into_used_out_needs_a_flag_and_resume_adds_nothing(validated, tmp_path):
    assert validated["result"].returncode == 0
    out = tmp_path / "out"
    shutil.copytree(validated["out"], out)
    before = (out / "verdicts.jsonl").read_bytes()

    plain = evoenv("validate", validated["lib"], "--out", out, "--config", RECIPE, cwd=tmp_path)
    assert plain.returncode == 2, plain.stderr
    lines = plain.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in plain.stderr, plain.stderr
    assert (out / "verdicts.jsonl").read_bytes() == before

    resumed = evoenv("validate", validated["lib"], "--out", out, "--resume", "--json", "--config", RECIPE, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    verdicts = read_verdicts(out)
    files = [v["file"] for v in verdicts]
    assert len(files) == len(set(files)) == len(EXPECTED)
    assert {v["file"]: v["stage"] for v in verdicts} == {v["file"]: v["stage"] for v in validated["verdicts"]}
    assert summary_json(resumed.stdout)["admitted"] == summary_json(validated["result"].stdout)["admitted"]


@pytest.mark.slow
def test_a_second_clean_run_gives_the_same_verdicts(validated, tmp_path):
    assert validated["result"].returncode == 0
    out = tmp_path / "out"
    shutil.copytree(validated["out"], out)  # --clean must throw these results away first
    again = evoenv("validate", validated["lib"], "--out", out, "--clean", "--json", "--config", RECIPE, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    first = {v["file"]: v["stage"] for v in validated["verdicts"]}
    second = {v["file"]: v["stage"] for v in read_verdicts(out)}
    assert second == first
    assert {p.name for p in (out / "envs").iterdir()} == {f for f, s in first.items() if s == "admitted"}


# -- environments written apart from this repository ---------------------------------------------------
WRITTEN_APART = sorted((ROOT / "tests" / "dedupe_corpus").glob("*/*.py"))
# Written for dedupe's re-skin signals, not as training material: this ledger's answer is, at low
# levels, mostly an opening count, 0, or one sum of two numbers the prompt shows, so the
# prompt-only arithmetic solver finds it far above a 30-instance draw's limits (77% against a
# 47% chance rate on one draw). Measured on 636 instances it is 83% against 58%: an excess of
# 0.248, just under `min_leak_excess` (0.25), so the leak check, which decides with 95%
# confidence and then on 600 more instances, admits it; its verdict used to be the draw's.
LEAKY_BY_DESIGN: dict[str, str] = {}


@pytest.mark.slow
def test_environments_written_apart_are_all_admitted(tmp_path):
    """The false-rejection rate on 28 distinct environments and 12 re-skins written apart from
    this repository (ten set-valued or planted among them, several accepting any order) is 0,
    and those that accept any order are recorded as order_free."""
    lib = tmp_path / "lib"
    lib.mkdir()
    for path in WRITTEN_APART:
        shutil.copyfile(path, lib / path.name)
    out = tmp_path / "out"
    result = evoenv("validate", lib, "--out", out, "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    rejected = {v["file"]: v["stage"] for v in read_verdicts(out) if not v["admitted"]}
    assert rejected == LEAKY_BY_DESIGN, rejected
    index = {r["file"]: r for r in map(json.loads, (out / "index.jsonl").read_text().splitlines())}
    free = {f for f, r in index.items() if r["order_free"]}
    assert {"planted_hamiltonian_path.py", "subset_sum_any_order.py", "planted_independent_set.py"} <= free
    assert not free & {"kth_permutation.py", "hanoi_kth_move.py", "course_prerequisite_order.py"}
