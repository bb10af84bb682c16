"""Hostile or honest members of a generated family, built over a seed, and their verdicts under a
chosen list of validation checks (test_measured_pay, test_hedge)."""

from __future__ import annotations

import re
from pathlib import Path

from evoenv_cli.checks import context
from evoenv_cli.checks.registry import CHECKS
from evoenv_cli.config import ValidateConfig
from evoenv_cli.envfile import EnvFile
from evoenv_cli.runtime.workers import SandboxWorkers


def variant(path: Path, name: str, tail: str) -> str:
    """The file at `path` under NAME `name`, its score renamed `_strict_score` and `tail` added."""
    source = path.read_text()
    source = re.sub(r'^NAME = "[^"]+"', f'NAME = "{name}"', source, count=1, flags=re.M)
    assert "def score(" in source and "_strict_score" not in source
    return source.replace("def score(", "def _strict_score(") + tail


def env_at(folder: Path, name: str, source: str) -> EnvFile:
    """`source` written to folder/NAME.py, as an environment file."""
    path = folder / f"{name}.py"
    path.write_text(source)
    return EnvFile.from_path(path)


def verdict(
    env: EnvFile, cfg: ValidateConfig, workers: SandboxWorkers, checks: tuple[str, ...]
) -> tuple[str, str | None, str]:
    """(the rejecting check or "admitted", its probe, its reason) after `checks` in order."""
    checker = context.Checker(env, cfg, workers, workers)
    try:
        for name in checks:
            CHECKS[name].run(checker)
    except context.Rejected as rej:
        return rej.stage, rej.probe, rej.reason
    return "admitted", None, ""
