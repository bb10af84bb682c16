"""Attack: forge the metadata the parent reads. NAME is reassigned to a 3 MB string after its
literal, and at import a forged 'ready' line claims a NAME that is a list, other TAGS, another
ANSWER_TYPE and a 3 MB docstring with a lone surrogate, ahead of the genuine one. The parent
must take all of these from the source, not from the worker."""

import fcntl
import os
import stat

NAME = "attack_forged_meta"
TAGS = ["honest"]
ANSWER_TYPE = "int"
NAME = "n" * 3_000_000  # noqa: F811 (the attack: a later, huge NAME)


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


os.write(_reply_channel(), b'{"ready": true, "t": 0.0, "out": 0, "meta": {"NAME": ["forged", "list"], '
         b'"TAGS": ["forged"], "ANSWER_TYPE": "list[str]", "INPUT_TYPE": "int", "doc": "\\ud800'
         + b"x" * 3_000_000 + b'", "callables": ["generate", "prompt", "solve", "score", "evil"]}}\n')


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    return 1.0 if answer == str(instance["n"]) else 0.0
