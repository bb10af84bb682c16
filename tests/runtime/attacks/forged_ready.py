"""Attack: at import time, write a forged 'ready' message into the worker's reply channel
(claiming an import time of 10**400 seconds), then exit. Loading must fail or succeed
cleanly; it must never raise anything but EnvLoadError in the parent."""

import fcntl
import os
import stat

NAME = "attack_forged_ready"


def _reply_channel() -> int:
    for fd in range(3, 64):
        try:
            mode = os.fstat(fd).st_mode
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            continue
        if stat.S_ISFIFO(mode) and flags & os.O_ACCMODE == os.O_WRONLY:
            return fd
    raise RuntimeError("no reply channel found")


os.write(_reply_channel(), b'{"ready": true, "meta": {"NAME": "x"}, "t": 1' + b"0" * 400 + b', "out": 0}\n')
os._exit(0)


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    return 1.0 if answer == solve(instance) else 0.0
