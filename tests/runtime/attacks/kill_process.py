"""Attack: send SIGKILL to the host process instance["pid"] by kill, killpg, pidfd, tgkill and
rt_sigqueueinfo. Returns 1.0 if the signal was accepted, raises with the refusal otherwise."""

import ctypes
import os
import platform
import signal

NAME = "attack_kill_process"

# (tgkill, rt_sigqueueinfo) syscall numbers
_SYSCALLS = {"x86_64": (234, 129), "aarch64": (131, 138)}


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def _raw(index, *args):
    numbers = _SYSCALLS.get(platform.machine())
    if numbers is None:
        raise RuntimeError("refused: unsupported architecture for this probe")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    rc = libc.syscall(ctypes.c_long(numbers[index]), *args)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def score(instance: dict, answer: str) -> float:
    pid = instance.get("pid", 0)
    try:
        if answer == "kill":
            os.kill(pid, signal.SIGKILL)
        elif answer == "killpg":
            os.killpg(pid, signal.SIGKILL)
        elif answer == "pidfd":
            fd = os.pidfd_open(pid)
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        elif answer == "tgkill":
            _raw(0, ctypes.c_int(pid), ctypes.c_int(pid), ctypes.c_int(signal.SIGKILL))
        elif answer == "sigqueue":
            info = (ctypes.c_int * 32)()
            info[0] = signal.SIGKILL  # si_signo
            info[2] = -1  # si_code = SI_QUEUE
            _raw(1, ctypes.c_int(pid), ctypes.c_int(signal.SIGKILL), info)
        else:
            return 1.0 if answer == solve(instance) else 0.0
    except OSError as exc:
        raise RuntimeError(f"refused: {type(exc).__name__} errno {exc.errno}") from None
    return 1.0
