import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SEEDS

from evoenv_cli.checks import probes
from evoenv_cli.checks.probes import whole_token_in
from evoenv_cli.runtime.contract import check_source

GOOD = b"""import random
NAME = "ok_env"
def generate(seed, difficulty):
    return {"n": random.Random(seed).randint(0, 99)}
def prompt(instance):
    return "n?"
def solve(instance):
    return str(instance["n"])
def score(instance, answer):
    return 1.0 if answer.strip() == solve(instance) else 0.0
"""


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda s: s.replace(b"import random", b"import os, random"), "import of 'os'"),
        (lambda s: s.replace(b"import random", b"from subprocess import run\nimport random"), "subprocess"),
        (lambda s: s + b"\nx = eval('1')\n", "'eval'"),
        (lambda s: s + b"\nx = ().__class__.__bases__\n", "__bases__"),
        (lambda s: s + b"\nf = open('x', 'w')\n", "'open'"),
        (lambda s: s.replace(b'NAME = "ok_env"', b"NAME = 'Bad Name'"), "snake_case"),
        (lambda s: s.replace(b"def score(instance, answer)", b"def score(instance)"), "score() takes 1"),
        (lambda s: s.replace(b"def solve", b"def solved"), "solve() is not defined"),
        (lambda s: s + b"\nINPUT_TYPE = 'int'\n", "generate_from"),
        (lambda s: s + b"\nANSWER_TYPE = 'dict'\n", "ANSWER_TYPE"),
        (lambda s: s + b"\ndef broken(:\n", "syntax error"),
    ],
)
def test_static_contract_rejects_with_a_reason(edit, needle):
    assert check_source(GOOD).ok
    report = check_source(edit(GOOD))
    assert not report.ok and needle in report.reason


def test_near_misses_are_certainly_wrong_and_never_a_reordering():
    ctx = probes.Context.of({"n": 5, "edges": [[0, 1], [1, 2]]}, "vertices 0 to 4", "1 2 3")
    assert probes.near_misses("7", ctx) == [("number", "8"), ("number", "6")]
    misses = dict(probes.near_misses("1 2 3", ctx, "list[int]"))
    # 0..5 are in the instance or its prompt: 6 is the smallest value certainly outside it
    assert misses == {"changed": "1 6 3", "duplicate": "1 2 3 1", "extra": "1 2 3 6", "missing": "1 2"}
    assert all(sorted(m.split()) != ["1", "2", "3"] for m in misses.values())
    assert dict(probes.near_misses("a, b", ctx)) == {
        "changed": "a, Z",
        "duplicate": "a, b, a",
        "extra": "a, b, Z",
        "missing": "a",
    }
    # a bit string declared str is a string: 0111 could be a valid assignment too
    bits = dict(probes.near_misses("0110", ctx, "str"))
    assert set(bits) == {"changed", "extra", "missing"} and "number" not in bits
    assert all(set(m) - set("01") for k, m in bits.items() if k != "missing")
    assert probes.reordered("1 2 3") == "3 2 1" and probes.reordered("4 4") is None
    assert probes.reordered("7") is None


def test_random_probes_follow_the_apparent_shape_whatever_the_declared_type():
    rng = random.Random(0)
    ctx = probes.Context.of({"x": 1}, "prompt", "")
    ints = probes.random_shaped("10000", ctx, rng)
    assert len(ints) == 3 and all(re.fullmatch(r"[0-9]+", a) and a != "10000" for a in ints)
    assert abs(int(ints[0]) - 10000) <= 50 and abs(int(ints[1]) - 10000) <= 200
    lists = probes.random_shaped("3 1 2", probes.Context.of({"v": [1, 2, 3]}, "", "3 1 2"), rng)
    assert all(len(a.split()) == 3 and sorted(a.split()) != ["1", "2", "3"] for a in lists)


def test_encodings_and_score_constants():
    enc = probes.encodings("1234")
    assert enc["reversed"] == "4321" and enc["base64"] == "MTIzNA" and enc["hex"] == "4d2"
    assert enc["spelled_out"] == "one two three four"
    assert probes.encoded_in("spelled_out", enc["spelled_out"], "Hint: One-Two-Three-Four.")
    assert probes.encoded_in("hex", "4d2", "ticket 4D2 ok") and not probes.encoded_in("hex", "4d2", "x 4d20")
    src = b"""SECRET = "let-me-in"
def _check(a):
    return a == SECRET or a.startswith("zz")
def score(instance, answer):
    if answer.strip() in ("", "none"):
        return 0.0
    return 1.0 if _check(answer) else 0.0
def prompt(instance):
    return "unreached" == instance
"""
    found = probes.score_constants(src)
    assert set(found.values) == {"let-me-in", "zz", "none"} and found.digest_compare is None


def test_whole_token_match_ignores_digits_inside_numbers():
    assert whole_token_in("7", "numbers: 3, 7, 9")
    assert not whole_token_in("7", "numbers: 17, 70")
    assert whole_token_in("1 2 3", "order 1 2 3 is")
    assert not whole_token_in("", "x")


def evoenv_exe() -> str:
    return str(Path(sys.executable).with_name("evoenv"))


def verdicts(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "verdicts.jsonl").read_text().splitlines() if x.strip()]


def test_refuses_a_used_folder_and_contradictory_flags(tmp_path):
    out = tmp_path / "out"
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "ok_env.py").write_bytes(GOOD)
    r = subprocess.run([evoenv_exe(), "validate", lib, "--out", out, "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["admitted"] == 1
    for extra in ([], ["--resume", "--clean"]):
        r = subprocess.run([evoenv_exe(), "validate", lib, "--out", out, *extra], capture_output=True, text=True)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert len(verdicts(out)) == 1


def test_resume_after_kill_9_loses_and_duplicates_nothing(tmp_path):
    lib, out = tmp_path / "lib", tmp_path / "out"
    lib.mkdir()
    for f in SEEDS.glob("*.py"):
        (lib / f.name).write_bytes(f.read_bytes())
    proc = subprocess.Popen(
        [evoenv_exe(), "validate", lib, "--out", out, "--workers", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        path = out / "verdicts.jsonl"
        if path.exists() and len(path.read_text().splitlines()) >= 3:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = verdicts(out)
    assert 3 <= len(before) < 10
    with (out / "verdicts.jsonl").open("a") as f:  # a line torn by the kill
        f.write('{"file": "sat_pl')
    r = subprocess.run(
        [evoenv_exe(), "validate", lib, "--out", out, "--resume", "--json"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    after = verdicts(out)
    assert sorted(v["file"] for v in after) == sorted(f.name for f in lib.iterdir())
    assert all(v["admitted"] for v in after)
    assert after[: len(before)] == before
    assert sorted(p.name for p in (out / "envs").iterdir()) == sorted(f.name for f in lib.iterdir())
    assert json.loads(r.stdout)["admitted"] == 10
    index = [json.loads(x) for x in (out / "index.jsonl").read_text().splitlines()]
    assert [i["file"] for i in index] == sorted(f.name for f in lib.iterdir())
