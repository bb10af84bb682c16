"""Loaded by every Python process of test_train_ranks.py's and test_cluster_train.py's loops
(this folder is put on PYTHONPATH): in a training rank it records, to
$EVOENV_RANK_PROBE/rank-R.jsonl, every file the rank opens for writing or renames into place,
and when it starts and ends `train.save` (the post-training writes and their barrier), with a
digest of the rank's trained weights and, on Ray, the node it ran on. With
$EVOENV_RANK_PROBE_KILL=R, rank R kills itself (SIGKILL) as it reaches `train.save`: a rank lost
after training, before the finished marker. With $EVOENV_RANK_PROBE_HOLD=R, rank R waits there
instead (for the test to kill its node).

A rank of `accelerate launch` has RANK and EVOENV_RANK_PROBE from its start. A Ray Train worker
(Ray's default_worker.py) gets both only when its train function runs (RANK from Ray Train, the
rest from the driver's environment, which evoenv_cli/cluster/train.py forwards), so there the
writes are recorded once both are set, and `train.save` is wrapped when evoenv_cli.stages.train
is first imported."""

import builtins
import hashlib
import importlib.abc
import io
import json
import os
import signal
import sys
import time

_ON_RAY = bool(sys.argv) and sys.argv[0].endswith("default_worker.py")
_TRAIN = "evoenv_cli.stages.train"


def _note(**record):
    rank, probe = os.environ.get("RANK"), os.environ.get("EVOENV_RANK_PROBE")
    if rank is None or not probe:
        return
    with _real_open(os.path.join(probe, f"rank-{rank}.jsonl"), "a", encoding="utf-8") as f:
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


def _digest(trainer) -> str:
    model = trainer.accelerator.unwrap_model(trainer.model)
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()


def _node() -> str | None:
    if not _ON_RAY:
        return None
    import ray

    return ray.get_runtime_context().get_node_id()


def _wrap_save(module):
    real_save = module.save

    def _save(trainer, *args, **kwargs):
        rank = os.environ.get("RANK")
        _note(event="save_start", digest=_digest(trainer), node=_node(), pid=os.getpid())
        if os.environ.get("EVOENV_RANK_PROBE_KILL") == rank:
            os.kill(os.getpid(), signal.SIGKILL)
        while os.environ.get("EVOENV_RANK_PROBE_HOLD") == rank:
            time.sleep(1)
        result = real_save(trainer, *args, **kwargs)
        _note(event="save_end")
        return result

    module.save = _save


class _WrapOnImport(importlib.abc.MetaPathFinder):
    """Wraps `save` as evoenv_cli.stages.train finishes importing (a Ray worker's case)."""

    def find_spec(self, name, path, target=None):
        if name != _TRAIN:
            return None
        sys.meta_path.remove(self)
        try:
            import importlib.util

            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module):
            real_exec(module)
            _wrap_save(module)

        spec.loader.exec_module = exec_module
        return spec


if (os.environ.get("EVOENV_RANK_PROBE") and os.environ.get("RANK") is not None) or _ON_RAY:
    _real_open = builtins.open
    builtins.open = io.open = _open  # pathlib opens through io.open
    os.replace = _moved(os.replace)
    os.rename = _moved(os.rename)
    if _ON_RAY:
        sys.meta_path.insert(0, _WrapOnImport())
    else:
        from evoenv_cli.stages import train as _train

        _wrap_save(_train)
