"""Attack: reach libc through ctypes: fork(), system() creating instance["marker"], and the
raw fork syscall. Returns 1.0 if any of them ran, raises with the refusal otherwise."""

import ctypes
import os
import platform

NAME = "attack_ctypes_escape"


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    libc = ctypes.CDLL(None, use_errno=True)
    if answer == "fork":
        pid = libc.fork()
    elif answer == "raw_fork":
        if platform.machine() != "x86_64":
            raise RuntimeError("refused: probe needs x86_64")
        libc.syscall.restype = ctypes.c_long
        pid = libc.syscall(ctypes.c_long(57))  # SYS_fork
    elif answer == "system":
        rc = libc.system(("/usr/bin/touch " + instance["marker"]).encode())
        if rc == 0:
            return 1.0
        raise RuntimeError(f"refused: system returned {rc} errno {ctypes.get_errno()}")
    else:
        return 1.0 if answer == solve(instance) else 0.0
    if pid == 0:
        libc._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)
        return 1.0
    raise RuntimeError(f"refused: fork returned {pid} errno {ctypes.get_errno()}")
