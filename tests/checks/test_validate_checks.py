"""Validation checks are records in `CHECKS` (evoenv_cli/checks/registry.py), each registered by
its own module of evoenv_cli/checks/: the order they run in, the stage names a verdict can
carry and the admission summary's funnel all come from there, so a new check is one new
module ending with a `register` call (plus a config threshold, if it has one). The extra checks here are real
ones, run by `validate.run` in the real sandbox on real files."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT
from test_validate import GOOD

from evoenv_cli import artifacts
from evoenv_cli.checks.context import Checker, Rejected
from evoenv_cli.checks.registry import CHECKS, Check, checks, register, stage_names
from evoenv_cli.config import RuntimeConfig, ValidateConfig
from evoenv_cli.stages import validate

BUILT_IN = (
    "static",
    "load",
    "run",
    "determinism",
    "diversity",
    "reference",
    "discrimination",
    "hedge",
    "constant_answer",
    "leak",
    "budget",
)


def env_source(name: str, prompt_tail: str = "") -> bytes:
    """test_validate's good environment under another NAME, its prompt made longer."""
    return GOOD.replace(b'"ok_env"', f'"{name}"'.encode()).replace(b'"n?"', f'"n?{prompt_tail}"'.encode())


def test_the_registry_is_the_one_list_of_checks():
    assert validate.STAGES == stage_names() == BUILT_IN  # the order verdicts have always had
    assert [c.name for c in checks(sandboxed=False)] == ["static"]
    assert [c.name for c in checks(sandboxed=True)] == list(BUILT_IN[1:])
    for check in CHECKS.values():
        assert check.guards.strip() and "\n" not in check.guards, check.name


@pytest.mark.parametrize(
    "first", ["evoenv_cli.checks.registry", "evoenv_cli.checks.leak", "evoenv_cli.stages.validate"]
)
def test_each_check_module_registers_itself_whatever_is_imported_first(first):
    """Importing the registry imports every module of evoenv_cli/checks/, so a check is one new
    file there; a check module imported before the registry registers itself all the same."""
    code = (
        f"import importlib; importlib.import_module({first!r}); "
        "from evoenv_cli.checks.registry import CHECKS, stage_names; "
        "print(','.join(stage_names())); "
        "print(','.join(sorted({c.name: c.run.__module__ for c in CHECKS.values() if c.name in ('static', 'leak', 'budget')}.values())))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    names, modules = out.splitlines()
    assert tuple(names.split(",")) == BUILT_IN
    assert modules.split(",") == [f"evoenv_cli.checks.{m}" for m in ("budget", "leak", "static")]


@pytest.mark.parametrize(
    "bad, needle",
    [
        (Check("leak", "again", CHECKS["leak"].run, 999), "already registered"),
        (Check("admitted", "the verdict word", CHECKS["leak"].run, 999), "already registered"),
        (Check("twin", "same place as budget", CHECKS["budget"].run, 100), "both have order 100"),
        (Check("late_source", "after load", CHECKS["static"].run, 25, sandboxed=False), "order must be below 'load'"),
        (Check("early_sandboxed", "before static", CHECKS["load"].run, 5), "order must be below"),
    ],
)
def test_register_refuses_a_check_that_would_break_the_order(bad, needle):
    with pytest.raises(ValueError, match=needle):
        register(bad)
    assert stage_names() == BUILT_IN


@pytest.fixture
def extra_checks():
    """Two checks a project might add: one that reads the source alone (no TODO left in a
    file), one that runs in the sandbox's order between leak and budget (prompts of bounded
    length), which also records what the checks before and after it had measured."""
    seen: list[dict] = []

    def no_todo(c: Checker) -> None:
        if b"TODO" in c.env.source:
            raise Rejected("no_todo", "the file still says TODO")

    def prompt_length(c: Checker) -> None:
        seen.append(dict(c.m))
        longest = max(c.insts, key=lambda i: len(i.text))
        c.m["prompt_chars_max"] = len(longest.text)
        if len(longest.text) > 2000:
            raise Rejected(
                "prompt_length",
                f"the prompt at seed {longest.seed} difficulty {longest.difficulty} has "
                f"{len(longest.text)} characters (at most 2000)",
                "long_prompt",
            )

    added = [
        register(Check("no_todo", "no TODO left in the source", no_todo, 15, sandboxed=False)),
        register(Check("prompt_length", "prompts stay under 2000 characters", prompt_length, 95)),
    ]
    try:
        yield seen
    finally:
        for check in added:
            del CHECKS[check.name]
    assert stage_names() == BUILT_IN


def test_an_added_check_runs_in_its_place_and_names_its_verdicts(tmp_path, extra_checks):
    expected = (*BUILT_IN[:1], "no_todo", *BUILT_IN[1:-1], "prompt_length", BUILT_IN[-1])
    assert stage_names() == expected
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "a_fine.py").write_bytes(env_source("a_fine"))
    (lib / "b_todo.py").write_bytes(env_source("b_todo") + b"# TODO: harder levels\n")
    (lib / "c_wordy.py").write_bytes(env_source("c_wordy", " Think about it." * 200))
    (lib / "d_static.py").write_bytes(env_source("d_static").replace(b"import random", b"import os, random"))
    out = artifacts.prepare_out_dir(tmp_path / "out", resume=False, clean=False)
    summary = validate.run(artifacts.EnvLibrary.open(lib), ValidateConfig(), RuntimeConfig(workers=1), out)

    got = {v["file"]: v for v in map(json.loads, (out / "verdicts.jsonl").read_text().splitlines())}
    assert got["a_fine.py"]["admitted"], got["a_fine.py"]["reason"]
    assert got["a_fine.py"]["prompt_chars_max"] == 2  # its measurement lands in the verdict
    assert (got["b_todo.py"]["stage"], got["b_todo.py"]["reason"]) == ("no_todo", "the file still says TODO")
    assert got["b_todo.py"]["name"] == "b_todo" and "wall_s" not in got["b_todo.py"]  # judged before any worker
    wordy = got["c_wordy.py"]
    assert (wordy["stage"], wordy["probe"]) == ("prompt_length", "long_prompt")
    assert wordy["reason"].endswith("(at most 2000) [probe long_prompt]")
    assert got["d_static.py"]["stage"] == "static"  # static still runs first, and decides
    # in its place: after leak had measured, before budget had
    assert extra_checks and all("leak_share" in m and "seconds_at_top_level" not in m for m in extra_checks)
    assert list(summary.rejected_by_stage) == list(expected)
    assert summary.rejected_by_stage == {**dict.fromkeys(expected, 0), "static": 1, "no_todo": 1, "prompt_length": 1}
    assert json.loads((out / "summary.json").read_text())["rejected_by_stage"] == summary.rejected_by_stage
