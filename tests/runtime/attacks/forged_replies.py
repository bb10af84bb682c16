"""Attack: write a hostile reply straight into the worker's reply channel, then exit. Code in a
worker owns that channel (a forged "score 1.0" cannot be told apart and is caught elsewhere),
but no reply, however malformed, may crash the parent."""

import fcntl
import os
import stat

NAME = "attack_forged_replies"

DEPTH = 200_000
FORGERIES = {
    "not_json": b"this is not json\n",
    "not_object": b"[1, 2, 3]\n",
    "nested_list": b"[" * DEPTH + b"]" * DEPTH + b"\n",
    "nested_value": b'{"ok": true, "type": "dict", "value": ' + b'{"a": ' * DEPTH + b"1"
    + b"}" * DEPTH + b"}\n",
    "big_int_value": b'{"ok": true, "type": "int", "value": 1' + b"0" * 400 + b"}\n",
    "big_int_seconds": b'{"ok": true, "type": "float", "value": 1.5, "t": 1' + b"0" * 400 + b"}\n",
    "big_float_value": b'{"ok": true, "type": "float", "value": 1e400}\n',
    "wrong_type_tag": b'{"ok": true, "type": "dict", "value": 1.0}\n',
    "error_not_str": b'{"ok": false, "error": {"x": 1}}\n',
    # 900 levels: json.loads takes it, a recursive walk or json.dumps in a thread may not
    "nested_900": b'{"ok": true, "type": "dict", "value": ' + b'{"a": ' * 900 + b"1" + b"}" * 900 + b"}\n",
    "nested_900_list": b'{"ok": true, "type": "dict", "value": {"a": ' + b"[" * 900 + b"]" * 900 + b"}}\n",
    "surrogate_error": b'{"ok": false, "error": "ValueError: \\ud800 lone"}\n',
    "invalid_utf8": b'{"ok": true, "type": "str", "value": "\xff\xfe"}\n',
}


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
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    if answer in FORGERIES:
        os.write(_reply_channel(), FORGERIES[answer])
        os._exit(0)  # leave no genuine reply behind the forged one
    return 1.0 if answer == solve(instance) else 0.0
