"""Paths users' configs and code name keep working after a move: verl's
`custom_reward_function.path` (by module, `pkg://evoenv_cli.rewards`, or by file), TRL scripts'
`from evoenv_cli.rewards import EnvReward`, `InputError` under both of its names, what moved
out of stages/dedupe.py (to novelty/) and stages/validate.py (to checks/), and the names given
up so that each says one thing (`SandboxPool`, now `SandboxWorkers`; `runtime/worker.py`, now
`runtime/sandbox_main.py`)."""

import ast
import importlib.util
from pathlib import Path

from conftest import ROOT

from evoenv_cli.integrations import rewards


def test_evoenv_cli_rewards_is_the_integrations_module_s_entry_points():
    import evoenv_cli.rewards as old

    for name in ("compute_score", "reward_func", "env_reward", "EnvReward", "FormatReward", "score_queries"):
        assert getattr(old, name) is getattr(rewards, name), name


def test_verl_s_load_by_file_path_finds_compute_score_in_the_old_file():
    """verl's get_custom_reward_fn loads custom_reward_function.path with
    spec_from_file_location and takes the named function from the module."""
    path = ROOT / "evoenv_cli" / "rewards.py"
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.compute_score is rewards.compute_score


def test_input_error_is_one_class_and_the_package_imports_it_from_errors_only():
    from evoenv_cli import artifacts, errors

    assert artifacts.InputError is errors.InputError
    found = []
    for path in sorted((ROOT / "evoenv_cli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            named = (
                isinstance(node, ast.Attribute) and node.attr == "InputError" and ast.unparse(node.value) != "errors"
            )
            imported = isinstance(node, ast.ImportFrom) and node.module != "evoenv_cli.errors"
            if named or (imported and any(a.name == "InputError" for a in node.names)):
                found.append(f"{Path(path).relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_the_dedupe_scaffold_and_the_validate_registry_keep_their_old_paths():
    from evoenv_cli.checks import registry
    from evoenv_cli.novelty import minhash
    from evoenv_cli.stages import dedupe, validate

    old = ROOT / "evoenv_cli" / "stages" / "dedupe_scaffold.txt"  # a link to novelty/scaffold.txt
    assert old.read_text() == minhash.SHIPPED_SCAFFOLD.read_text() and old.resolve() == minhash.SHIPPED_SCAFFOLD
    assert dedupe.SHIPPED_SCAFFOLD is minhash.SHIPPED_SCAFFOLD
    assert dedupe.write_shipped_scaffold is minhash.write_shipped_scaffold
    assert (validate.Check, validate.CHECKS, validate.register) == (registry.Check, registry.CHECKS, registry.register)


def test_the_sandbox_s_workers_keep_their_old_class_name():
    from evoenv_cli.runtime import workers

    assert workers.SandboxPool is workers.SandboxWorkers


def test_the_sandbox_program_keeps_its_old_module_path():
    from evoenv_cli.runtime import sandbox_main, worker

    assert worker.main is sandbox_main.main
    assert worker.DENIED_SYSCALLS is sandbox_main.DENIED_SYSCALLS
