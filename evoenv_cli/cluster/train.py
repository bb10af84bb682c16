"""The loop's train stage on Ray Train workers (`iterate.cluster: ray`; docs/cluster.md).

`run_context_on_ray` runs `train.workers` workers under Ray Train's `TorchTrainer`, on a
placement group spread over the cluster's nodes (one GPU each where the cluster has GPUs, else
one CPU each). Ray Train gives each worker torchrun's environment (RANK, LOCAL_RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and a torch process group (NCCL on GPUs, gloo on CPUs);
each worker then runs `evoenv run-context CONTEXT`, the command `accelerate launch` runs on one
machine, in its own process. accelerate's PartialState finds the process group already there
and uses it, so TRL, accelerate and the shipped ZeRO/FSDP configs (`train.accelerate_config`,
turned into the environment `accelerate launch --config_file` gives its ranks, by accelerate's
own code) behave as under `accelerate launch`: rank 0 alone writes, the marker comes last.

A worker that fails (an exception, a killed process, a lost node) fails the whole run: Ray
Train is told not to retry (`max_failures=0`), the call returns 1 and no marker is written; the
loop's rerun resumes from the stage's own checkpoints, as on one machine.

The workers' output (stdout and stderr, file descriptors included, so a library's C-level
prints come too) travels to the driver through a Ray queue, each line prefixed by its rank, and
the driver writes it to LOG_PATH and to its own stderr, as `loop.stream` does for a child. Ray
Train's own records (`RunConfig.storage_path`) go beside the context file, in the run folder.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import queue as queuelib
import sys
import threading
import time
from pathlib import Path

from evoenv_cli.cluster import alive_nodes
from evoenv_cli.errors import InputError

RAY_TRAIN_DIR = "train-ray"  # round-NN/train-ray/: Ray Train's run records (not the model: that is train/)
# the driver's settings the workers need for the run to be the one the driver would launch
# (offline hubs, caches, tokenizer threads, evoenv's own switches); not PATH or CUDA_VISIBLE_DEVICES,
# which belong to each node
FORWARDED_PREFIXES = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TOKENIZERS_", "EVOENV_", "WANDB_", "TRL_")


def forwarded_env(environ: dict | None = None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if k.startswith(FORWARDED_PREFIXES)}


def accelerate_env(config: str, workers: int, nodes: int) -> dict[str, str]:
    """The ACCELERATE_*/FSDP_* environment `accelerate launch --config_file CONFIG` gives each of
    its ranks (zero2, zero3, fsdp or a YAML file), computed by accelerate's own launch code for
    `workers` processes over `nodes` machines. Under Ray Train no launcher runs, so each worker
    sets these before accelerate reads them; the process group is Ray's."""
    if not config:
        return {}
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env

    from evoenv_cli.accelerate_configs import config_path

    argv = ["--config_file", str(config_path(config)), "--num_processes", str(workers)]
    argv += ["--num_machines", str(nodes), "--machine_rank", "0", "--main_process_ip", "127.0.0.1"]
    argv += ["--main_process_port", "29500", "run-context"]
    with contextlib.redirect_stdout(sys.stderr):
        args, defaults, mixed_precision_from_config = _validate_launch_command(launch_command_parser().parse_args(argv))
    if args.use_deepspeed:  # what accelerate's launch_command sets before deepspeed_launcher
        fields = list(defaults.deepspeed_config) if defaults else []
        args.deepspeed_fields_from_accelerate_config = ",".join(
            fields + (["mixed_precision"] if mixed_precision_from_config else [])
        )
        _, env = prepare_deepspeed_cmd_env(args)
    else:
        env = prepare_multi_gpu_env(args)
    return {k: v for k, v in env.items() if k.startswith(("ACCELERATE_", "FSDP_"))}


def check_room(ray, workers: int) -> bool:
    """Whether the cluster has GPUs (the workers take one each) and room for `workers` of them;
    a request it cannot place is a one-line InputError here, not a run that waits forever."""
    total = ray.cluster_resources()
    use_gpu = total.get("GPU", 0) > 0
    kind, have = ("GPU", total.get("GPU", 0)) if use_gpu else ("CPU", total.get("CPU", 0))
    if have < workers:
        raise InputError(
            f"train.workers: {workers} Ray Train workers need {workers} {kind}s, "
            f"but the cluster has {have:g} (ray status shows its resources)"
        )
    return use_gpu


def run_context_on_ray(ray, context_path: Path, workers: int, log_path: Path) -> int:
    """Train from CONTEXT_PATH (stage.context_record) on `workers` Ray Train workers of the
    cluster `ray` is joined to; 0 when every worker finished, 1 when any failed."""
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer
    from ray.util.queue import Queue
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    context_path = Path(context_path).resolve()
    record = json.loads(context_path.read_text(encoding="utf-8"))  # stage.context_record's
    use_gpu = check_room(ray, workers)
    nodes = len(alive_nodes(ray))
    here = ray.get_runtime_context().get_node_id()
    lines = Queue(
        actor_options={"num_cpus": 0, "scheduling_strategy": NodeAffinitySchedulingStrategy(here, soft=False)}
    )
    config = {
        "context": str(context_path),
        "cwd": os.getcwd(),
        "env": {
            **forwarded_env(),
            **accelerate_env(record["recipe"]["train"].get("accelerate_config", ""), workers, nodes),
        },
        "lines": lines,
    }
    storage = context_path.parent / RAY_TRAIN_DIR
    trainer = TorchTrainer(
        _worker,
        train_loop_config=config,
        scaling_config=ScalingConfig(num_workers=workers, use_gpu=use_gpu, placement_strategy="SPREAD"),
        run_config=RunConfig(
            name=time.strftime("train-%Y%m%d-%H%M%S"),
            storage_path=str(storage),
            failure_config=FailureConfig(max_failures=0),  # a lost worker fails the stage; the rerun resumes
        ),
    )
    with Path(log_path).open("ab") as log:
        log.write(
            f"$ ray train: {workers} worker(s), {'GPU' if use_gpu else 'CPU'}, run-context {context_path}\n".encode()
        )
        log.flush()
        done = threading.Event()
        copier = threading.Thread(target=_copy_lines, args=(lines, log, done), daemon=True)
        copier.start()
        try:
            trainer.fit()
            code = 0
        except Exception as exc:  # a worker's error, a lost node: the stage failed, its output is above
            from ray.train import TrainingFailedError

            if not isinstance(exc, TrainingFailedError):
                raise
            code = 1
            first = str(exc).strip().splitlines()
            _write(log, f"ray train: failed: {' '.join(first[:3])[:2000]}\n".encode())
        finally:
            done.set()
            copier.join(timeout=30)
            with contextlib.suppress(Exception):
                lines.shutdown()
    return code


def _write(log, chunk: bytes) -> None:
    log.write(chunk)
    log.flush()
    sys.stderr.buffer.write(chunk)
    sys.stderr.flush()


def _copy_lines(lines, log, done: threading.Event) -> None:
    """The driver's side: the workers' output from the queue into the log and this stderr,
    until `done` and the queue is empty."""
    while True:
        try:
            _write(log, lines.get(timeout=0.5))
        except queuelib.Empty:
            if done.is_set():
                return
        except Exception:  # the queue's actor is gone: nothing more will come
            return


def _worker(config: dict) -> None:
    """One Ray Train worker: torchrun's environment and the process group are Ray's; this runs
    the stage of the Context file in this process, through the `stage.execute` that `evoenv
    run-context` calls in each rank under `accelerate launch`, its output sent to the driver.
    An exception fails the run (Ray Train reports it, the driver returns 1)."""
    os.environ.update(config["env"])
    os.chdir(config["cwd"])
    rank = int(os.environ.get("RANK", "0"))
    from evoenv_cli import stage, stages

    with _output_to(config["lines"], rank):
        where = config["context"]
        record = json.loads(Path(where).read_text(encoding="utf-8"))
        st, ctx = stage.context_from_record(record, where, stages.get)
        ctx.say = ctx.note = lambda message: print(message, flush=True)
        summary = stage.execute(st, ctx).value
        if rank == 0 and isinstance(summary, dict) and "steps" in summary:
            print(f"{st.name}: {summary['steps']} steps, mean reward {summary.get('mean_reward')} -> {ctx.out}")


@contextlib.contextmanager
def _output_to(lines, rank: int):
    """This process's stdout and stderr (the file descriptors, so C-level writes come too) into
    a pipe whose lines go to the driver's queue, each prefixed `[rank R] `; restored after."""
    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe()
    saved = os.dup(1), os.dup(2)
    os.dup2(write, 1)
    os.dup2(write, 2)
    os.close(write)
    streams, printer = (sys.stdout, sys.stderr), builtins.print
    builtins.print = _print  # not Ray Train's print, which copies each line to its logger (a second copy here)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    reader = threading.Thread(target=_send_lines, args=(read, lines, f"[rank {rank}] ".encode()), daemon=True)
    reader.start()
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = streams
        builtins.print = printer
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        reader.join(timeout=30)  # EOF once the pipe's last writer (fds 1 and 2 here) is gone


def _print(*objects, sep=" ", end="\n", file=None, flush=False) -> None:
    """Python's print, for a worker whose `print` Ray Train replaced."""
    file = sys.stdout if file is None else file
    file.write((" " if sep is None else sep).join(map(str, objects)) + ("\n" if end is None else end))
    if flush:
        file.flush()


def _send_lines(fd: int, lines, prefix: bytes) -> None:
    rest = b""
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while chunk := pipe.read(1 << 16):
            *whole, rest = (rest + chunk).split(b"\n")
            if whole:
                lines.put(b"".join(prefix + line + b"\n" for line in whole))
    if rest:
        lines.put(prefix + rest + b"\n")
