"""`make gpu-check` on a machine without a GPU: it runs, says so on one line per GPU step, and
exits 0 (a SKIP is not a failure)."""

import os
import subprocess
import sys

import pytest
from conftest import ROOT

STEPS = [
    "cuda",
    "wheels",
    "model",
    "grpo-lora",
    "memory",
    "grpo-full",
    "memory",
    "drift",
    "zero3",
    "accelerate",
    "vllm",
    "bound",
]


@pytest.mark.slow
def test_gpu_check_on_a_cpu_machine_skips_every_gpu_step_with_a_reason(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: run make gpu-check itself")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--wheels", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [x for x in done.stdout.splitlines() if x.startswith("gpu-check: ") and "done in" not in x]
    assert [x.split()[1] for x in lines] == STEPS
    assert all(x.split()[2] == "SKIP" for x in lines), done.stdout
    assert "no CUDA device (torch " in lines[0] and "torch.cuda.is_available() is False" in lines[0]
    assert "already importable: nothing to install" in lines[1]  # this venv has TRL and datasets
    assert done.stdout.splitlines()[-1].startswith("gpu-check: done in") and "0 failed" in done.stdout
