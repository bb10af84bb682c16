"""DeepSpeed ZeRO-3 on two CPU ranks (gloo), for real: the trained-parameter count `train` and
`distill` record reads each parameter's `ds_numel` and is exact, where the plain count reads the
empty placeholders every rank holds outside a forward (0: a 0-bit description length in
`bound`), and a partitioned weight is an empty tensor, which is why TinyLoRA's SVD and a rank-0
merge are refused under ZeRO-3 (training/precision.py). Needs `pip install -e '.[deepspeed]'`.
"""

import json
import os
import socket
import subprocess
import sys

import pytest
from conftest import ROOT

PROBE = ROOT / "tests" / "support" / "zero3_probe.py"


@pytest.mark.slow
def test_zero3_on_two_cpu_ranks_counts_trained_parameters_exactly(tmp_path):
    pytest.importorskip("deepspeed", reason="DeepSpeed is in the [deepspeed] extra")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "OUT_DIR": str(tmp_path)}
    done = subprocess.run([*argv, str(PROBE)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank-*.json"))]
    assert sorted(r["rank"] for r in ranks) == [0, 1]
    for r in ranks:
        assert r["counted"] == r["whole"] == 106_880  # exact, on every rank
        assert r["local_numel"] == 0  # what the count read before: every parameter partitioned away
        assert r["q_proj_local_shape"] == [0] and r["q_proj_ds_shape"] == [64, 64]  # an SVD would see nothing
    assert ranks[0]["loss"] > 0
