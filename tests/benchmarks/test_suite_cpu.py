"""`make test-cpu`'s plugin (benchmarks/suite_cpu.py) charges a test the CPU of a process it
started and detached, which rusage never sees: here a double fork in a session of its own,
as `ray start` leaves its nodes."""

import json
import os
import subprocess
import sys
import textwrap

from conftest import ROOT

BURNER = textwrap.dedent(
    """
    import os, subprocess, sys, time

    def test_detached_work(tmp_path):
        done = tmp_path / "done"
        code = (
            "import os, time\\n"
            "if os.fork(): os._exit(0)\\n"  # the grandchild, reparented away from this test
            "t = time.process_time()\\n"
            "while time.process_time() - t < 1.0: pass\\n"
            f"open({str(done)!r}, 'w').close()\\n"
        )
        subprocess.run([sys.executable, "-c", code], start_new_session=True, check=True)
        deadline = time.monotonic() + 60
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert done.exists()
    """
)


def test_a_detached_process_is_charged_to_the_test_that_started_it(tmp_path):
    (tmp_path / "test_burner.py").write_text(BURNER)
    out = tmp_path / "rows"
    env = {**os.environ, "EVOENV_TEST_CPU_OUT": str(out), "PYTHONPATH": str(ROOT / "benchmarks")}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "suite_cpu", "-p", "no:cacheprovider", "test_burner.py"]
    r = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (row,) = [json.loads(x) for f in out.glob("*.jsonl") for x in f.read_text().splitlines()]
    assert row["id"] == "test_burner.py::test_detached_work"
    if row["cgroup"]:
        assert row["cpu_s"] >= 0.9, row  # the grandchild's second, never reaped by the test
    else:  # no cgroup here (no root): rusage, which says so, and misses it
        assert "no cgroup could be made here" in r.stderr
    summary = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "suite_cpu.py"), str(out)], capture_output=True, text=True
    )
    assert summary.returncode == 0 and "1 tests" in summary.stdout and "test_detached_work" in summary.stdout
