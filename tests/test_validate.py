import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SEEDS

from evoenv_cli.runtime.contract import check_source
from evoenv_cli.stages.validate import near_misses, whole_token_in

GOOD = b'''import random
NAME = "ok_env"
def generate(seed, difficulty):
    return {"n": random.Random(seed).randint(0, 99)}
def prompt(instance):
    return "n?"
def solve(instance):
    return str(instance["n"])
def score(instance, answer):
    return 1.0 if answer.strip() == solve(instance) else 0.0
'''


@pytest.mark.parametrize("edit, needle", [
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
])
def test_static_contract_rejects_with_a_reason(edit, needle):
    assert check_source(GOOD).ok
    report = check_source(edit(GOOD))
    assert not report.ok and needle in report.reason


def test_near_misses_by_shape():
    assert near_misses("7") == ["8", "6"]
    assert near_misses("1 2 3") == ["1 2 4", "3 2 1"]
    assert near_misses("a, b") == ["a, bx", "b, a"]
    assert near_misses("0110") == ["111", "109"]  # looks like an integer
    assert near_misses("0110", "str") == ["0100"]  # a palindrome has no reordered miss
    assert all(m != "abc" for m in near_misses("abc"))


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
    proc = subprocess.Popen([evoenv_exe(), "validate", lib, "--out", out, "--workers", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
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
    r = subprocess.run([evoenv_exe(), "validate", lib, "--out", out, "--resume", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    after = verdicts(out)
    assert sorted(v["file"] for v in after) == sorted(f.name for f in lib.iterdir())
    assert all(v["admitted"] for v in after)
    assert after[: len(before)] == before
    assert sorted(p.name for p in (out / "envs").iterdir()) == sorted(f.name for f in lib.iterdir())
    assert json.loads(r.stdout)["admitted"] == 10
    index = [json.loads(x) for x in (out / "index.jsonl").read_text().splitlines()]
    assert [i["file"] for i in index] == sorted(f.name for f in lib.iterdir())
