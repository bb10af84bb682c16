"""The import graph has no cycle and no arrow that runs up: every evoenv module is parsed (the
standard library's `ast`, through runtime.contract.parse_python) and each import checked
against the layers below, written as data. Imports inside functions count (a lazy import is
still an arrow); imports under `if TYPE_CHECKING:` do not (they never run).

The layers, bottom first; a module may import its own layer and the layers under it:
- records: the error and the environment file that every layer passes around, the row
  formats (`row_formats`: what config offers and rewards read) and the composition operators
  (`operators`: config offers their names, compose and dedupe read their records);
- runtime (the sandbox, its worker pool and the environment contract) and llm (the generation
  backends) stand side by side, each blind to the other;
- core: config, artifacts (storage), prompts;
- integrations: the reward entry points and exports that trainers and benchmarks call;
- parts: the stage record and registry, and what stages share (admission records, prompts
  as conversations, the checks' machinery, dedupe's novelty index,
  training's add-ons);
- stages (each a record), and the environment pool; the loop; report; cli.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
from pathlib import Path

import pytest
from conftest import ROOT

from evoenv_cli.runtime.contract import parse_python

PACKAGE = "evoenv_cli"
INTEGRATIONS = ["integrations", "integrations.*", "rewards"]  # rewards: the old path, a shim
LAYERS = [  # (layer, module patterns relative to the package), bottom first
    ("records", ["errors", "envfile", "filemodes", "thinking", "confidence", "accelerate_configs", "row_formats", "origins",
                 "operators"]),
    ("runtime", ["runtime", "runtime.*"]),
    ("llm", ["llm", "llm.*"]),
    ("core", ["config", "artifacts", "prompts"]),
    ("integrations", INTEGRATIONS),
    ("parts", ["stage", "admission", "conversations", "checks", "checks.*", "novelty", "novelty.*",
               "training", "training.*"]),
    ("stages", ["stages", "stages.*", "pool", "cluster", "cluster.*"]),
    ("loop", ["loop", "plan"]),
    ("report", ["report", "report.*"]),
    ("cli", ["cli", "commands", "commands.*", "__main__", ""]),
]  # fmt: skip
FORBIDDEN = [  # (importer patterns, imported patterns, why): arrows the order alone would allow
    (["runtime", "runtime.*"], ["llm", "llm.*"], "the sandbox runtime knows no backend"),
    (["llm", "llm.*"], ["runtime", "runtime.*"], "a backend never imports the sandbox"),
    (["llm", "llm.*"], ["artifacts"], "a backend never imports storage"),
    (["config"], ["stages", "stages.*", *INTEGRATIONS], "config imports no stage and no integration"),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT / PACKAGE).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__")


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that `name` imports (relative to the package)."""
    tree = parse_python(path.read_bytes(), str(path))
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            skipped.update(id(n) for child in node.body for n in ast.walk(child))
    here = name.split(".") if name else []
    if path.name != "__init__.py":
        here = here[:-1]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join([PACKAGE, *here[: len(here) - node.level + 1]])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            # `from pkg import sub` imports the submodule; `from mod import name`, the module
            targets = [
                f"{module}.{a.name}" if f"{module}.{a.name}"[len(PACKAGE) + 1 :] in known else module
                for a in node.names
            ]
        for t in targets:
            if t == PACKAGE or t.startswith(PACKAGE + "."):
                found.add(t[len(PACKAGE) + 1 :])
    return found - {name}


@functools.cache
def _graph() -> dict[str, frozenset[str]]:
    mods = modules()
    known = set(mods)
    return {name: frozenset(m for m in imports_of(name, path, known) if m in known) for name, path in mods.items()}


def graph() -> dict[str, set[str]]:
    """{module: the package's modules it imports}, read once per test session."""
    return {name: set(targets) for name, targets in _graph().items()}


def matches(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def layer_of(name: str) -> int:
    ranks = [i for i, (_, patterns) in enumerate(LAYERS) if matches(name, patterns)]
    assert len(ranks) == 1, f"{name or PACKAGE} belongs to {len(ranks)} layers; add it to exactly one in LAYERS"
    return ranks[0]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def violations(edges: dict[str, set[str]]) -> list[str]:
    """Every arrow that runs up a layer or that FORBIDDEN names, as 'a -> b: why'."""
    out = []
    for a, targets in sorted(edges.items()):
        for b in sorted(targets):
            la, lb = layer_of(a), layer_of(b)
            if lb > la:
                out.append(f"{a} -> {b}: {LAYERS[la][0]} imports {LAYERS[lb][0]}, a layer above it")
            for importers, imported, why in FORBIDDEN:
                if matches(a, importers) and matches(b, imported):
                    out.append(f"{a} -> {b}: {why}")
    return out


def test_the_package_import_graph_has_no_cycle():
    edges = graph()
    assert sum(map(len, edges.values())) > 50  # the imports were read
    assert cycles(edges) == []


def test_no_arrow_runs_up_a_layer_or_breaks_a_rule():
    edges = graph()
    assert {name: layer_of(name) for name in edges}  # every module has its layer
    for _, patterns in LAYERS:  # and every pattern still names a module
        for p in patterns:
            assert any(fnmatch.fnmatchcase(name, p) for name in edges), f"LAYERS pattern {p!r} names no module"
    assert violations(edges) == []


@pytest.mark.parametrize(
    "extra, needle",
    [
        (("runtime.packages", "integrations.reasoning_gym_tasks"), "runtime imports integrations"),
        (("runtime.workers", "stages.compose"), "runtime imports stages"),
        (("llm.tiny", "artifacts"), "a backend never imports storage"),
        (("llm.base", "runtime.workers"), "a backend never imports the sandbox"),
        (("config", "stage"), "core imports parts"),
        (("operators", "config"), "records imports core"),  # the operators import nothing of evoenv
        (("stage", "stages.sample"), "parts imports stages"),  # the registry never imports its members
        (("novelty.index", "stages.dedupe"), "parts imports stages"),  # the machinery never imports its stage
        (("stages.train", "loop"), "stages imports loop"),
    ],
)
def test_the_checker_catches_the_arrows_this_package_once_had(extra, needle):
    edges = graph()
    a, b = extra
    edges[a] = edges[a] | {b}
    assert any(needle in v for v in violations(edges))


def test_the_checker_catches_a_cycle():
    edges = graph()
    edges["llm.base"] = edges["llm.base"] | {"llm.vllm_backend"}  # the cycle there once was
    assert ["llm.base", "llm.vllm_backend"] in cycles(edges)


def test_every_module_over_600_lines_says_why_it_is_one_module():
    """Issue 40: no module over ~600 lines without a reason written at its top."""
    import ast

    long = []
    for path in sorted((ROOT / "evoenv_cli").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if source.count("\n") > 600:
            doc = ast.get_docstring(ast.parse(source)) or ""
            if "Why one module:" not in doc:
                long.append(f"{path.relative_to(ROOT)} ({source.count(chr(10))} lines)")
    assert not long, f"over 600 lines with no 'Why one module:' in the docstring: {long}"
