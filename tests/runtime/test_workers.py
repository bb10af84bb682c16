"""The sandbox pool as a scheduler: batching and result order over many calls and several
environments, respawn after a worker dies in the middle of a batch, determinism of generate
across pools with different hash seeds, load errors, no worker left behind, and the parent's
value checks (`check_value`)."""

from __future__ import annotations

import math
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from evoenv_cli.runtime import sandbox
from evoenv_cli.runtime.workers import (
    MAX_VALUE_DEPTH,
    BadValue,
    Call,
    EnvFile,
    EnvLoadError,
    Limits,
    SandboxWorkers,
    check_value,
    decode_reply,
)

HERE = Path(__file__).resolve().parent
SEEDS = sorted(p for p in (HERE.parents[1] / "seeds").glob("*.py") if not p.name.startswith("_"))
GOOD = EnvFile.from_path(HERE / "attacks" / "good_env.py")

LIMITS = Limits(
    generate_s=1,
    prompt_s=1,
    solve_s=1,
    score_s=1,
    grace_s=0.5,
    import_s=3,
    memory_mb=512,
    batch_size=16,
)


def _available(mode: str) -> bool:
    try:
        sandbox.resolve(mode)
    except sandbox.SandboxUnavailable:
        return False
    return True


MODES = [
    pytest.param(m, id=m, marks=pytest.mark.skipif(not _available(m), reason=f"{m} sandbox unavailable"))
    for m in ("bwrap", "process")
]

ECHO = '''"""Echo environment {tag}: every call's value names its arguments, so order can be checked."""

NAME = "echo_{tag}"


def generate(seed: int, difficulty: int) -> dict:
    return {{"tag": "{tag}", "seed": seed, "d": difficulty}}


def prompt(instance: dict) -> str:
    return "{tag}:" + str(instance["seed"])


def solve(instance: dict) -> str:
    return str(instance["seed"])


def score(instance: dict, answer: str) -> float:
    return (int(answer) % 1000) / 1000 + {bonus}
'''

MORTAL = '''"""Dies on "die" (os._exit), hangs on "hang"; otherwise echoes its answer as a score."""

import os

NAME = "mortal"


def generate(seed: int, difficulty: int) -> dict:
    return {"seed": seed}


def prompt(instance: dict) -> str:
    return "p"


def solve(instance: dict) -> str:
    return "0"


def score(instance: dict, answer: str) -> float:
    if answer == "die":
        os._exit(3)
    if answer == "hang":
        while True:
            pass
    return int(answer) / 1000
'''

HASHY = '''"""Breaks the determinism rule on purpose: the instance depends on hash() of a str."""

NAME = "hashy"


def generate(seed: int, difficulty: int) -> dict:
    return {"h": hash("evoenv" + str(seed)) % 1_000_003}


def prompt(instance: dict) -> str:
    return "p"


def solve(instance: dict) -> str:
    return "0"


def score(instance: dict, answer: str) -> float:
    return 0.0
'''

BUSY = '''"""Every score burns about 0.3 s of CPU: well inside its time limit."""

import time

NAME = "busy"


def generate(seed: int, difficulty: int) -> dict:
    return {"seed": seed}


def prompt(instance: dict) -> str:
    return "p"


def solve(instance: dict) -> str:
    return "0"


def score(instance: dict, answer: str) -> float:
    start = time.process_time()
    while time.process_time() - start < 0.3:
        pass
    return 0.5
'''

SYNTAX_ERROR = """NAME = "broken"

def generate(seed, difficulty):
    return {"n": seed
"""

IMPORT_RAISES = """NAME = "raises"
1 / 0
"""

MISSING_SCORE = """NAME = "no_score"

def generate(seed, difficulty):
    return {"n": seed}
"""


@pytest.fixture(scope="module")
def envs(tmp_path_factory) -> dict[str, EnvFile]:
    d = tmp_path_factory.mktemp("pool_envs")
    sources = {
        "echo_a": ECHO.format(tag="a", bonus="0.0"),
        "echo_b": ECHO.format(tag="b", bonus="0.0001"),
        "mortal": MORTAL,
        "hashy": HASHY,
        "busy": BUSY,
        "syntax_error": SYNTAX_ERROR,
        "import_raises": IMPORT_RAISES,
        "missing_score": MISSING_SCORE,
    }
    out = {}
    for name, text in sources.items():
        path = d / f"{name}.py"
        path.write_text(text)
        out[name] = EnvFile.from_path(path)
    out["good"] = GOOD
    return out


@pytest.fixture(params=MODES)
def mode(request) -> str:
    return request.param


# -- batching and order ------------------------------------------------------------------------
def _echo_calls(n: int, offset: int) -> tuple[list[Call], list]:
    calls, expected = [], []
    for i in range(n):
        seed = offset + i
        inst = {"tag": "?", "seed": seed, "d": 1 + i % 10}
        kind = i % 4
        if kind == 0:
            calls.append(Call.generate(seed, 1 + i % 10))
            expected.append(("generate", seed, 1 + i % 10))
        elif kind == 1:
            calls.append(Call.prompt(inst))
            expected.append(("prompt", seed))
        elif kind == 2:
            calls.append(Call.solve(inst))
            expected.append(("solve", seed))
        else:
            calls.append(Call.score(inst, str(seed)))
            expected.append(("score", seed))
    return calls, expected


def _check_echo(tag: str, bonus: float, results, expected) -> None:
    assert len(results) == len(expected)
    for i, (r, exp) in enumerate(zip(results, expected)):
        assert r.status == "ok", (tag, i, r)
        if exp[0] == "generate":
            assert r.value == {"tag": tag, "seed": exp[1], "d": exp[2]}, (tag, i, r)
        elif exp[0] == "prompt":
            assert r.value == f"{tag}:{exp[1]}", (tag, i, r)
        elif exp[0] == "solve":
            assert r.value == str(exp[1]), (tag, i, r)
        else:
            assert r.value == pytest.approx((exp[1] % 1000) / 1000 + bonus), (tag, i, r)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_run_many_keeps_order_across_batches_and_environments(mode, envs, workers):
    jobs, expectations = [], []
    for k, (name, bonus) in enumerate([("echo_a", 0.0), ("echo_b", 0.0001), ("echo_a", 0.0)]):
        calls, expected = _echo_calls(150, offset=1000 * k)  # ten batches of 16 per job
        jobs.append((envs[name], calls))
        expectations.append((name[-1], bonus, expected))
    inst = {"a": 4, "b": 5}
    jobs.append((envs["good"], [Call.score(inst, "9"), Call.solve(inst), Call.score(inst, "8")]))
    jobs.append((envs["echo_b"], []))
    with SandboxWorkers(limits=LIMITS, sandbox_mode=mode, workers=workers) as pool:
        t0 = time.monotonic()
        results = pool.run_many(jobs)
        elapsed = time.monotonic() - t0
        assert len(results) == len(jobs)
        for (tag, bonus, expected), got in zip(expectations, results):
            _check_echo(tag, bonus, got, expected)
        assert [(r.status, r.value) for r in results[3]] == [("ok", 1.0), ("ok", "9"), ("ok", 0.0)]
        assert results[4] == []
        assert pool.spawned >= 3, "three environments need at least three workers"
        assert elapsed < 20, f"{elapsed:.1f}s for 453 trivial calls"


def test_run_keeps_order_within_one_big_batch(mode, envs):
    limits = replace(LIMITS, batch_size=1000)
    calls = [Call.score({"seed": 0}, str(i)) for i in range(999)]
    with SandboxWorkers(limits=limits, sandbox_mode=mode, workers=2) as pool:
        results = pool.run(envs["mortal"], calls)
        assert pool.spawned == 1
    assert [r.value for r in results] == [i / 1000 for i in range(999)]


def test_environments_judged_side_by_side_keep_their_workers(mode, envs):
    """Two environments, each asked from its own thread as validate judges two at a time: one
    batch of two chunks, a pause (the parent's own work between two checks), again. On two
    workers each keeps one: an environment with a worker out waits for it rather than kill the
    other's idle worker, which the other needs back a moment later (before, the pool spawned
    a worker for nearly every batch)."""
    import threading

    def judge(name: str, pool: SandboxWorkers, out: list) -> None:
        for k in range(12):
            calls, expected = _echo_calls(32, offset=100 * k)  # two chunks of 16
            got = pool.run(envs[name], calls)
            out.append((got, expected))
            time.sleep(0.02)

    with SandboxWorkers(limits=LIMITS, sandbox_mode=mode, workers=2) as pool:
        done: dict[str, list] = {"echo_a": [], "echo_b": []}
        threads = [threading.Thread(target=judge, args=(name, pool, done[name])) for name in done]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for name, bonus in (("echo_a", 0.0), ("echo_b", 0.0001)):
            assert len(done[name]) == 12
            for got, expected in done[name]:
                _check_echo(name[-1], bonus, got, expected)
        assert pool.spawned <= 4, f"{pool.spawned} workers spawned for two environments on two workers"


# -- respawn ----------------------------------------------------------------------------------
def _mortal_batch(n: int, deaths: dict[int, str]) -> list[Call]:
    return [Call.score({"seed": i}, deaths.get(i, str(i))) for i in range(n)]


def test_calls_after_a_killed_one_are_answered(mode, envs):
    deaths = {5: "die", 12: "hang"}
    limits = replace(LIMITS, batch_size=64)
    with SandboxWorkers(limits=limits, sandbox_mode=mode, workers=2) as pool:
        results = pool.run(envs["mortal"], _mortal_batch(20, deaths))
        assert pool.spawned == 3, "one worker at the start, one respawn per death"
        assert results[5].status == "crash" and "exited with code 3" in results[5].error, results[5]
        assert results[12].status == "timeout", results[12]
        for i, r in enumerate(results):
            if i not in deaths:
                assert (r.status, r.value) == ("ok", i / 1000), (i, r)
        assert pool.run(envs["good"], [Call.score({"a": 1, "b": 1}, "2")])[0].value == 1.0


def test_kills_spread_over_a_batch_do_not_skip_later_calls(mode, envs):
    """Three deaths, each after successful calls, are not 'consecutive kills': the calls after
    the third one must still run. (The pool counts kills per batch without resetting the count
    when a respawned worker answered calls before dying again.)"""
    deaths = {3: "die", 8: "die", 13: "die"}
    with SandboxWorkers(limits=replace(LIMITS, batch_size=64), sandbox_mode=mode, workers=2) as pool:
        results = pool.run(envs["mortal"], _mortal_batch(20, deaths))
    assert [i for i, r in enumerate(results) if r.status == "crash"] == [3, 8, 13], results
    skipped = [i for i, r in enumerate(results) if r.status == "skipped"]
    assert skipped == [], f"calls {skipped} were skipped after non-consecutive kills"
    assert all(r.value == i / 1000 for i, r in enumerate(results) if i not in deaths)


def test_consecutive_kills_skip_the_rest_of_the_batch(mode, envs):
    deaths = {3: "die", 4: "die", 5: "die"}
    with SandboxWorkers(limits=replace(LIMITS, batch_size=64), sandbox_mode=mode, workers=2) as pool:
        results = pool.run(envs["mortal"], _mortal_batch(10, deaths))
        assert [r.status for r in results] == ["ok"] * 3 + ["crash"] * 3 + ["skipped"] * 4, results
        assert all("skipped after 3" in r.error for r in results[6:])
        # the next batch on the same environment starts afresh
        later = pool.run(envs["mortal"], _mortal_batch(3, {}))
        assert [(r.status, r.value) for r in later] == [("ok", 0.0), ("ok", 0.001), ("ok", 0.002)]


def test_worker_cpu_budget_does_not_fail_calls_within_their_limits(mode, envs):
    """RLIMIT_CPU (worker_cpu_s) caps a worker's CPU over its whole life, not per call: a
    persistent worker that has answered enough well-behaved calls is killed in the middle of
    the next one, which is then reported as a crash of an environment that did nothing wrong
    (with the default 600 s, a long run hits this again and again). Here: a 1 s budget, calls
    of 0.3 s CPU each, all within their 1.5 s deadline."""
    limits = replace(LIMITS, worker_cpu_s=1)
    with SandboxWorkers(limits=limits, sandbox_mode=mode, workers=1) as pool:
        results = pool.run(envs["busy"], [Call.score({"seed": i}, "x") for i in range(6)])
    assert [r.status for r in results] == ["ok"] * 6, results


# -- determinism ------------------------------------------------------------------------------
def _generate_all(pool: SandboxWorkers, env_files: list[EnvFile], seeds=range(25)) -> list[list]:
    jobs = [(e, [Call.generate(s, 1 + s % 10) for s in seeds]) for e in env_files]
    out = pool.run_many(jobs)
    for e, results in zip(env_files, out):
        assert all(r.ok for r in results), (e.name, [r for r in results if not r.ok][:3])
    return [[r.value for r in results] for results in out]


def test_generate_is_deterministic_across_hash_seeds(mode, envs):
    seeds = [EnvFile.from_path(p) for p in SEEDS]
    assert seeds, "no seed environments found"
    with SandboxWorkers(limits=LIMITS, sandbox_mode=mode, workers=2, hash_seed=0) as pool0:
        first = _generate_all(pool0, seeds + [envs["hashy"]])
    with SandboxWorkers(limits=LIMITS, sandbox_mode=mode, workers=2, hash_seed=1) as pool1:
        second = _generate_all(pool1, seeds + [envs["hashy"]])
    with SandboxWorkers(limits=LIMITS, sandbox_mode=mode, workers=1, hash_seed=0) as pool0b:
        third = _generate_all(pool0b, [envs["hashy"]])
    for env_file, a, b in zip(seeds, first, second):
        assert a == b, f"{env_file.name}: generate differs between hash seeds 0 and 1"
    # the hash seed does reach the worker: an environment that hashes strings sees it
    assert first[-1] != second[-1], "hash_seed did not change str hashing in the worker"
    assert first[-1] == third[0], "the same hash_seed gave different str hashes"


# -- load errors ------------------------------------------------------------------------------
@pytest.mark.parametrize("name,needle", [("syntax_error", "SyntaxError"), ("import_raises", "ZeroDivisionError")])
def test_load_error_is_reported_for_every_call(mode, envs, name, needle):
    broken = envs[name]
    calls = [Call.generate(1, 1), Call.prompt({}), Call.solve({}), Call.score({}, "x")] * 10
    with SandboxWorkers(limits=LIMITS, sandbox_mode=mode, workers=2) as pool:
        results = pool.run_many([(broken, calls), (envs["good"], [Call.score({"a": 1, "b": 2}, "3")])])
        assert len(results[0]) == len(calls)
        for r in results[0]:
            assert r.status == "crash", r
            assert r.error.startswith("load:") and needle in r.error, r
        assert results[1][0].value == 1.0
        err = pool.load_error(broken)
        assert err and needle in err
        with pytest.raises(EnvLoadError, match=needle):
            pool.describe(broken)
        spawned = pool.spawned
        again = pool.run(broken, [Call.generate(2, 2)])
        assert again[0].status == "crash" and again[0].error.startswith("load:")
        assert pool.spawned == spawned, "a known load error was retried"
        assert pool.load_error(envs["good"]) is None


def test_missing_function_is_an_error_not_a_load_error(mode, envs):
    with SandboxWorkers(limits=LIMITS, sandbox_mode=mode, workers=1) as pool:
        assert pool.describe(envs["missing_score"])["callables"] == ["generate"]
        results = pool.run(envs["missing_score"], [Call.score({}, "x"), Call.generate(3, 1)])
    assert results[0].status == "error" and "AttributeError" in results[0].error, results[0]
    assert (results[1].status, results[1].value) == ("ok", {"n": 3})


def test_workers_outlive_the_threads_that_started_them(mode, envs):
    """run_many spreads chunks over threads that end when it returns; the workers those threads
    started must stay usable for the next call. A parent-death signal (bwrap --die-with-parent,
    or PR_SET_PDEATHSIG in the worker) fires when the *thread* that forked the worker exits, so
    each worker started inside run_many is SIGKILLed as run_many returns, and the next call on
    it reports a crash that no environment caused."""
    with SandboxWorkers(limits=LIMITS, sandbox_mode=mode, workers=2) as pool:
        first = pool.run_many([(envs["echo_a"], _echo_calls(40, 0)[0]), (envs["echo_b"], _echo_calls(40, 0)[0])])
        assert all(r.ok for results in first for r in results)
        time.sleep(0.3)
        idle = [w for ws in pool._slots.idle.values() for w in ws]
        assert idle, "run_many left no idle worker"
        dead = [(w.proc.pid, w.proc.returncode) for w in idle if not w.alive]
        assert dead == [], f"idle workers died once run_many's threads ended: {dead}"
        later = [pool.run(envs[name], [Call.solve({"seed": 5})])[0] for name in ("echo_a", "echo_b")]
        assert [(r.status, r.value) for r in later] == [("ok", "5"), ("ok", "5")], later


# -- no worker left behind --------------------------------------------------------------------
def _processes_mentioning(text: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in cmdline:
            found.append(int(pid))
    return found


def test_no_worker_outlives_the_pool(mode, envs):
    pool = SandboxWorkers(limits=LIMITS, sandbox_mode=mode, workers=2)
    root = str(pool._root)
    try:
        # from this thread, so that the workers' lifetime is not tied to a finished thread
        pool.run(envs["mortal"], _mortal_batch(6, {2: "die", 4: "hang"}))
        pool.run(envs["echo_a"], _echo_calls(20, 0)[0])
        pool.run(envs["good"], [Call.generate(1, 1)])
        assert 1 <= len(_processes_mentioning(root)) <= 2 * 2, "expected live workers (bwrap: 2 processes each)"
    finally:
        pool.close()
    deadline = time.monotonic() + 5
    while _processes_mentioning(root) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_mentioning(root) == [], "worker processes outlived the pool"
    assert not Path(root).exists()


# -- check_value ------------------------------------------------------------------------------
SMALL = Limits(max_instance_bytes=100, max_prompt_chars=10, max_answer_chars=20)


def ok(value, tag, **extra) -> dict:
    return {"ok": True, "value": value, "type": tag, "t": 0.25, "out": 3, **extra}


@pytest.mark.parametrize(
    "value,tag,expected",
    [
        (0.5, "float", 0.5),
        (0.0, "float", 0.0),
        (1.0, "float", 1.0),
        (-0.0, "float", 0.0),
        (1, "int", 1.0),
        (0, "int", 0.0),
    ],
)
def test_check_value_accepts_scores_in_range(value, tag, expected):
    r = check_value("score", ok(value, tag), SMALL)
    assert (r.status, r.value, r.error) == ("ok", expected, None)
    assert type(r.value) is float
    assert (r.seconds, r.output_chars) == (0.25, 3)


@pytest.mark.parametrize(
    "value,tag",
    [
        (1.5, "float"),
        (-0.5, "float"),
        (2, "int"),
        (-1, "int"),
        (float("nan"), "float"),
        (float("inf"), "float"),
        (float("-inf"), "float"),
        ("nan", "float"),
        ("inf", "float"),
        ("1.0", "float"),
        ("1.0", "str"),
        (True, "int"),
        (False, "float"),
        (True, "bool"),
        (None, "float"),
        ([1.0], "float"),
        ({"v": 1.0}, "float"),
        (1.0, None),
        (1.0, "dict"),
        (1.0, "str"),
        (0.5, "complex"),
    ],
)
def test_check_value_rejects_bad_scores(value, tag):
    r = check_value("score", ok(value, tag), SMALL)
    assert r.status == "invalid", r
    assert r.value is None and r.error


@pytest.mark.parametrize(
    "value,tag", [(10**400, "int"), (-(10**400), "int"), (10**20, "int")], ids=["10**400", "-10**400", "10**20"]
)
def test_check_value_rejects_huge_int_scores_without_raising(value, tag):
    """A JSON reply may carry an int of hundreds of digits; math.isfinite(10**400) raises
    OverflowError, which must become 'invalid', not an exception in the parent."""
    r = check_value("score", ok(value, tag), SMALL)
    assert r.status == "invalid", r


def test_check_value_survives_a_huge_int_for_seconds():
    r = check_value("score", ok(0.5, "float", t=10**400), SMALL)
    assert r.status == "ok" and r.value == 0.5
    assert math.isfinite(r.seconds)


@pytest.mark.parametrize("fn", ["generate", "generate_from"])
def test_check_value_instances(fn):
    assert check_value(fn, ok({"a": 1, "b": [1, 2]}, "dict"), SMALL).value == {"a": 1, "b": [1, 2]}
    assert check_value(fn, ok({}, "dict"), SMALL).status == "ok"
    for value, tag in [([1], "dict"), ("{}", "dict"), (None, "dict"), ({"a": 1}, "str"), ({"a": 1}, None)]:
        assert check_value(fn, ok(value, tag), SMALL).status == "invalid", (value, tag)
    big = {"x": "y" * 200}
    r = check_value(fn, ok(big, "dict"), SMALL)
    assert r.status == "invalid" and "over 100" in r.error


def test_check_value_strings():
    assert check_value("prompt", ok("0123456789", "str"), SMALL).value == "0123456789"
    assert check_value("prompt", ok("01234567890", "str"), SMALL).status == "invalid"
    assert check_value("solve", ok("x" * 20, "str"), SMALL).value == "x" * 20
    assert check_value("solve", ok("x" * 21, "str"), SMALL).status == "invalid"
    assert check_value("solve", ok("", "str"), SMALL).value == ""
    for fn in ("prompt", "solve"):
        for value, tag in [(5, "str"), (None, "str"), (["a"], "str"), ("abc", "dict"), ("abc", None)]:
            assert check_value(fn, ok(value, tag), SMALL).status == "invalid", (fn, value, tag)


def test_check_value_error_replies():
    r = check_value("score", {"ok": False, "error": "ZeroDivisionError: division by zero", "t": 0.1}, SMALL)
    assert (r.status, r.value, r.error, r.seconds) == ("error", None, "ZeroDivisionError: division by zero", 0.1)
    assert check_value("score", {"ok": False, "error": "x" * 1000}, SMALL).error == "x" * 300
    assert check_value("score", {"ok": False}, SMALL).error == "malformed error reply"
    assert check_value("score", {"ok": False, "error": {"a": 1}}, SMALL).error == "malformed error reply"
    # ok must be exactly true
    for flag in ("true", 1, None):
        r = check_value("score", {"ok": flag, "value": 1.0, "type": "float"}, SMALL)
        assert r.status == "error" and r.value is None, flag
    # the worker's own value rejections are 'invalid', other ValueErrors are 'error'
    assert (
        check_value("score", {"ok": False, "error": "ValueError: score returned bool, expected float"}, SMALL).status
        == "invalid"
    )
    assert (
        check_value("generate", {"ok": False, "error": "ValueError: instance is 99999 bytes, over 65536"}, SMALL).status
        == "invalid"
    )
    assert (
        check_value("solve", {"ok": False, "error": "ValueError: solve returned 9 characters, over 5"}, SMALL).status
        == "invalid"
    )
    assert (
        check_value("score", {"ok": False, "error": "ValueError: invalid literal for int()"}, SMALL).status == "error"
    )


def test_check_value_sanitises_timing_and_output_fields():
    for t in ("0.5", None, [1], {"t": 1}):
        assert check_value("score", ok(0.5, "float", t=t), SMALL).seconds == 0.0
    for out in ("12", 1.5, True, None):
        assert check_value("score", ok(0.5, "float", out=out), SMALL).output_chars == 0


# -- decode_reply: the one boundary every reply crosses ----------------------------------------
def test_decode_reply_makes_every_string_valid_text():
    got = decode_reply(b'{"k\\ud800": ["\\udfff", {"x": "a\\ud83d\\ude00", "y": "\\uDBFF!"}]}')
    assert got == {"k\ufffd": ["\ufffd", {"x": "a\U0001f600", "y": "\ufffd!"}]}
    assert decode_reply(b'{"a": "\xff\xfe", "b": "\xed\xa0\x80"}') == {"a": "\ufffd\ufffd", "b": "\ufffd" * 3}
    assert decode_reply(b'{"a": "\\\\ud800"}') == {"a": "\\ud800"}  # an escaped backslash, not a surrogate


def test_decode_reply_bounds_nesting_without_recursion():
    assert decode_reply(b"[" * MAX_VALUE_DEPTH + b"]" * MAX_VALUE_DEPTH) is not None
    with pytest.raises(BadValue, match="nested deeper"):
        decode_reply(b"[" * (MAX_VALUE_DEPTH + 1) + b"]" * (MAX_VALUE_DEPTH + 1))
    with pytest.raises(BadValue):
        decode_reply(b'{"ok": true, "value": ' + b'{"a": ' * 900 + b"1" + b"}" * 901)
    wide = b"[" + b",".join([b'"x"'] * 10_000) + b"]"  # many brackets-free items: no walk needed
    assert len(decode_reply(wide)) == 10_000
