"""Attacks on the sandboxed runtime: each test runs one hostile environment (the files in
tests/runtime/attacks/, otherwise valid, the attack in `score` unless stated) and checks two
things: the attack is contained, and the run goes on: a normal call later in the same batch
on the same environment (after a respawn where the attack killed the worker) and a call on a
good environment in the same pool both still return ok.

Both sandbox modes are tested where the property holds in both. The `process` mode (rlimits +
seccomp in a plain child running as uid 65534 with a clean environment) has no namespaces:
what it leaves open is written in the docstring of each test that runs in `bwrap` only.

Every attack is bounded so that a broken sandbox cannot hurt the machine: loops are capped,
allocations stop at 2 GiB (or are one 10 GiB block), writes at 100 MiB, markers use unique
paths and are removed, host processes used as targets are our own `sleep`s.
"""

from __future__ import annotations

import json
import os
import re
import resource
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from evoenv_cli.envfile import EnvFile
from evoenv_cli.runtime import sandbox
from evoenv_cli.runtime.workers import Call, CallResult, EnvLoadError, Limits, SandboxWorkers

HERE = Path(__file__).resolve().parent
ATTACKS = HERE / "attacks"
PROJECT = HERE.parents[1]

LIMITS = Limits(
    generate_s=1,
    prompt_s=1,
    solve_s=1,
    score_s=1,
    grace_s=0.5,
    import_s=3,
    memory_mb=512,
)
DEADLINE = LIMITS.score_s + LIMITS.grace_s
NORMAL = {"n": 7}  # a normal instance of every attack environment: answer "7" scores 1.0
GOOD = EnvFile.from_path(ATTACKS / "good_env.py")


def _plan(mode: str) -> sandbox.LaunchPlan | None:
    try:
        return sandbox.resolve(mode)
    except sandbox.SandboxUnavailable:
        return None


BWRAP = pytest.param(
    "bwrap",
    id="bwrap",
    marks=pytest.mark.skipif(_plan("bwrap") is None, reason="bubblewrap jail unavailable here"),
)
PROCESS = pytest.param(
    "process",
    id="process",
    marks=pytest.mark.skipif(_plan("process") is None, reason="process sandbox unavailable here"),
)
# The process mode keeps the host's file permissions out of the worker only when it drops to
# an unprivileged uid (the suite runs as root): otherwise the worker is the invoking user.
_PROCESS_DROPS = (_plan("process") or sandbox.LaunchPlan("process", "", "", None, None)).drop_to_uid is not None
# With Landlock the process mode also reads only the interpreter, /usr and its own folder, writes
# nowhere, and cannot reach (ptrace, /proc/<pid>/mem, signal) a process outside its domain.
_PROCESS_LANDLOCK = bool((_plan("process") or sandbox.LaunchPlan("process", "", "", None, None)).landlock_abi)
LANDLOCK = pytest.param(
    "process",
    id="process",
    marks=pytest.mark.skipif(
        not _PROCESS_LANDLOCK, reason="Landlock unavailable: the process mode does not stop this here (see sandbox.py)"
    ),
)


@pytest.fixture(params=[BWRAP, PROCESS])
def mode(request) -> str:
    return request.param


@pytest.fixture
def pool(mode):
    with SandboxWorkers(limits=LIMITS, sandbox_mode=mode, workers=2) as p:
        yield p


def env(name: str) -> EnvFile:
    return EnvFile.from_path(ATTACKS / f"{name}.py")


def assert_ok(result: CallResult, value, what: str) -> None:
    assert result.status == "ok", f"{what}: {result}"
    assert result.value == value, f"{what}: {result}"


def assert_good_env_runs(pool: SandboxWorkers) -> None:
    inst = {"a": 2, "b": 3}
    got = pool.run(GOOD, [Call.generate(5, 2), Call.prompt(inst), Call.solve(inst), Call.score(inst, "5")])
    assert [r.status for r in got] == ["ok"] * 4, got
    assert got[3].value == 1.0


def attack(pool: SandboxWorkers, name: str, answer: str = "attack", instance: dict | None = None) -> CallResult:
    """The attack's result, after checking that the run goes on: a normal call right after it
    in the same batch, and a good environment in the same pool."""
    inst = {**NORMAL, **(instance or {})}
    results = pool.run(env(name), [Call.score(inst, answer), Call.score(NORMAL, "7")])
    assert len(results) == 2, results
    assert_ok(results[1], 1.0, f"normal call after {name}/{answer} in the same batch")
    assert_good_env_runs(pool)
    return results[0]


def assert_refused(result: CallResult, what: str) -> None:
    assert result.status == "error", f"{what} was not refused: {result}"
    assert "refused" in (result.error or ""), f"{what} was not refused: {result}"


def marker_path(directory: str | Path = "/tmp") -> Path:
    return Path(directory) / f"evoenv_pwned_{uuid.uuid4().hex}"


def unprivileged_prefix(mode: str) -> list[str]:
    """Run a host helper as the very uid the workers run as."""
    plan = _plan(mode)
    if plan is None or plan.drop_to_uid is None:
        return []
    uid = plan.drop_to_uid
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all"]


# 1 -------------------------------------------------------------------------------------------
def test_infinite_loop_times_out_and_worker_respawns(pool):
    loop = env("loop_forever")
    before = pool.spawned
    t0 = time.monotonic()
    results = pool.run(loop, [Call.score(NORMAL, "7"), Call.score(NORMAL, "attack"), Call.score(NORMAL, "7")])
    elapsed = time.monotonic() - t0
    assert_ok(results[0], 1.0, "call before the loop")
    assert results[1].status == "timeout", results[1]
    assert "time limit" in results[1].error
    assert DEADLINE - 0.05 <= results[1].seconds <= DEADLINE + 0.5, results[1]
    assert_ok(results[2], 1.0, "call after the loop (respawned worker)")
    assert pool.spawned == before + 2, "the killed worker was not replaced by exactly one new one"
    assert elapsed < DEADLINE + 3.0, f"the batch took {elapsed:.1f}s"
    assert_good_env_runs(pool)


# 2 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer", ["bytearray", "grow"])
def test_huge_allocation_is_refused(mode, answer):
    # what is tested is the memory limit, not the time limit: "grow" zero-fills up to 512 MiB a
    # MiB at a time, which took over the 1.5 s deadline on a loaded 2-core CI machine
    with SandboxWorkers(limits=replace(LIMITS, score_s=10), sandbox_mode=mode, workers=2) as pool:
        result = attack(pool, "memory_hog", answer)
    assert result.status in ("error", "crash"), result
    if answer == "bytearray":
        assert result.status == "crash" or "MemoryError" in result.error, result
    else:
        got = re.search(r"refused after (\d+) MiB", result.error or "")
        assert got, result
        assert int(got.group(1)) <= LIMITS.memory_mb, f"the worker got {got.group(1)} MiB"


# 3 -------------------------------------------------------------------------------------------
def test_fork_bomb_is_refused(pool):
    result = attack(pool, "fork_bomb")
    assert result.status == "error", f"a fork went through: {result}"
    assert "fork refused 50/50" in result.error, result
    assert "PermissionError" in result.error or "BlockingIOError" in result.error, result


# 4 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer", ["system", "subprocess", "exec", "posix_spawn"])
def test_starting_a_program_is_refused(pool, answer):
    marker = marker_path("/tmp")
    try:
        result = attack(pool, "spawn_process", answer, {"marker": str(marker)})
        assert not marker.exists(), f"{answer} ran a program on the host"
        assert_refused(result, answer)
    finally:
        marker.unlink(missing_ok=True)


# 5 -------------------------------------------------------------------------------------------
_WRITE_TARGETS = ["project", "above_project", "home", "pytest_tmp"]
_WRITE_CASES = (
    [pytest.param(BWRAP.values[0], t, id=f"bwrap-{t}", marks=BWRAP.marks) for t in _WRITE_TARGETS + ["host_tmp"]]
    + [
        pytest.param(PROCESS.values[0], t, id=f"process-{t}", marks=PROCESS.marks)
        for t in (_WRITE_TARGETS if _PROCESS_DROPS else [])
    ]
    + [
        pytest.param(LANDLOCK.values[0], t, id=f"process-landlock-{t}", marks=LANDLOCK.marks)
        for t in _WRITE_TARGETS + ["host_tmp"]
    ]
)


@pytest.mark.parametrize("mode,target", _WRITE_CASES)
def test_writes_outside_scratch_do_not_reach_the_host(pool, mode, target, tmp_path):
    """Writes to the project, the folder above it, the home folder, pytest's tmp folder and the
    host /tmp. NOT protected by the process mode without Landlock: the host /tmp (and
    /dev/shm), which the worker's uid can write (a marker lands there); and, when the suite does
    not run as root (no uid drop), every place the invoking user can write. With Landlock the
    process mode writes nowhere (the process-landlock cases)."""
    path = {
        "project": marker_path(PROJECT),
        "above_project": marker_path(PROJECT.parent),
        "home": marker_path(Path.home()),
        "pytest_tmp": marker_path(tmp_path),
        "host_tmp": marker_path("/tmp"),
    }[target]
    if target != "host_tmp" and path.parent.stat().st_mode & 0o002:
        pytest.skip(f"{path.parent} is world-writable (the project is not where it usually is)")
    try:
        result = attack(pool, "write_files", "path", {"path": str(path)})
        assert not path.exists(), f"the environment wrote {path} on the host"
        if mode == "bwrap" and target == "host_tmp":
            # allowed, but only into the jail's private tmpfs
            assert result.status in ("ok", "error"), result
        else:
            assert_refused(result, f"writing {path}")
    finally:
        path.unlink(missing_ok=True)


def test_environment_cannot_rewrite_its_own_source_or_plant_files(pool):
    attacker = env("write_files")
    result = attack(pool, "write_files", "own_source")
    assert_refused(result, "appending to its own source")
    assert (ATTACKS / "write_files.py").read_bytes() == attacker.source
    copy = pool._root / attacker.env_id / "env.py"
    assert copy.read_bytes() == attacker.source, "the worker's copy of the environment changed"

    name = f"evoenv_planted_{uuid.uuid4().hex}"
    result = attack(pool, "write_files", "plant_sibling", {"name": name})
    assert_refused(result, "creating a folder next to its worker folder")
    assert not (pool._root / name).exists()


# 6 -------------------------------------------------------------------------------------------
_FILL_CASES = [
    pytest.param(BWRAP.values[0], "one_file", id="bwrap-one_file", marks=BWRAP.marks),
    pytest.param(BWRAP.values[0], "many_files", id="bwrap-many_files", marks=BWRAP.marks),
    pytest.param(PROCESS.values[0], "one_file", id="process-one_file", marks=PROCESS.marks),
]


def _fill(pool: SandboxWorkers, directory: str, layout: str) -> tuple[CallResult, str]:
    prefix = f"evoenv_fill_{uuid.uuid4().hex}_"
    files, mib = (1, 100) if layout == "one_file" else (10, 10)
    result = attack(pool, "fill_disk", instance={"dir": directory, "prefix": prefix, "files": files, "mib": mib})
    return result, prefix


def _mib_written(result: CallResult) -> int:
    got = re.search(r"stopped after (\d+) MiB", result.error or "")
    assert result.status == "error" and got, f"100 MiB went through: {result}"
    return int(got.group(1))


@pytest.mark.parametrize("mode,layout", _FILL_CASES)
def test_filling_tmp_is_bounded(pool, mode, layout):
    """100 MiB written to /tmp, as one file or as ten files of 10 MiB. In the jail both stop at
    the /tmp tmpfs size (or RLIMIT_FSIZE) and nothing reaches the host. NOT protected by the
    process mode: /tmp is the host's, so each file is capped by RLIMIT_FSIZE but many files are
    not capped at all (ten files of 10 MiB all land on the host disk), and they stay there."""
    result, prefix = _fill(pool, "/tmp", layout)
    try:
        cap = min(LIMITS.tmp_mb, LIMITS.file_size_mb) if mode == "bwrap" else LIMITS.file_size_mb
        assert _mib_written(result) <= cap, result
        leftovers = sorted(Path("/tmp").glob(prefix + "*"))
        if mode == "bwrap" or _PROCESS_LANDLOCK:
            assert leftovers == [], f"jail files reached the host: {leftovers}"
        else:
            assert all(p.stat().st_size <= LIMITS.file_size_mb * 1024 * 1024 for p in leftovers)
    finally:
        for p in Path("/tmp").glob(prefix + "*"):
            p.unlink(missing_ok=True)


@pytest.mark.parametrize("mode", [BWRAP])
@pytest.mark.parametrize("directory", ["/dev/shm", "/dev"])
def test_jail_has_no_other_writable_unbounded_filesystem(pool, mode, directory):
    """Ten files of 10 MiB written under /dev: the jail's only writable place should be its
    small /tmp. `--dev /dev` mounts a tmpfs sized at half the host's RAM, writable by the
    jail's uid, so files there are bounded only one by one (RLIMIT_FSIZE), not in total: an
    environment can pin gigabytes of host RAM there for as long as its worker lives."""
    result, _ = _fill(pool, directory, "many_files")
    assert _mib_written(result) <= LIMITS.tmp_mb, result


# 7 -------------------------------------------------------------------------------------------
class _Listener:
    """A TCP listener on 127.0.0.1 in a thread that records every connection it accepts."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", self.port))
        self.udp.settimeout(0.3)
        self.accepted: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self):
        deadline = time.monotonic() + 60
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                conn, addr = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted.append(addr)
            conn.close()

    def close(self) -> list:
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            data = self.udp.recvfrom(64)
            self.accepted.append(("udp", data))
        except OSError:
            pass
        self.sock.close()
        self.udp.close()
        return self.accepted


@pytest.mark.parametrize("answer", ["tcp", "udp"])
def test_loopback_connection_is_refused(pool, answer):
    listener = _Listener()
    try:
        result = attack(pool, "connect_socket", answer, {"port": listener.port})
    finally:
        seen = listener.close()
    assert seen == [], f"the listener heard from the environment: {seen}"
    assert_refused(result, f"a {answer} connection")


# 8 -------------------------------------------------------------------------------------------
_SECRET_SOURCES = ["environ", "parent_environ", "other_process_environ", "proc_scan", "file_pytest_tmp", "file_home"]
_SECRET_CASES = (
    [pytest.param(BWRAP.values[0], s, id=f"bwrap-{s}", marks=BWRAP.marks) for s in _SECRET_SOURCES + ["file_project"]]
    + [
        pytest.param(PROCESS.values[0], s, id=f"process-{s}", marks=PROCESS.marks)
        for s in (_SECRET_SOURCES if _PROCESS_DROPS else ["environ"])
    ]
    + [
        pytest.param(LANDLOCK.values[0], s, id=f"process-landlock-{s}", marks=LANDLOCK.marks)
        for s in _SECRET_SOURCES + ["file_project"]
    ]
)


def _parent_environ_entry() -> str | None:
    """A whole NAME=value entry of this process's initial environment (what /proc shows)."""
    try:
        entries = Path(f"/proc/{os.getpid()}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for entry in entries:
        text = entry.decode("utf-8", "replace")
        if "=" in text and not text.startswith(("PYTHON", "_=")) and len(text) > 6:
            return text
    return None


@pytest.mark.parametrize("mode,source", _SECRET_CASES)
def test_planted_secret_cannot_be_read(pool, mode, source, tmp_path, monkeypatch):
    """The secret sits in the parent's environment variables, in the parent's initial
    environment (/proc/<parent>/environ), in another root process's environment, in a file in
    pytest's tmp folder, in the home folder and in the project. NOT protected by the process
    mode without Landlock: any world-readable file, such as the project's sources (a secret
    planted there is read), since it sees the host file system with the rights of uid 65534.
    With Landlock it reads only the interpreter, /usr and its own folder (process-landlock)."""
    secret = f"EVOENV_SECRET_{uuid.uuid4().hex}"
    monkeypatch.setenv("EVOENV_TEST_SECRET", secret)
    files: list[Path] = []
    helper = None
    instance: dict = {"secret": secret}
    try:
        if source == "environ":
            answer = "environ"
        elif source == "parent_environ":
            entry = _parent_environ_entry()
            if entry is None:
                pytest.skip("this process has no readable initial environment")
            answer, instance = "proc", {"secret": entry, "pid": os.getpid()}
        elif source in ("other_process_environ", "proc_scan"):
            helper = subprocess.Popen(["sleep", "60"], env={**os.environ})
            answer = "proc" if source == "other_process_environ" else "proc_scan"
            instance["pid"] = helper.pid
        else:
            where = {"file_pytest_tmp": tmp_path, "file_home": Path.home(), "file_project": ATTACKS}[source]
            path = where / f".evoenv_secret_{uuid.uuid4().hex}"
            path.write_text(secret + "\n")
            path.chmod(0o644)
            files.append(path)
            answer, instance["path"] = "file", str(path)
        result = attack(pool, "read_secrets", answer, instance)
        assert not (result.ok and result.value == 1.0), f"the environment read the secret ({source})"
        assert result.status in ("ok", "error"), result
    finally:
        if helper is not None:
            helper.kill()
            helper.wait(timeout=5)
        for path in files:
            path.unlink(missing_ok=True)


# 9 -------------------------------------------------------------------------------------------
_KILL_METHODS = ["kill", "killpg", "pidfd", "tgkill", "sigqueue"]


def _run_kill(pool: SandboxWorkers, target: subprocess.Popen, method: str) -> CallResult:
    try:
        result = attack(pool, "kill_process", method, {"pid": target.pid})
        time.sleep(0.05)
        assert target.poll() is None, f"{method} killed host process {target.pid}"
        assert_refused(result, method)
        return result
    finally:
        target.kill()
        target.wait(timeout=5)


@pytest.mark.parametrize("method", _KILL_METHODS)
def test_killing_a_host_process_is_refused(pool, method):
    target = subprocess.Popen(["sleep", "60"], start_new_session=True)
    _run_kill(pool, target, method)


@pytest.mark.parametrize("method", _KILL_METHODS)
def test_killing_a_process_of_the_worker_uid_is_refused(pool, mode, method):
    """The target runs as the workers' own uid (65534 when the suite runs as root), so only the
    sandbox, not file-permission-style uid checks, stands between them: in the process mode
    that includes every other environment's worker. Signals that seccomp does not filter
    (tgkill, rt_sigqueueinfo) go through there."""
    target = subprocess.Popen(unprivileged_prefix(mode) + ["sleep", "60"], start_new_session=True)
    _run_kill(pool, target, method)


def test_reading_another_workers_memory_is_refused(pool):
    """Another environment's worker is a process of the same uid: its /proc/<pid>/mem must not
    open, or one environment can read (and write) another's state and forge its results."""
    assert_good_env_runs(pool)
    victim = pool._slots.idle[GOOD.env_id][0]
    assert victim.alive
    result = attack(pool, "peek_worker", instance={"pid": victim.proc.pid})
    assert_refused(result, "reading another worker's memory")


# 10 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer", ["python", "c_stack"])
def test_deep_recursion_is_contained(pool, answer):
    t0 = time.monotonic()
    result = attack(pool, "deep_recursion", answer)
    assert result.status in ("error", "crash", "timeout"), result
    assert time.monotonic() - t0 < DEADLINE + 5.0


# 11 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer", ["sys_exit", "sys_exit_one", "os_exit", "abort", "keyboard"])
def test_leaving_the_worker_is_not_a_score(pool, answer):
    result = attack(pool, "exit_worker", answer)
    assert result.status in ("escaped", "crash"), result
    assert result.value is None
    if answer.startswith("sys_exit") or answer == "keyboard":  # a BaseException: its own status
        assert result.status == "escaped" and ("SystemExit" in result.error or "KeyboardInterrupt" in result.error)
    if answer in ("os_exit", "abort"):
        assert result.status == "crash", result


# 12 ------------------------------------------------------------------------------------------
def test_ignoring_signals_does_not_escape_the_deadline(pool):
    t0 = time.monotonic()
    result = attack(pool, "ignore_alarm")
    assert result.status == "timeout", result
    assert result.seconds <= DEADLINE + 0.5, result
    assert time.monotonic() - t0 < DEADLINE + 3.0


# 13 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer", ["print", "fds", "dunder"])
def test_printing_a_gigabyte_does_not_flood_the_parent(pool, answer):
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    t0 = time.monotonic()
    result = attack(pool, "print_flood", answer)
    elapsed = time.monotonic() - t0
    rss_growth_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert result.status in ("ok", "timeout"), result
    if result.ok and answer == "print":
        assert result.output_chars >= 10**9, result
    assert rss_growth_mib < 100, f"the parent grew by {rss_growth_mib:.0f} MiB"
    assert elapsed < DEADLINE + 5.0


# 14 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", ["prompt", "solve", "generate"])
def test_fifty_megabyte_return_value_is_invalid(pool, fn):
    big = env("huge_return")
    huge = {**NORMAL, "huge": True}
    calls = {
        "prompt": [Call.prompt(huge), Call.prompt(NORMAL)],
        "solve": [Call.solve(huge), Call.solve(NORMAL)],
        "generate": [Call.generate(1, 1), Call.generate(7, 1)],
    }[fn]
    results = pool.run(big, calls)
    assert results[0].status == "invalid", results[0]
    assert results[0].value is None
    assert results[1].ok, results[1]
    assert_good_env_runs(pool)


def test_fifty_megabyte_line_on_the_reply_channel_is_invalid(pool):
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = attack(pool, "huge_return", "forge")
    assert result.status == "invalid", result
    assert "reply over" in result.error, result
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024 < 100


# 15 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer", ["fork", "raw_fork", "system"])
def test_ctypes_cannot_fork_or_run_programs(pool, answer):
    marker = marker_path("/tmp")
    try:
        result = attack(pool, "ctypes_escape", answer, {"marker": str(marker)})
        assert not marker.exists(), "libc system() ran a program on the host"
        assert_refused(result, f"ctypes {answer}")
        if answer != "system":
            assert "returned -1" in result.error, result
    finally:
        marker.unlink(missing_ok=True)


# 16 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer", ["daemon", "setsid"])
def test_daemonizing_is_refused(pool, answer):
    result = attack(pool, "daemonize", answer)
    assert_refused(result, answer)
    assert "PermissionError" in result.error or "BlockingIOError" in result.error, result


# 17 ------------------------------------------------------------------------------------------
def test_import_time_loop_is_a_load_error(mode):
    limits = replace(LIMITS, import_s=2)
    looping = env("import_loop")
    with SandboxWorkers(limits=limits, sandbox_mode=mode, workers=2) as pool:
        t0 = time.monotonic()
        with pytest.raises(EnvLoadError, match="time limit"):
            pool.describe(looping)
        elapsed = time.monotonic() - t0
        assert limits.import_s - 0.05 <= elapsed <= limits.import_s + 1.5, elapsed
        t1 = time.monotonic()
        assert "time limit" in (pool.load_error(looping) or "")
        assert time.monotonic() - t1 < 0.5, "the load error was not remembered"
        results = pool.run(looping, [Call.generate(1, 1), Call.score(NORMAL, "7")])
        assert [r.status for r in results] == ["crash", "crash"], results
        assert all(r.error.startswith("load:") for r in results), results
        assert_good_env_runs(pool)


# 18 ------------------------------------------------------------------------------------------
ODD_SCORES = [
    "float_subclass",
    "lying_float",
    "always_equal",
    "nan",
    "inf",
    "minus_inf",
    "negative",
    "above_one",
    "bool_true",
    "bool_false",
    "string",
    "none",
    "decimal",
    "fraction",
    "int_subclass",
    "complex",
    "list",
    "bytes",
]


def test_odd_score_values_are_invalid(pool):
    odd = env("odd_returns")
    calls = [Call.score(NORMAL, kind) for kind in ODD_SCORES] + [Call.score(NORMAL, "7"), Call.score(NORMAL, "int_one")]
    results = pool.run(odd, calls)
    wrong = {kind: r for kind, r in zip(ODD_SCORES, results) if r.status != "invalid" or r.value is not None}
    assert wrong == {}, f"odd score values not rejected as invalid: {wrong}"
    assert_ok(results[-2], 1.0, "a float 1.0")
    assert_ok(results[-1], 1.0, "an int 1")
    assert type(results[-1].value) is float
    assert_good_env_runs(pool)


def test_huge_int_score_is_invalid_not_a_parent_crash(pool):
    """score returning 10**400: the worker passes an int through, the parent's finiteness check
    (math.isfinite) raises OverflowError on it, and the whole run raises."""
    results = pool.run(env("odd_returns"), [Call.score(NORMAL, "big_int"), Call.score(NORMAL, "7")])
    assert results[0].status == "invalid", results[0]
    assert_ok(results[1], 1.0, "call after the huge int")
    assert_good_env_runs(pool)


ODD_INSTANCES = {
    1: "a list",
    2: "a str",
    3: "None",
    4: "a dict holding a set",
    5: "a dict holding NaN",
    6: "a 100 KB dict",
    7: "an OrderedDict",
    8: "a dict with a tuple key",
    9: "a dict holding an object",
}


@pytest.mark.parametrize("seed", list(ODD_INSTANCES), ids=[v.replace(" ", "_") for v in ODD_INSTANCES.values()])
def test_odd_instances_are_invalid(pool, seed):
    results = pool.run(env("odd_returns"), [Call.generate(seed, 1), Call.generate(0, 1)])
    assert results[0].status != "ok", f"generate returning {ODD_INSTANCES[seed]} was accepted"
    assert results[0].status == "invalid", f"generate returning {ODD_INSTANCES[seed]}: {results[0]}"
    assert_ok(results[1], {"n": 0}, "a normal generate after it")


# forged replies ------------------------------------------------------------------------------
FORGERIES = [
    "not_json",
    "not_object",
    "nested_list",
    "nested_value",
    "big_int_value",
    "big_int_seconds",
    "big_float_value",
    "wrong_type_tag",
    "error_not_str",
    "nested_900",
    "nested_900_list",
    "surrogate_error",
    "invalid_utf8",
]


@pytest.mark.parametrize("kind", FORGERIES)
def test_forged_reply_never_crashes_the_parent(pool, kind):
    """Code in a worker owns its reply channel: it can forge a plausible result (that is caught
    outside the sandbox), but no malformed reply may raise in the parent. It writes the forgery
    and exits, so nothing genuine follows it on the channel."""
    forger = env("forged_replies")
    results = pool.run(forger, [Call.score(NORMAL, kind)])
    assert results[0].status != "ok", results[0]
    # The forger exited; the next batch may find that worker dead (a crash) before respawning.
    later = pool.run(forger, [Call.score(NORMAL, "7"), Call.score(NORMAL, "7")])
    assert later[0].status in ("ok", "crash"), later
    assert_ok(later[1], 1.0, "a normal call after the forgery")
    assert_good_env_runs(pool)


def test_forged_ready_message_never_crashes_the_parent(pool):
    """The same at import time: a forged 'ready' line with an absurd import time."""
    forger = env("forged_ready")
    try:
        pool.describe(forger)
    except EnvLoadError:
        pass
    results = pool.run(forger, [Call.score(NORMAL, "7")])
    assert len(results) == 1 and results[0].status in ("ok", "crash", "error", "invalid"), results
    assert_good_env_runs(pool)


# 19 ------------------------------------------------------------------------------------------
# The jail's pid 1. bwrap's own init used to be pid 1 of every jail: same uid as the worker, no
# seccomp filter, memory writable from the worker. Now the worker is pid 1 (--as-pid-1), so
# there is no other process in the jail; in the process mode pid 1 is the host's init.
def _processes_with(text: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            continue
    return found


def _parent_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


@pytest.mark.parametrize("route", ["mem", "fd", "ptrace"])
def test_pid_one_of_the_jail_is_no_way_out(pool, route):
    """Write access to pid 1's memory (/proc/1/mem), its descriptors (/proc/1/fd) or a ptrace
    of pid 1: under the old jail the first one worked (bwrap's init, unfiltered, writable)."""
    result = attack(pool, "reach_process", route, {"pid": 1})
    assert_refused(result, f"reaching pid 1 through {route}")


def test_worker_is_pid_one_of_its_jail(mode):
    """In the jail, the worker is pid 1 and under its own seccomp filter: no unfiltered
    process shares its PID namespace."""
    probe = EnvFile.from_path(ATTACKS / "reach_process.py")
    with SandboxWorkers(limits=LIMITS, sandbox_mode=mode, workers=1) as pool:
        assert pool.run(probe, [Call.score(NORMAL, "7")])[0].ok
        worker = pool._slots.idle[probe.env_id][0]
        host_pids = [worker.proc.pid]
        children = Path(f"/proc/{worker.proc.pid}/task/{worker.proc.pid}/children")
        host_pids += [int(c) for c in children.read_text().split()] if children.exists() else []
        statuses = {pid: Path(f"/proc/{pid}/status").read_text() for pid in host_pids}
    if mode == "bwrap":
        # the bwrap process outside the jail, and exactly one process inside: the worker
        assert len(host_pids) == 2, statuses
        inside = dict(line.split(":", 1) for line in statuses[host_pids[1]].splitlines() if ":" in line)
        assert inside["NSpid"].split()[-1] == "1", inside  # its pid in the jail's namespace
        assert inside["Seccomp"].strip() == "2", inside
    else:
        assert "Seccomp:\t2" in statuses[host_pids[0]], statuses


def test_no_process_is_left_behind(mode):
    """The escape that worked: write code into pid 1 that clears its parent-death signal and
    forks a sleeper, then exit so that pid 1 runs it. The sleeper (and its parent) outlived
    evoenv. Now there is no other process to write into, and a dead worker takes its whole jail
    with it. In the process mode pid 1 is the host's init: refused."""
    marker = f"evoenv_left_behind_{uuid.uuid4().hex}"
    try:
        with SandboxWorkers(limits=LIMITS, sandbox_mode=mode, workers=2) as pool:
            result = attack(pool, "reach_process", "inject", {"pid": 1, "marker": marker})
            assert result.value is None, result
        deadline = time.monotonic() + 5
        while _processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_with(marker) == [], f"a process outlived the pool ({result})"
        assert_refused(result, "writing code into pid 1")
    finally:
        for pid in _processes_with(marker):
            parent = _parent_of(pid)
            for victim in (pid, parent):
                if victim and victim > 1:
                    try:
                        os.kill(victim, 9)
                    except ProcessLookupError:
                        pass


@pytest.mark.parametrize("mode", [BWRAP, LANDLOCK])
@pytest.mark.parametrize("route", ["mem", "fd", "ptrace", "inject"])
def test_host_process_of_the_worker_uid_is_out_of_reach(pool, mode, route):
    """A host process running as the workers' own uid (65534 when the suite runs as root) and
    dumpable, so file permissions do not protect its /proc entries. In the jail it is not even
    visible; the process mode needs Landlock, whose ptrace rule keeps a worker from every
    process outside its own domain. NOT protected by the process mode without Landlock: the
    worker opens that process's memory read-write and could run code in it."""
    marker = f"evoenv_left_behind_{uuid.uuid4().hex}"
    target = subprocess.Popen(unprivileged_prefix(mode) + ["sleep", "60"], start_new_session=True)
    try:
        time.sleep(0.05)
        result = attack(pool, "reach_process", route, {"pid": target.pid, "marker": marker})
        assert target.poll() is None
        assert_refused(result, f"reaching a host process through {route}")
    finally:
        target.kill()
        target.wait(timeout=5)
        for pid in _processes_with(marker):
            os.kill(pid, 9)


# 20 ------------------------------------------------------------------------------------------
# Nothing the worker says about itself is believed.
def test_calls_and_imports_are_timed_by_the_parent(mode):
    """The environment freezes the clocks the worker times itself with: a 1.2 s solve and a
    0.4 s import still take their real time in the parent's results."""
    liar = env("lying_clock")
    limits = replace(LIMITS, solve_s=3)
    with SandboxWorkers(limits=limits, sandbox_mode=mode, workers=1) as pool:
        meta = pool.describe(liar)
        results = pool.run(liar, [Call.solve(NORMAL), Call.score(NORMAL, "7")])
    # the parent's clock starts when it reads the worker's "importing" line, which a loaded host
    # can delay by a scheduler tick or two (0.3998 s seen in a CI-like run): a 0 s lie is far off
    assert meta["import_seconds"] >= 0.35, meta
    assert_ok(results[0], "7", "the slow solve")
    assert results[0].seconds >= 1.15, results[0]
    assert_ok(results[1], 1.0, "the score after it")
    assert results[1].seconds < 1.0, results[1]


def test_metadata_comes_from_the_source_not_the_worker(pool):
    """A forged 'ready' line (NAME a list, other TAGS and ANSWER_TYPE, a 3 MB docstring with a
    lone surrogate, an unknown callable) and a later 3 MB NAME: describe() gives what the
    source declares, bounded."""
    forger = env("forged_meta")
    meta = pool.describe(forger)
    assert meta["NAME"] == "attack_forged_meta"
    assert meta["TAGS"] == ["honest"] and meta["ANSWER_TYPE"] == "int" and meta["INPUT_TYPE"] is None
    assert meta["doc"].startswith("Attack: forge the metadata") and len(meta["doc"]) <= 2000
    assert set(meta["callables"]) <= {"generate", "generate_from", "prompt", "solve", "score"}
    assert len(json.dumps(meta)) < 10_000
    pool.run(forger, [Call.score(NORMAL, "7")])  # the genuine ready line answers this call
    assert_good_env_runs(pool)


# 21 ------------------------------------------------------------------------------------------
# Every value is sanitized once, at the boundary.
def _utf8(text) -> bool:
    try:
        json.dumps(text, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_lone_surrogates_come_back_as_valid_text(pool):
    odd = env("odd_text")
    results = pool.run(
        odd,
        [
            Call.generate(1, 1),
            Call.prompt({"n": 1}),
            Call.solve({"n": 1}),
            Call.score(NORMAL, "surrogate"),
            Call.score(NORMAL, "7"),
        ],
    )
    assert [r.status for r in results] == ["ok", "ok", "ok", "error", "ok"], results
    for r in results:
        assert _utf8(r.value) and _utf8(r.error), r
    assert results[0].value == {"text\ufffd": "value \ufffd", "n": 1}
    assert results[1].value == "What is \ufffd one?" and results[2].value == "1\ufffd"
    assert "\ufffd" in results[3].error


def test_deeply_nested_instance_is_invalid(pool):
    """A whole line that is not a usable reply leaves the channel in step: the call is invalid
    and the worker answers the next one (no respawn, so no 'skipped after 3 kills' either)."""
    results = pool.run(env("odd_text"), [Call.generate(2, 1), Call.generate(3, 1)] * 4)
    for bad, good in zip(results[::2], results[1::2]):
        assert bad.status == "invalid" and "nested deeper" in bad.error, bad
        assert_ok(good, {"n": 3}, "a normal generate after it")
    assert pool.spawned == 1


@pytest.mark.parametrize("kind", ["surrogate_error", "invalid_utf8"])
def test_forged_bad_text_is_valid_text(pool, kind):
    results = pool.run(env("forged_replies"), [Call.score(NORMAL, kind)])
    assert results[0].status in ("error", "invalid") and _utf8(results[0].error), results[0]


def test_a_reply_the_parent_cannot_handle_never_deadlocks_the_pool(mode, monkeypatch):
    """Anything that raises while a reply is handled (RecursionError in json.dumps of a deep
    value, once) left the worker's slot taken: after `workers` such replies the next call
    waited forever. Now the worker is killed, the call is a crash, and the slot is free."""
    from evoenv_cli.runtime import workers as pool_module

    real = pool_module.check_value

    def explode(fn, reply, limits):
        if fn == "solve":
            raise RecursionError("maximum recursion depth exceeded")
        return real(fn, reply, limits)

    monkeypatch.setattr(pool_module, "check_value", explode)
    done = threading.Event()
    outcome: dict = {}

    def work():
        with SandboxWorkers(limits=LIMITS, sandbox_mode=mode, workers=2) as pool:
            outcome["bad"] = [pool.run(GOOD, [Call.solve({"a": 1, "b": 2})])[0] for _ in range(4)]
            outcome["good"] = pool.run(GOOD, [Call.score({"a": 1, "b": 2}, "3")])[0]
        done.set()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    assert done.wait(60), "the pool deadlocked"
    assert [r.status for r in outcome["bad"]] == ["crash"] * 4, outcome
    assert "RecursionError" in outcome["bad"][0].error
    assert_ok(outcome["good"], 1.0, "a call after four unhandled replies")


def test_oversized_source_is_never_run(mode, tmp_path):
    big = tmp_path / "big.py"
    big.write_bytes((ATTACKS / "good_env.py").read_bytes() + b"\n" + b"x = 1\n" * 20_000)
    with SandboxWorkers(limits=LIMITS, sandbox_mode=mode, workers=1) as pool:
        with pytest.raises(EnvLoadError, match="over 100000"):
            pool.describe(EnvFile.from_path(big))
        assert pool.spawned == 0
