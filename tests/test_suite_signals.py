"""The suite's children take Ctrl-C however the suite was launched: one started as a background
job (no job control) inherits SIGINT ignored, and the Ctrl-C tests (test_iterate.py) then sent
a signal their evoenv never saw. conftest.py restores it for every child."""

import shlex
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CHILD = "import signal; print('ignored' if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else 'taken')"


def in_background(code: str) -> str:
    """`code`'s output, run as a background job of a bash without job control (as CI scripts run)."""
    line = f"{shlex.quote(sys.executable)} -c {shlex.quote(code)} & wait"
    return subprocess.run(["bash", "-c", line], capture_output=True, text=True, cwd=TESTS).stdout.strip()


def test_a_child_of_a_suite_started_in_the_background_takes_ctrl_c():
    assert in_background(CHILD) == "ignored"  # the launch this guards against
    parent = f"import conftest, subprocess, sys; subprocess.run([sys.executable, '-c', {CHILD!r}])"
    assert in_background(parent) == "taken"
