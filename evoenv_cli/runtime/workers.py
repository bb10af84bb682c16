"""Persistent sandboxed workers: one environment imported once per worker, calls sent in
batches, per-call deadlines enforced here (kill and respawn on overrun), and every value that
comes back checked before anyone sees it.

Nothing a worker says is trusted: every reply is sanitized once, here, at the boundary (valid
UTF-8 by replacement, bounded nesting and size) before its value is checked; every call is
timed by this process, not by the worker; and an environment's metadata (NAME, ANSWER_TYPE,
TAGS, docstring) comes from its source's AST, not from the worker's account of it.

Callers say what to run (`Call`s against an `EnvFile`) and get `CallResult`s in the same
order; a broken environment yields failed results, never an exception.

Why one module: it is the trust boundary. Every reply from environment code is read, sanitized,
timed and checked here, and one file keeps that boundary reviewable in one read.
"""

from __future__ import annotations

import json
import math
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from evoenv_cli.envfile import EnvFile, env_id_of  # noqa: F401 - re-exported: the pool's callers name it here
from evoenv_cli.runtime import contract, sandbox

T = TypeVar("T")
R = TypeVar("R")

CALLS = contract.CALLS
MAX_VALUE_DEPTH = 64  # nesting of a reply (its envelope included); deeper is a bad value
MAX_ERROR_CHARS = 300


@dataclass
class Limits:
    """Per-call wall-clock limits (seconds) and per-worker resource caps. Each field's metadata
    gives its allowed range (checked when a recipe loads)."""

    generate_s: float = field(default=1.0, metadata={"gt": 0})
    generate_from_s: float = field(default=1.0, metadata={"gt": 0})
    prompt_s: float = field(default=1.0, metadata={"gt": 0})
    solve_s: float = field(default=2.0, metadata={"gt": 0})
    score_s: float = field(default=1.0, metadata={"gt": 0})
    grace_s: float = field(default=0.5, metadata={"min": 0})  # added to every deadline for scheduling noise
    import_s: float = field(default=10.0, metadata={"gt": 0})
    memory_mb: int = field(default=1024, metadata={"min": 64})
    file_size_mb: int = field(default=16, metadata={"min": 1})
    open_files: int = field(default=64, metadata={"min": 16})
    tmp_mb: int = field(default=16, metadata={"min": 1})
    worker_cpu_s: int = field(default=600, metadata={"min": 1})
    max_instance_bytes: int = field(default=65536, metadata={"min": 2})
    max_prompt_chars: int = field(default=8000, metadata={"min": 1})
    max_answer_chars: int = field(default=100_000, metadata={"min": 1})
    max_message_bytes: int = field(default=4_000_000, metadata={"min": 1024})
    max_source_bytes: int = field(default=contract.MAX_SOURCE_BYTES, metadata={"min": 1})  # larger is never run
    batch_size: int = field(default=64, metadata={"min": 1})
    give_up_after: int = field(
        default=3, metadata={"min": 1}
    )  # consecutive kills in one batch before the rest are skipped (never budgeted calls: a kill costs its own call only)
    max_calls_per_worker: int = field(
        default=1000, metadata={"min": 0}
    )  # then the worker is replaced (0: never), so module state cannot build up

    def deadline(self, fn: str) -> float:
        return getattr(self, f"{fn}_s") + self.grace_s


@dataclass(frozen=True)
class Call:
    """One call of the contract. `budget_s`: a CPU budget the worker enforces inside the call
    (it is stopped there and reported `timeout`, the worker lives on for the next call), on top
    of the wall-clock limit this process enforces by killing the worker."""

    fn: str
    args: tuple
    budget_s: float | None = None

    @staticmethod
    def generate(seed: int, difficulty: int) -> Call:
        return Call("generate", (seed, difficulty))

    @staticmethod
    def generate_from(value: Any, seed: int, difficulty: int) -> Call:
        return Call("generate_from", (value, seed, difficulty))

    @staticmethod
    def prompt(instance: dict) -> Call:
        return Call("prompt", (instance,))

    @staticmethod
    def solve(instance: dict) -> Call:
        return Call("solve", (instance,))

    @staticmethod
    def score(instance: dict, answer: str, budget_s: float | None = None) -> Call:
        return Call("score", (instance, answer), budget_s)


@dataclass
class CallResult:
    """status: ok | error (raised) | escaped (raised a BaseException that is not an
    Exception: KeyboardInterrupt, SystemExit, GeneratorExit...) | invalid (bad value) |
    timeout | crash | skipped."""

    status: str
    value: Any = None
    error: str | None = None
    seconds: float = 0.0
    output_chars: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_dict(self) -> dict:
        return asdict(self)


# What each failed status means, in words: every stage labels a failed call through
# `describe_failure`, so one defect reads the same in sample, review, dedupe and validate.
STATUS_WORDS = {
    "timeout": "timed out",
    "crash": "crashed",
    "invalid": "returned a bad value",
    "error": "raised",
    "escaped": "let a BaseException escape",
    "skipped": "was skipped",
}
MAX_FAILURE_CHARS = 400


def describe_failure(fn: str, r: CallResult, seed: int | None = None, difficulty: int | None = None) -> str:
    """One line for a failed call: `generate at seed 5 difficulty 3 timed out: <error>`."""
    where = f" at seed {seed} difficulty {difficulty}" if seed is not None else ""
    text = f"{fn}{where} {STATUS_WORDS.get(r.status, r.status)}: {r.error}"
    return " ".join(text.split())[:MAX_FAILURE_CHARS]


class EnvLoadError(Exception):
    """The environment could not be started or imported in a worker."""


# how an EnvLoadError's message starts when the file's own import ran into `Limits.import_s`
# (a string: the error crosses a Ray node as one)
IMPORT_TIMEOUT = "importing the file ran past the import time limit"


def import_timed_out(error: str) -> bool:
    """Whether a load error is the file's import stopped at the time limit (not the worker's start)."""
    return error.startswith(IMPORT_TIMEOUT)


class _Dead(Exception):
    def __init__(self, status: str, error: str):
        super().__init__(error)
        self.status = status
        self.error = error


class _BadLine(_Dead):
    """A whole reply line arrived but is not a usable reply: the channel is still in step, so
    the call is invalid and the worker need not die for it."""


class BadValue(ValueError):
    """A reply that is not plain data within bounds."""


def sanitize(obj: Any, max_depth: int = MAX_VALUE_DEPTH) -> Any:
    """A decoded JSON value made safe for everything downstream: every string (keys too) valid
    UTF-8, lone surrogates replaced by U+FFFD; nesting deeper than `max_depth` is a BadValue.
    Iterative, so no value can make this (or a later json.dumps) hit the recursion limit."""
    if isinstance(obj, str):
        return contract.valid_text(obj)
    if not isinstance(obj, (dict, list)):
        return obj
    root: list = [obj]
    stack = [(root, 0, obj, 1)]
    while stack:
        holder, key, value, depth = stack.pop()
        if depth > max_depth:
            raise BadValue(f"value nested deeper than {max_depth} levels")
        if isinstance(value, dict):
            copy: Any = {}
            for k, v in value.items():
                k = contract.valid_text(k)
                if isinstance(v, (dict, list)):
                    copy[k] = None
                    stack.append((copy, k, v, depth + 1))
                else:
                    copy[k] = contract.valid_text(v) if isinstance(v, str) else v
        else:
            copy = [None] * len(value)
            for i, v in enumerate(value):
                if isinstance(v, (dict, list)):
                    stack.append((copy, i, v, depth + 1))
                else:
                    copy[i] = contract.valid_text(v) if isinstance(v, str) else v
        holder[key] = copy
    return root[0]


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def decode_reply(line: bytes, max_depth: int = MAX_VALUE_DEPTH) -> Any:
    """One reply line as a sanitized value: UTF-8 by replacement, then `sanitize`, which only
    runs when the line could need it (a surrogate can only come from a \\uD8xx-\\uDFxx escape,
    and nesting is bounded by the number of brackets), so a plain reply costs one json.loads."""
    value = json.loads(line.decode("utf-8", "replace"))
    deep = line.count(b"{") + line.count(b"[") > max_depth
    if deep or (b"\\u" in line and _SURROGATE_ESCAPE.search(line)):
        return sanitize(value, max_depth)
    return value


def _count(value: Any) -> int:
    """A worker-reported count as a bounded non-negative int (0 when it is not an int)."""
    return min(max(value, 0), 2**62) if type(value) is int else 0


def check_value(fn: str, reply: dict, limits: Limits) -> CallResult:
    """The parent's verdict on one (sanitized) reply: nothing from a worker is trusted as is.
    `seconds` here is the reply's own claim; `Worker.run` replaces it with the time this
    process measured."""
    t = reply.get("t")
    seconds = t if type(t) is float and math.isfinite(t) and t >= 0 else 0.0
    out = _count(reply.get("out"))
    if reply.get("ok") is not True:
        err = reply.get("error")
        err = err if isinstance(err, str) else "malformed error reply"
        # No environment has a reason to raise what stops a program rather than reports an
        # error: the worker says so (a lie only hurts the file that tells it), and it is a
        # status of its own so that no stage takes it for an ordinary failure to contain.
        if reply.get("budget") is True:  # stopped inside the worker at its CPU budget (a lie only costs it a score)
            return CallResult("timeout", None, err[:MAX_ERROR_CHARS], float(seconds), out)
        status = "escaped" if reply.get("escaped") is True else "invalid" if _is_value_error(fn, err) else "error"
        return CallResult(status, None, err[:MAX_ERROR_CHARS], float(seconds), out)
    value, tag = reply.get("value"), reply.get("type")

    def bad(msg: str) -> CallResult:
        return CallResult("invalid", None, msg, float(seconds), out)

    if fn in ("generate", "generate_from"):
        if tag != "dict" or type(value) is not dict:
            return bad(f"{fn} did not return a JSON object")
        try:
            size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
        except (ValueError, TypeError, RecursionError):
            return bad(f"{fn} returned an instance that is not plain JSON")
        if size > limits.max_instance_bytes:
            return bad(f"instance is {size} bytes, over {limits.max_instance_bytes}")
    elif fn in ("prompt", "solve"):
        cap = limits.max_prompt_chars if fn == "prompt" else limits.max_answer_chars
        if tag != "str" or type(value) is not str:
            return bad(f"{fn} did not return a str")
        if len(value) > cap:
            return bad(f"{fn} returned {len(value)} characters, over {cap}")
    elif fn == "score":
        if tag == "float" and type(value) is str:  # the worker sends nan/inf as their repr
            return bad(f"score returned {value[:20]}, not a finite number")
        if tag not in ("float", "int") or type(value) not in (int, float):
            return bad(f"score returned {str(tag)[:20] if tag else type(value).__name__}, expected a float")
        if type(value) is int and value not in (0, 1):
            return bad("score returned an int other than 0 or 1")
        if not math.isfinite(value):
            return bad(f"score returned {value!r}, not a finite number")
        if not 0.0 <= value <= 1.0:
            return bad(f"score returned {value!r}, outside [0, 1]")
        value = float(value)
    else:
        return bad(f"unknown call {fn[:20]}")
    return CallResult("ok", value, None, float(seconds), out)


def _is_value_error(fn: str, err: str) -> bool:
    return err.startswith("ValueError: ") and (
        f"{fn} returned" in err or "instance is" in err or "score returned" in err
    )


def _wire(call: Call) -> dict:
    out = {"fn": call.fn, "args": list(call.args)}
    if call.budget_s is not None:
        out["budget"] = call.budget_s
    return out


class Worker:
    """One sandboxed process with one environment imported."""

    def __init__(
        self,
        plan: sandbox.LaunchPlan,
        workdir: Path,
        limits: Limits,
        hash_seed: int,
        packages: tuple[Path, ...] = (),
        preload: tuple[str, ...] = (),
    ):
        self.limits = limits
        config = {
            "preload": list(preload),  # a granted package's modules, imported before the file
            "env_path": sandbox.env_path_in_worker(plan, workdir),
            "calls": list(CALLS),  # the worker imports nothing of evoenv: it is told the contract's calls
            "packages_path": sandbox.packages_path_in_worker(plan, workdir) if packages else None,
            "seccomp_lib": plan.seccomp_lib,
            "landlock": sandbox.landlock_rules(plan, workdir, packages),
            "limits": {
                "memory_mb": limits.memory_mb,
                "file_size_mb": limits.file_size_mb,
                "open_files": limits.open_files,
                "worker_cpu_s": limits.worker_cpu_s,
            },
            "caps": {
                "max_instance_bytes": limits.max_instance_bytes,
                "max_prompt_chars": limits.max_prompt_chars,
                "max_answer_chars": limits.max_answer_chars,
            },
        }
        argv, env, cwd = sandbox.launch_argv(plan, workdir, json.dumps(config), hash_seed, limits.tmp_mb, packages)
        self._buf = b""
        self._arrived = time.monotonic()
        self.cpu_seconds = 0.0
        self.calls_served = 0
        self.idle_since = 0.0  # when it last went back to its pool (SandboxWorkers picks victims by it)
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
        os.set_blocking(self.proc.stdin.fileno(), False)
        self.started = time.monotonic()
        try:
            ready = self._read_reply(self.started + limits.import_s)
            importing_from = self._arrived
            if ready.get("importing") is True:  # the file's import starts now
                try:
                    ready = self._read_reply(self.started + limits.import_s)
                except _Dead as dead:
                    if dead.status != "timeout":
                        raise
                    raise _Dead("timeout", f"{IMPORT_TIMEOUT} ({limits.import_s:g} s)") from None
        except _Dead as dead:
            self.kill()
            raise EnvLoadError(dead.error + self._stderr_tail()) from None
        if ready.get("ready") is not True:
            self.kill()
            error = ready.get("error")
            raise EnvLoadError(error[:MAX_ERROR_CHARS] if isinstance(error, str) else "worker failed to start")
        # measured here: from the line the worker sends just before it imports the file to its
        # ready line (the interpreter's start and the granted packages' imports not included)
        self.import_seconds = self._arrived - importing_from
        meta = ready.get("meta") if isinstance(ready.get("meta"), dict) else {}
        callables = meta.get("callables") if isinstance(meta.get("callables"), list) else []
        self.callables = sorted(c for c in CALLS if c in callables)
        self.import_output_chars = _count(ready.get("out"))

    def _stderr_tail(self) -> str:
        try:
            os.set_blocking(self.proc.stderr.fileno(), False)
            data = self.proc.stderr.read(4000) or b""
        except (OSError, ValueError):
            data = b""
        lines = data.decode("utf-8", "replace").strip().splitlines()
        return f" ({lines[-1][:200]})" if lines else ""

    def _read_reply(self, deadline: float) -> dict:
        """The next reply line, decoded as UTF-8 by replacement and sanitized; `_arrived` is
        when this process received it."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Dead("timeout", "time limit exceeded")
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                raise _Dead("timeout", "time limit exceeded")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise _Dead("crash", self._exit_reason())
            self._buf += chunk
            self._arrived = time.monotonic()
            if len(self._buf) > self.limits.max_message_bytes:
                raise _Dead("invalid", f"reply over {self.limits.max_message_bytes} bytes")
        line, self._buf = self._buf.split(b"\n", 1)
        if len(line) > self.limits.max_message_bytes:
            raise _Dead("invalid", f"reply over {self.limits.max_message_bytes} bytes")
        try:
            obj = decode_reply(line)
        except BadValue as exc:
            raise _BadLine("invalid", str(exc)) from None
        except (ValueError, RecursionError, MemoryError):
            raise _BadLine("invalid", "reply is not JSON") from None
        if not isinstance(obj, dict):
            raise _BadLine("invalid", "reply is not a JSON object")
        return obj

    def _exit_reason(self) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "worker closed its channel"
        if code < 0:
            try:
                return f"worker killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"worker killed by signal {-code}"
        return f"worker exited with code {code}"

    def _write(self, data: bytes, deadline: float) -> None:
        fd = self.proc.stdin.fileno()
        view = memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Dead("timeout", "worker stopped reading")
            _, ready, _ = select.select([], [fd], [], remaining)
            if not ready:
                continue
            try:
                n = os.write(fd, view)
            except BrokenPipeError:
                raise _Dead("crash", self._exit_reason()) from None
            view = view[n:]

    def run(self, calls: list[Call]) -> tuple[list[CallResult], bool]:
        """Results for a prefix of `calls`; the flag says the worker died on the last one.
        Each call's seconds are this process's own clock, from the moment the call could start
        (the request sent, or the previous reply received) to the arrival of its reply: a
        worker cannot make a call look faster than it was."""
        payload = {"calls": [_wire(c) for c in calls]}
        results: list[CallResult] = []
        start = time.monotonic()
        try:
            self._write(json.dumps(payload).encode() + b"\n", start + 30.0)
        except _Dead as dead:
            self.kill()
            return [CallResult(dead.status, None, dead.error)], True
        last = time.monotonic()
        for call in calls:
            try:
                reply = self._read_reply(last + self.limits.deadline(call.fn))
            except _BadLine as bad:
                arrived = max(self._arrived, last)
                results.append(CallResult(bad.status, None, f"{call.fn}: {bad.error}", arrived - last))
                last = arrived
                self.calls_served += 1
                continue
            except _Dead as dead:
                elapsed = time.monotonic() - last
                self.kill()
                results.append(CallResult(dead.status, None, f"{call.fn}: {dead.error}", elapsed))
                return results, True
            arrived = max(self._arrived, last)
            self.calls_served += 1
            cpu = reply.get("cpu")
            if type(cpu) is float and math.isfinite(cpu):
                self.cpu_seconds = cpu
            result = check_value(call.fn, reply, self.limits)
            result.seconds = arrived - last
            results.append(result)
            last = arrived
        return results, False

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def calls_left(self) -> int:
        """Calls this worker can still take at the longest deadline before RLIMIT_CPU, which
        counts CPU over the worker's whole life, could kill it in the middle of a good call,
        and before it has served `max_calls_per_worker` calls and is replaced."""
        lim = self.limits
        longest = max(lim.deadline(fn) for fn in CALLS)
        left = int(max(0.0, lim.worker_cpu_s - self.cpu_seconds) // longest)
        if lim.max_calls_per_worker > 0:
            left = min(left, lim.max_calls_per_worker - self.calls_served)
        return left


def _granted_packages(
    env: EnvFile, plan: sandbox.LaunchPlan, workdir: Path
) -> tuple[tuple[Path, ...], tuple[str, ...]]:
    """The packages an imported environment's worker sees (runtime/packages.py) and the
    modules it may import from them; none for any other source. A grant that cannot be
    honoured here is that environment's load error."""
    from evoenv_cli.runtime import packages

    grant = packages.grant_for(env.source)
    if grant is None:
        return (), ()
    try:
        entries = grant.entries
    except LookupError as exc:
        raise EnvLoadError(f"declared packages unavailable: {exc}") from None
    if plan.mode != "bwrap":
        packages.symlink_farm(workdir / "packages", grant)
    return entries, tuple(sorted(grant.modules))


@dataclass
class _Slots:
    idle: dict[str, list[Worker]] = field(default_factory=dict)
    busy: dict[str, int] = field(default_factory=dict)  # workers out on a call, by environment
    total: int = 0


class WorkerSet:
    """What a set of sandboxed workers offers on top of its own `describe`, `run_many` and
    `close`: this machine's SandboxWorkers, or a cluster's (evoenv_cli/cluster/sandbox.py)."""

    def describe(self, env: EnvFile) -> dict:
        raise NotImplementedError

    def run_many(self, jobs: list[tuple[EnvFile, list[Call]]], stop_on_failure: bool = False) -> list[list[CallResult]]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def load_error(self, env: EnvFile) -> str | None:
        try:
            self.describe(env)
        except EnvLoadError as exc:
            return str(exc)
        return None

    def run(self, env: EnvFile, calls: list[Call], stop_on_failure: bool = False) -> list[CallResult]:
        return self.run_many([(env, calls)], stop_on_failure)[0]

    @property
    def parallel(self) -> int:
        """How many environments this set runs at once."""
        return max(1, int(getattr(self, "workers", 1)))

    def per_env(self, fn: Callable[[T], R], items: list[T]) -> list[R]:
        """fn(item) for every item, `parallel` at a time; results in input order. For work on
        one environment in several steps, each step's calls made from the last one's results
        (generate, then prompt and solve on what came back): the environment keeps its worker
        from one step to the next. One `run_many` per step over every environment would need
        a worker for each environment at each step wherever there are more environments than
        workers, and spawned them again at every step."""
        if len(items) <= 1 or self.parallel == 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self.parallel, len(items)), thread_name_prefix="evoenv-env") as ex:
            return list(ex.map(fn, items))

    def retire(self, env: EnvFile) -> None:
        """`env` is done for now: its idle workers are the first taken for another environment."""


class SandboxWorkers(WorkerSet):
    """Runs calls against many environments on at most `workers` sandboxed processes.

    Use as a context manager; `run_many` spreads batches over workers in parallel threads.
    """

    worker_class = Worker  # what a worker is (a cluster node's pool measures its workers' CPU)

    def __init__(self, limits: Limits | None = None, sandbox_mode: str = "auto", workers: int = 2, hash_seed: int = 0):
        self.limits = limits or Limits()
        self.plan = sandbox.resolve(sandbox_mode)
        self.workers = max(1, workers)
        self.hash_seed = hash_seed
        self._root = Path(tempfile.mkdtemp(prefix="evoenv-rt-"))
        self._root.chmod(0o711)  # an unprivileged worker must reach its own folder
        self._slots = _Slots()
        self._cond = threading.Condition()
        self._load_errors: dict[str, str] = {}
        self._meta: dict[str, dict] = {}
        self.spawned = 0
        self.calls = 0
        self._spawner = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="evoenv-spawn")

    def close(self) -> None:
        with self._cond:
            workers = [w for ws in self._slots.idle.values() for w in ws]
            self._slots = _Slots()
        for w in workers:
            w.kill()
        self._spawner.shutdown(wait=False)
        shutil.rmtree(self._root, ignore_errors=True)

    # -- workers -----------------------------------------------------------------------------
    def _spawn(self, env: EnvFile) -> Worker:
        if env.env_id in self._load_errors:
            raise EnvLoadError(self._load_errors[env.env_id])
        if len(env.source) > self.limits.max_source_bytes:
            self._load_errors[env.env_id] = (
                f"source is {len(env.source)} bytes, over {self.limits.max_source_bytes}: not run"
            )
            raise EnvLoadError(self._load_errors[env.env_id])
        workdir = sandbox.prepare_workdir(self._root, env.env_id, env.source)
        try:
            entries, preload = _granted_packages(env, self.plan, workdir)
            worker = self._spawner.submit(
                self.worker_class, self.plan, workdir, self.limits, self.hash_seed, entries, preload
            ).result()
        except EnvLoadError as exc:
            self._load_errors[env.env_id] = str(exc)
            raise
        self.spawned += 1
        if env.env_id not in self._meta:
            found = contract.declared(env.source)
            self._meta[env.env_id] = {
                "NAME": found.name,
                "ANSWER_TYPE": found.answer_type,
                "INPUT_TYPE": found.input_type,
                "TAGS": found.tags,
                "doc": found.doc,
                "name_problem": found.problem,
                "callables": worker.callables,
                "import_seconds": worker.import_seconds,
                "import_output_chars": worker.import_output_chars,
            }
        return worker

    def _acquire(self, env: EnvFile) -> Worker:
        victim = None
        with self._cond:
            while True:
                idle = self._slots.idle.get(env.env_id)
                while idle:
                    worker = idle.pop()
                    if worker.alive:
                        self._slots.busy[env.env_id] = self._slots.busy.get(env.env_id, 0) + 1
                        return worker
                    self._slots.total -= 1
                    worker.kill()
                if self._slots.total < self.workers:
                    break
                # An environment that already has a worker out waits for one rather than kill
                # another environment's idle worker: that one is most often between two checks
                # of a judgement still going, and would be spawned again at once. Environments
                # judged side by side then thrashed the pool (140 of validate's 150 spawns for
                # the ten seeds were replacements).
                # The victim is the worker idle longest: a finished environment's, not one
                # between two calls of an environment still at work.
                others = [ws for ws in self._slots.idle.values() if ws]
                if others and not self._slots.busy.get(env.env_id):
                    victim = min(others, key=lambda ws: ws[0].idle_since).pop(0)
                    self._slots.total -= 1
                    break
                self._cond.wait()
            self._slots.total += 1
            self._slots.busy[env.env_id] = self._slots.busy.get(env.env_id, 0) + 1
        if victim is not None:
            victim.kill()
        try:
            return self._spawn(env)
        except BaseException:
            self._release(None, env)
            raise

    def _release(self, worker: Worker | None, env: EnvFile) -> None:
        with self._cond:
            left = self._slots.busy.get(env.env_id, 0) - 1
            if left > 0:
                self._slots.busy[env.env_id] = left
            else:
                self._slots.busy.pop(env.env_id, None)
            if worker is not None and worker.alive and worker.calls_left() > 0:
                worker.idle_since = time.monotonic()
                self._slots.idle.setdefault(env.env_id, []).append(worker)
            else:
                self._slots.total -= 1
                if worker is not None:
                    worker.kill()
            self._cond.notify_all()

    # -- public API ----------------------------------------------------------------------------
    def describe(self, env: EnvFile) -> dict:
        """An environment that loads: what its source declares (NAME, ANSWER_TYPE, INPUT_TYPE,
        TAGS, doc; `name_problem` when a NAME is there but unusable), which contract functions
        its module defines, and its import time measured here; raises EnvLoadError."""
        if env.env_id not in self._meta:
            self._release(self._acquire(env), env)
        return dict(self._meta[env.env_id])

    def retire(self, env: EnvFile) -> None:
        with self._cond:
            for worker in self._slots.idle.get(env.env_id, []):
                worker.idle_since = -math.inf

    def discard(self, env: EnvFile) -> None:
        """Kill `env`'s idle workers, so that its next call meets a process with no history."""
        with self._cond:
            workers = self._slots.idle.pop(env.env_id, [])
            self._slots.total -= len(workers)
            self._cond.notify_all()
        for worker in workers:
            worker.kill()

    def solo(self, limits: Limits) -> SandboxWorkers:
        """A private pool for one check: one worker, `limits`, this pool's jail (asked for the
        same way) and hash seed; the caller closes it (a cluster's pool opens it on the node)."""
        return SandboxWorkers(limits, self.plan.requested or self.plan.mode, workers=1, hash_seed=self.hash_seed)

    def run_many(self, jobs: list[tuple[EnvFile, list[Call]]], stop_on_failure: bool = False) -> list[list[CallResult]]:
        """All jobs' calls, batched and spread over the workers; results in input order.
        With stop_on_failure, a batch whose call failed skips the rest instead of paying each
        remaining call's time limit (for a caller that rejects on the first failure)."""
        out: list[list[CallResult | None]] = [[None] * len(calls) for _, calls in jobs]
        chunks = []
        for j, (env, calls) in enumerate(jobs):
            for start in range(0, len(calls), self.limits.batch_size):
                chunks.append((j, start, env, calls[start : start + self.limits.batch_size]))
        if not chunks:
            return [[] for _ in jobs]

        def work(chunk):
            j, start, env, calls = chunk
            for k, r in enumerate(self._run_chunk(env, calls, stop_on_failure)):
                out[j][start + k] = r

        if len(chunks) == 1 or self.workers == 1:
            for chunk in chunks:
                work(chunk)
        else:
            with ThreadPoolExecutor(max_workers=self.workers) as ex:
                list(ex.map(work, chunks))
        return out  # type: ignore[return-value]

    def _run_chunk(self, env: EnvFile, calls: list[Call], stop_on_failure: bool = False) -> list[CallResult]:
        self.calls += len(calls)  # asked for (a run statistic; a skipped call counts too)
        results: list[CallResult] = []
        kills = 0
        while len(results) < len(calls):
            # a budgeted call (a reward's score) is never skipped for its neighbours' kills: it
            # would be a correct answer paid 0 in silence
            if kills >= self.limits.give_up_after and calls[len(results)].budget_s is None:
                skipped = CallResult("skipped", None, f"skipped after {kills} killed workers in a row")
                results += [skipped] * (len(calls) - len(results))
                break
            try:
                worker = self._acquire(env)
            except EnvLoadError as exc:
                failed = CallResult("crash", None, f"load: {exc}")
                results += [failed] * (len(calls) - len(results))
                break
            room = max(1, worker.calls_left())  # a fresh worker always takes at least one call
            try:
                got, died = worker.run(calls[len(results) : len(results) + room])
            except Exception as exc:  # never leave a slot taken: that would deadlock the pool
                worker.kill()
                got, died = (
                    [CallResult("crash", None, f"worker reply could not be handled ({type(exc).__name__})")],
                    True,
                )
            except BaseException:
                worker.kill()
                self._release(None, env)
                raise
            self._release(None if died else worker, env)
            results += got
            if stop_on_failure and any(not r.ok for r in got):
                skipped = CallResult("skipped", None, "skipped after a failed call")
                results += [skipped] * (len(calls) - len(results))
                break
            kills = (kills + 1 if len(got) == 1 else 1) if died else 0
        return results


SandboxPool = SandboxWorkers  # the old name, for scripts that import it (tests/test_old_paths.py)
