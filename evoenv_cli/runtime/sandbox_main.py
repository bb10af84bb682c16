"""The program that runs inside the sandbox: it confines itself, imports one environment
file once, then answers batches of calls over a private JSON-lines channel.

Standard library only: it runs under whatever interpreter the sandbox can see. It is not a
security boundary on its own (code it imports shares its process and can forge replies); the
parent re-checks every value, and `sandbox.py` provides the walls.
"""

import ctypes
import io
import json
import math
import os
import resource
import signal
import sys
import time

# seccomp actions and comparison operators (libseccomp's seccomp.h)
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_ERRNO_BASE = 0x00050000
SCMP_CMP_MASKED_EQ = 7
SCMP_CMP_NE = 1
PR_SET_DUMPABLE = 4
CLONE_THREAD = 0x00010000
EPERM = 1
ENOSYS = 38

# Syscalls an environment has no use for; each returns EPERM. fork/vfork and clone without
# CLONE_THREAD stop new processes even where RLIMIT_NPROC is ignored (uid 0 in a user namespace).
DENIED_SYSCALLS = (
    "fork",
    "vfork",
    "execve",
    "execveat",
    "kill",
    "tkill",
    "socket",
    "socketpair",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_open",
    "pidfd_send_signal",
    "pidfd_getfd",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "setuid",
    "setgid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setgroups",
    "setsid",
    "setpgid",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "userfaultfd",
    "personality",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "mknod",
    "mknodat",
    "shmget",
    "shmat",
    "shmdt",
    "shmctl",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
)

# Landlock (linux/landlock.h): syscall numbers are the same on every architecture.
LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
FS_EXECUTE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 2, 1 << 3
FS_ALL_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
NET_ALL = (1 << 0) | (1 << 1)  # bind and connect TCP, from ABI 4
SCOPE_ALL = (1 << 0) | (1 << 1)  # abstract unix sockets and signals, from ABI 6


class _ScmpArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def install_seccomp(libpath):
    """Load a deny-list filter through libseccomp (by path: no ld.so.cache in the jail)."""
    lib = ctypes.CDLL(libpath)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ScmpArgCmp),
    ]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")

    def rule(name, errno, cmps=()):
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:
            return
        arr = (_ScmpArgCmp * max(1, len(cmps)))(*cmps)
        rc = lib.seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO_BASE | errno, nr, len(cmps), arr)
        if rc < 0:
            raise OSError(f"seccomp rule for {name} failed ({rc})")

    for name in DENIED_SYSCALLS:
        rule(name, EPERM)
    # clone3 hides its flags in a struct: refuse it so libc falls back to clone(2).
    rule("clone3", ENOSYS)
    rule("clone", EPERM, [_ScmpArgCmp(0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0)])
    me = os.getpid()
    for name in ("tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        rule(name, EPERM, [_ScmpArgCmp(0, SCMP_CMP_NE, me, 0)])
    rc = lib.seccomp_load(ctx)
    lib.seccomp_release(ctx)
    if rc < 0:
        raise OSError(f"seccomp_load failed ({rc})")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def restrict_filesystem(rules):
    """Landlock: from here on this process reads only beneath rules["read"], writes nowhere,
    connects nowhere, and signals or ptraces no process outside its own domain."""
    abi = int(rules["abi"])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    attr = _RulesetAttr(
        FS_ALL_BY_ABI.get(abi, FS_ALL_BY_ABI[5]), NET_ALL if abi >= 4 else 0, SCOPE_ALL if abi >= 6 else 0
    )
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    ruleset = libc.syscall(LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path in rules["read"]:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path this host does not have
            is_dir = os.path.isdir(path)
            access = FS_EXECUTE | FS_READ_FILE | (FS_READ_DIR if is_dir else 0)
            beneath = _PathBeneathAttr(access, fd)
            rc = libc.syscall(
                LANDLOCK_ADD_RULE,
                ctypes.c_int(ruleset),
                ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
                ctypes.byref(beneath),
                ctypes.c_uint32(0),
            )
            os.close(fd)
            if rc < 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)


def die_with_parent():
    """PR_SET_PDEATHSIG: a worker whose evoenv process is killed goes with it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def set_limits(limits):
    mb = 1024 * 1024
    pairs = [
        (resource.RLIMIT_AS, limits["memory_mb"] * mb),
        (resource.RLIMIT_FSIZE, limits["file_size_mb"] * mb),
        (resource.RLIMIT_NOFILE, limits["open_files"]),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_CPU, limits["worker_cpu_s"]),
        (resource.RLIMIT_NPROC, 0),
    ]
    for which, value in pairs:
        resource.setrlimit(which, (value, value))


class _CountingSink(io.TextIOBase):
    """Stands in for stdout/stderr: counts what an environment prints, keeps none of it."""

    def __init__(self):
        self.chars = 0

    def writable(self):
        return True

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str")
        self.chars += len(s)
        return len(s)


def _one_line(exc):
    text = f"{type(exc).__name__}: {exc}"
    text = " ".join(text.split())
    return text[:300]


def _encode(fn, value, caps):
    """Value -> (json-able payload, type tag) or raise ValueError with the reason."""
    t = type(value)
    if fn in ("generate", "generate_from"):
        if t is not dict:
            raise ValueError(f"{fn} returned {t.__name__}, expected dict")
        try:
            text = json.dumps(value, allow_nan=False, sort_keys=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise ValueError(f"{fn} returned a dict that is not JSON-serializable: {exc}") from None
        if len(text) > caps["max_instance_bytes"]:
            raise ValueError(f"instance is {len(text)} bytes, over {caps['max_instance_bytes']}")
        return json.loads(text), "dict"
    if fn in ("prompt", "solve"):
        if t is not str:
            raise ValueError(f"{fn} returned {t.__name__}, expected str")
        cap = caps["max_prompt_chars"] if fn == "prompt" else caps["max_answer_chars"]
        if len(value) > cap:
            raise ValueError(f"{fn} returned {len(value)} characters, over {cap}")
        return value, "str"
    if fn == "score":
        if t is float:
            return (value if math.isfinite(value) else repr(value)), "float"
        if t is int:
            return value, "int"
        raise ValueError(f"score returned {t.__name__}, expected float")
    raise ValueError(f"unknown call {fn}")


class _OutOfBudget(BaseException):
    """Raised into a call that spent its CPU budget (a BaseException, so that an environment's
    `except Exception` does not swallow it; one that swallows it anyway is timed out all the same)."""


class _Budget:
    """A per-call CPU budget: a wall-clock timer that, when it fires, compares the process's CPU
    time with the budget, raises `_OutOfBudget` into the call once it is spent, and otherwise
    re-arms for what is left (a call the host preempted is not charged for the wait). CPU time,
    not wall time, so a loaded host never times out a correct answer; a wall timer, because the
    kernel's CPU timers fire only at its ticks."""

    def __init__(self):
        self.active = False
        self.spent = False
        self.limit = 0.0
        self.start = 0.0
        signal.signal(signal.SIGALRM, self._fire)

    def arm(self, seconds):
        self.active, self.spent, self.limit = True, False, seconds
        self.start = time.thread_time()
        signal.setitimer(signal.ITIMER_REAL, seconds)

    def disarm(self):
        self.active = False
        signal.setitimer(signal.ITIMER_REAL, 0)

    def _fire(self, signum, frame):
        if not self.active:
            return
        left = self.limit - (time.thread_time() - self.start)
        if left > 0 and not self.spent:
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.0005))
            return
        self.spent = True
        signal.setitimer(signal.ITIMER_REAL, 0.002)  # again, into whatever swallowed the last one
        raise _OutOfBudget()


def _meta(module, calls):
    """Which of the contract's functions (`calls`, sent by the parent from runtime/contract.py)
    the module defines; everything else the parent reads from the source itself (it trusts no
    claim from in here)."""
    return {"callables": sorted(n for n in calls if callable(getattr(module, n, None)))}


def main():
    config = json.loads(sys.argv[1])
    chan_in = os.fdopen(os.dup(0), "rb", buffering=0)
    chan_out = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    sink = _CountingSink()
    sys.stdout = sys.stderr = sink
    reader = io.BufferedReader(chan_in, buffer_size=1 << 16)

    def send(obj):
        chan_out.write(json.dumps(obj).encode() + b"\n")

    caps = config["caps"]
    die_with_parent()
    try:
        set_limits(config["limits"])
        if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise OSError("prctl(PR_SET_DUMPABLE, 0) failed")
        if config.get("landlock"):
            restrict_filesystem(config["landlock"])
        if config.get("seccomp_lib"):
            install_seccomp(config["seccomp_lib"])
    except Exception as exc:  # a sandbox that cannot confine itself must not run anything
        send({"ready": False, "error": "confinement failed: " + _one_line(exc)})
        return
    import importlib
    import importlib.util

    if config.get("packages_path"):  # an imported environment's granted, read-only packages
        os.environ.update(
            OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg", MPLCONFIGDIR="/tmp"
        )
        sys.path.insert(0, config["packages_path"])
    sys.setrecursionlimit(config.get("recursion_limit", 10000))
    for name in config.get("preload") or ():  # granted packages: their import is not the file's
        try:
            importlib.import_module(name)
        except BaseException:
            pass  # the file's own import of it fails the same way, and says so
    # The parent times the file's import from this line's arrival to the ready line's: nothing
    # of the file has run yet, so neither its start nor a slow interpreter start counts.
    send({"importing": True})
    started = time.perf_counter()
    try:
        spec = importlib.util.spec_from_file_location("evoenv_environment", config["env_path"])
        module = importlib.util.module_from_spec(spec)
        sys.modules["evoenv_environment"] = module
        spec.loader.exec_module(module)
        meta = _meta(module, config["calls"])
    except BaseException as exc:
        send({"ready": False, "error": "import failed: " + _one_line(exc), "out": sink.chars})
        return
    send({"ready": True, "meta": meta, "t": time.perf_counter() - started, "out": sink.chars})
    budget = _Budget()

    while True:
        line = reader.readline()
        if not line:
            return
        request = json.loads(line)
        for call in request["calls"]:
            fn, args = call["fn"], call["args"]
            sink.chars = 0
            limit = call.get("budget")
            budget.spent = False
            t0 = time.perf_counter()
            try:
                func = getattr(module, fn)
                if limit:
                    budget.arm(limit)
                try:
                    value = func(*args)
                finally:
                    budget.disarm()
                elapsed = time.perf_counter() - t0
                if budget.spent:  # it swallowed the budget's exception and returned anyway
                    raise _OutOfBudget()
                payload, tag = _encode(fn, value, caps)
                reply = {"ok": True, "value": payload, "type": tag}
            except BaseException as exc:
                elapsed = time.perf_counter() - t0
                reply = {"ok": False, "error": _one_line(exc)}
                if budget.spent:
                    reply = {"ok": False, "error": f"ran out of its {limit * 1000:.1f} ms CPU budget", "budget": True}
                elif not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit, GeneratorExit...
                    reply["escaped"] = True
            reply["t"] = elapsed
            reply["out"] = sink.chars
            reply["cpu"] = time.process_time()
            try:
                send(reply)
            except (TypeError, ValueError) as exc:
                send({"ok": False, "error": _one_line(exc), "t": elapsed, "out": sink.chars})


if __name__ == "__main__":
    main()
