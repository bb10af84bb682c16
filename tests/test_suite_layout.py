"""Tests mirror the code. A test file sits in the folder of tests/ named for what it tests
(tests/stages/ for evoenv_cli/stages/, tests/seeds/ for seeds/), or at the top of tests/ when it
tests a top-level module (test_config.py: evoenv_cli/config.py) or the whole (CROSS_CUTTING).
What is not a test lives in tests/support/, but for the folders of environment files that ruff
format leaves alone (pyproject.toml). Test files have distinct names: pytest imports each by its
name alone (its default import mode, no __init__.py in the test folders), so two test_x.py in two
folders would collide. This reads the tree, not a list of its files."""

import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest itself needs tomli before 3.11
    import tomli as tomllib

# The test files at the top of tests/ that are about no one module, and why.
CROSS_CUTTING = {
    "answer_rule": "one answer rule in every reward entry point",
    "fast_lane": "the suite's own guard on unmarked slow tests",
    "hostile_inputs": "bad input to every stage, through the command",
    "iterate": "the whole loop, through `evoenv iterate`",
    "iterate_recovery": "a kill at every step of a round",
    "layering": "the import graph of the whole package",
    "level_rule": "one level rule in sample, evaluate and the loop",
    "newcomers": "what the round's line and the report say of newcomers",
    "old_paths": "the old import paths users' configs name",
    "one_home": "one home for each fact, read from every module",
    "readme": "the README and docs/",
    "registries": "what a new stage or operator touches",
    "suite_layout": "this file",
    "suite_signals": "Ctrl-C reaching the suite's children",
}


def data_folders(root: Path) -> list[Path]:
    """The folders of tests/ holding environment files (data: ruff format's excludes)."""
    config = tomllib.loads((root / "pyproject.toml").read_text())
    globs = config["tool"]["ruff"]["format"]["exclude"]
    return [root / g.removesuffix("/**") for g in globs if g.startswith("tests/") and g.endswith("/**")]


def misplaced(root: Path) -> list[str]:
    """One line for each file of root/tests that is out of place."""
    tests, package = root / "tests", root / "evoenv_cli"
    data = data_folders(root)
    files = [p for p in sorted(tests.rglob("*.py")) if not any(p.is_relative_to(d) for d in data)]
    top_modules = {p.stem for p in package.glob("*.py")} - {"__init__", "__main__"}
    problems = []
    for p in files:
        rel = p.relative_to(tests)
        if not p.name.startswith("test_"):
            if p.name != "conftest.py" and rel.parts[0] != "support":
                problems.append(f"tests/{rel}: not a test, so it belongs in tests/support/")
        elif len(rel.parts) == 1:
            name = p.stem.removeprefix("test_")
            if name not in CROSS_CUTTING and not any(name == m or name.startswith(m + "_") for m in top_modules):
                problems.append(
                    f"tests/{rel}: names no top-level module of evoenv_cli and is not in CROSS_CUTTING: "
                    "move it to the folder of the code it tests"
                )
        else:
            folder = rel.parent
            mirrors = (package / folder / "__init__.py").is_file() or (
                len(folder.parts) == 1 and folder.parts[0] not in ("tests", "evoenv_cli") and (root / folder).is_dir()
            )
            if not mirrors:
                problems.append(
                    f"tests/{rel}: tests/{folder}/ mirrors no package of evoenv_cli and no folder of the repository"
                )
    names = Counter(p.name for p in tests.rglob("test_*.py"))
    for name, n in sorted(names.items()):
        if n > 1:
            where = ", ".join(str(p.relative_to(root)) for p in sorted(tests.rglob(name)))
            problems.append(f"{where}: {n} test files named {name}; pytest imports them by name: rename one")
    return problems


def test_every_file_of_tests_is_where_it_belongs():
    assert misplaced(ROOT) == []


def test_cross_cutting_names_only_files_that_exist():
    assert [n for n in CROSS_CUTTING if not (ROOT / "tests" / f"test_{n}.py").is_file()] == []


@pytest.fixture
def tree(tmp_path):
    """A small repository shaped like this one, every file in its place."""
    (tmp_path / "pyproject.toml").write_text('[tool.ruff.format]\nexclude = ["seeds/**", "tests/corpus/**"]\n')
    for f in ("evoenv_cli/__init__.py", "evoenv_cli/config.py", "evoenv_cli/stages/__init__.py", "seeds/a.py"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("")
    for f in (
        "conftest.py",
        "test_config.py",
        "test_config_bounds.py",
        "test_layering.py",
        "stages/test_sample.py",
        "seeds/test_a.py",
        "support/__init__.py",
        "support/child.py",
        "corpus/good/env.py",
    ):
        (tmp_path / "tests" / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "tests" / f).write_text("")
    assert misplaced(tmp_path) == []
    return tmp_path


# A file put out of place in `tree`, and what its one line says.
STRAYS = [
    ("test_dedupe.py", "names no top-level module"),  # a stage's test left flat
    ("stagez/test_x.py", "tests/stagez/ mirrors no package"),
    ("support/test_x.py", "tests/support/ mirrors no package"),
    ("helper.py", "not a test, so it belongs in tests/support/"),
    ("stages/__init__.py", "not a test"),
    ("stages/test_config.py", "2 test files named test_config.py"),
]


@pytest.mark.parametrize("stray, says", STRAYS, ids=[stray for stray, _ in STRAYS])
def test_a_file_out_of_place_is_named(tree, stray, says):
    path = tree / "tests" / stray
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    problems = misplaced(tree)
    assert len(problems) == 1 and problems[0].startswith("tests/") and says in problems[0], problems
