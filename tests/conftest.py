import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "seeds"


@pytest.fixture
def evoenv(tmp_path):
    """Run the real `evoenv` command; returns CompletedProcess with text output."""

    def run(*args, input=None, cwd=None):
        exe = shutil.which("evoenv", path=str(Path(sys.executable).parent)) or "evoenv"
        return subprocess.run([exe, *map(str, args)], capture_output=True, text=True,
                              input=input, cwd=cwd or tmp_path, timeout=300)

    return run
