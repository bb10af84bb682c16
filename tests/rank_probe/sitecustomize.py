"""Loaded by every Python process of test_train_ranks.py's loop (this folder is put on
PYTHONPATH): in a rank of `accelerate launch` (RANK set) it records, to
$EVOENV_RANK_PROBE/rank-R.jsonl, every file the rank opens for writing or renames into place,
and when it starts and ends `train.save` (the post-training writes and their barrier). With
$EVOENV_RANK_PROBE_KILL=R, rank R kills itself (SIGKILL) as it reaches `train.save`: a rank
lost after training, before the finished marker."""

import builtins
import io
import json
import os
import signal
import time

_RANK = os.environ.get("RANK")
_PROBE = os.environ.get("EVOENV_RANK_PROBE")


def _note(**record):
    with _real_open(os.path.join(_PROBE, f"rank-{_RANK}.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps({"t": time.time(), **record}) + "\n")


def _open(file, mode="r", *args, **kwargs):
    if isinstance(file, (str, os.PathLike)) and any(c in mode for c in "wax+"):
        _note(write=os.path.abspath(os.fspath(file)))
    return _real_open(file, mode, *args, **kwargs)


def _moved(real):
    def moved(src, dst, *args, **kwargs):
        _note(write=os.path.abspath(os.fspath(dst)))
        return real(src, dst, *args, **kwargs)

    return moved


if _RANK is not None and _PROBE:
    _real_open = builtins.open
    builtins.open = io.open = _open  # pathlib opens through io.open
    os.replace = _moved(os.replace)
    os.rename = _moved(os.rename)

    from evoenv_cli.stages import train as _train

    _real_save = _train.save

    def _save(*args, **kwargs):
        _note(event="save_start")
        if os.environ.get("EVOENV_RANK_PROBE_KILL") == _RANK:
            os.kill(os.getpid(), signal.SIGKILL)
        result = _real_save(*args, **kwargs)
        _note(event="save_end")
        return result

    _train.save = _save
