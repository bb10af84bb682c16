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


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A tiny random-weight chat model built once per test session (no downloads)."""
    from evoenv_cli.llm.tiny import build_tiny_model

    path = tmp_path_factory.mktemp("tiny") / "model"
    build_tiny_model(path, seed=0)
    return path


class ScriptedBackend:
    """A stand-in LLM for testing stage logic: `reply(text, prompt_id, j)` writes each
    completion. Never the only test of a stage: each also runs on a real backend."""

    name = "scripted"
    model = "scripted"

    def __init__(self, reply):
        self.reply = reply
        self.calls: list[list] = []

    def generate(self, prompts, sampling, *, prompt_ids=None):
        from evoenv_cli.llm import Completion, Generation

        ids = list(prompt_ids) if prompt_ids is not None else list(range(len(prompts)))
        self.calls.append([p[-1]["content"] for p in prompts])
        out = []
        for conv, pid in zip(prompts, ids):
            completions, error = [], None
            for j in range(sampling.n):
                text = self.reply(conv[-1]["content"], pid, j)
                if text is None:
                    completions.append(Completion("", 0, "error"))
                    error = "scripted failure"
                else:
                    completions.append(Completion(text, len(text.split()), "stop"))
            out.append(Generation(completions, 10, error))
        return out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def close(self):
        pass
