"""Attack: return 50 MB from generate (seed 1), prompt and solve (when instance["huge"]), or
write a 50 MB line straight into the worker's reply channel (score "forge")."""

import fcntl
import os
import stat

NAME = "attack_huge_return"
BIG = 50 * 10**6


def _reply_channel() -> int:
    """The worker's private reply pipe: the write-only FIFO among its descriptors."""
    for fd in range(3, 64):
        try:
            mode = os.fstat(fd).st_mode
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            continue
        if stat.S_ISFIFO(mode) and flags & os.O_ACCMODE == os.O_WRONLY:
            return fd
    raise RuntimeError("no reply channel found")


def generate(seed: int, difficulty: int) -> dict:
    if seed == 1:
        return {"blob": "x" * BIG}
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    if instance.get("huge"):
        return "x" * BIG
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    if instance.get("huge"):
        return "x" * BIG
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    if answer == "forge":
        os.write(_reply_channel(), b"x" * BIG + b"\n")
        os._exit(0)
    return 1.0 if answer == solve(instance) else 0.0
