"""Static checks on an environment's source (AST only, nothing runs): the required names,
an allow-list of standard-library imports suited to puzzles, and no way to reach the
interpreter's internals (eval/exec, __import__, open, attribute walks by name or through
underscores, frames, a module's private imports); and what the source declares (NAME,
ANSWER_TYPE, TAGS, docstring), read here so that no stage takes a worker's word for it.

A sandbox cannot stop code from forging its own results, so these checks are one of the
defences outside the jail: they keep the easy routes to a forged reward out of the pool. They
are not a security boundary and nothing relies on them as one: the worker runs in the sandbox
whatever they say, and the parent checks every value that comes back.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import re
import textwrap
import threading
import types
from dataclasses import dataclass, field
from typing import Any

from evoenv_cli.runtime import import_template

# The environment contract: this module is its one home. The synthesis prompt is rendered from
# these values (evoenv_cli.prompts.contract_text), the pool, sample, compose and dedupe read
# them from here, and a test checks the prompt and the checker agree.
ANSWER_TYPES = ("int", "float", "str", "list[int]", "list[str]")
REQUIRED_FUNCTIONS = {"generate": 2, "prompt": 1, "solve": 1, "score": 2}
OPTIONAL_FUNCTIONS = {"generate_from": 3}  # a composite's later part: (seed, difficulty, value)
CALLS = ("generate", "generate_from", "prompt", "solve", "score")  # what a worker may run, in compose's order
assert set(CALLS) == set(REQUIRED_FUNCTIONS) | set(OPTIONAL_FUNCTIONS)
LEVELS = tuple(range(1, 11))  # difficulty 1 (easiest) to 10
# What the contract asks of every call and instance (the prompt states these, the seeds are
# held to them); validate's budgets (config.ValidateConfig) are the looser limits it enforces.
ASKED_CALL_SECONDS = 0.1
ASKED_INSTANCE_BYTES = 20_000
ASKED_PROMPT_CHARS = 4_000
# Importing the file (its top-level code) must take under this: every worker started pays it.
# validate enforces it as is (validate.max_import_seconds) at its load check.
MAX_IMPORT_SECONDS = 1.0
# the lists packed, as a reader scans them
# fmt: off
ALLOWED_IMPORTS = frozenset({
    "__future__", "random", "math", "cmath", "itertools", "functools", "collections",
    "heapq", "bisect", "fractions", "decimal", "string", "re", "json", "statistics",
    "dataclasses", "typing", "operator", "copy", "enum", "abc", "numbers", "array",
    "textwrap", "unicodedata", "hashlib",
})
FORBIDDEN_NAMES = frozenset({
    "eval", "exec", "compile", "__import__", "open", "input", "breakpoint", "globals",
    "locals", "vars", "getattr", "setattr", "delattr", "__builtins__", "__loader__", "__spec__",
    "memoryview", "exit", "quit", "help", "attrgetter", "methodcaller", "Formatter",
    "get_type_hints", "singledispatch", "singledispatchmethod",
})
# Names that reach objects by a string (getattr-likes) or evaluate strings as code: refused as
# attributes too (`operator.attrgetter`, `string.Formatter`, `typing.get_type_hints`, which
# evaluates string annotations, `builtins.eval` reached through another module).
FORBIDDEN_ATTRIBUTES = frozenset({
    "eval", "exec", "open", "breakpoint", "globals", "locals", "vars", "getattr",
    "setattr", "delattr", "attrgetter", "methodcaller", "Formatter", "get_field",
    "get_type_hints", "singledispatch", "singledispatchmethod",
})
# Frames, code, generators, coroutines and tracebacks lead to globals and builtins.
FRAME_ATTRIBUTES = frozenset({
    "f_back", "f_builtins", "f_code", "f_globals", "f_lasti", "f_lineno", "f_locals", "f_trace",
    "f_trace_lines", "f_trace_opcodes", "gi_code", "gi_frame", "gi_running", "gi_suspended",
    "gi_yieldfrom", "ag_await", "ag_code", "ag_frame", "ag_running", "cr_await", "cr_code",
    "cr_frame", "cr_origin", "cr_running", "cr_suspended", "tb_frame", "tb_lasti", "tb_lineno",
    "tb_next",
})
# fmt: on
# Underscore attributes that give no new reach (a type's name, a class's constructor).
ALLOWED_UNDERSCORE_ATTRIBUTES = frozenset({"__name__", "__qualname__", "__doc__", "__init__"})
CONTRACT_CONSTANTS = ("NAME", "ANSWER_TYPE", "INPUT_TYPE", "TAGS")
CONTRACT_NAMES = frozenset(CONTRACT_CONSTANTS) | frozenset(CALLS)  # the names the runtime reads from a module
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
MAX_SOURCE_BYTES = 100_000
MAX_TAGS, MAX_TAG_CHARS, MAX_DOC_CHARS = 32, 64, 2000
_SURROGATES = re.compile("[\ud800-\udfff]")


_NOT_A_LITERAL = object()


@dataclass
class StaticReport:
    ok: bool
    reason: str = ""
    name: str | None = None


def _fail(reason: str, name: str | None = None) -> StaticReport:
    return StaticReport(False, reason, name)


def valid_text(text: str) -> str:
    """`text` as valid UTF-8: lone surrogates (which no UTF-8 writer accepts) become U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATES.sub("\ufffd", text)
    return text


def _module_constant(tree: ast.Module, target: str):
    """(found, value) of a top-level `TARGET = <literal>` assignment."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == target for t in node.targets):
            value = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == target:
            value = node.value
        else:
            continue
        try:
            return True, ast.literal_eval(value) if value is not None else None
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return True, _NOT_A_LITERAL
    return False, None


@dataclass
class Declared:
    """What a source declares, read from its AST: the only metadata stages use. `problem` says
    why a NAME that is there cannot be used (not a snake_case string literal)."""

    name: str | None = None
    answer_type: str | None = None
    input_type: str | None = None
    tags: list[str] = field(default_factory=list)
    doc: str | None = None
    problem: str | None = None


_PARSE_LOCK = threading.Lock()


def parse_python(text: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse`, one call at a time in this process. CPython 3.11 keeps the AST constructor's
    recursion depth in interpreter-wide state, so two threads parsing at once can fail with
    "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905); the reward
    function runs in OpenRLHF's and verl's thread pools, and the pool spawns workers from threads.
    Every parse in evoenv goes through here."""
    with _PARSE_LOCK:
        return ast.parse(text, filename=filename)


def _parse(source: bytes) -> ast.Module | None:
    if len(source) > MAX_SOURCE_BYTES:
        return None
    try:
        return parse_python(source.decode("utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError, MemoryError, RecursionError):
        return None


def declared(source: bytes) -> Declared:
    """NAME, ANSWER_TYPE, INPUT_TYPE, TAGS and the docstring as the source states them, each
    bounded and valid UTF-8; a value of the wrong type or form is left out."""
    tree = _parse(source)
    if tree is None:
        return Declared(problem="the source does not parse (or is over the size limit)")
    out = Declared()
    found, name = _module_constant(tree, "NAME")
    if found and isinstance(name, str) and NAME_PATTERN.match(name):
        out.name = name
    elif found:
        out.problem = "NAME must be a snake_case string literal of at most 64 characters"
    for const in ("ANSWER_TYPE", "INPUT_TYPE"):
        _, value = _module_constant(tree, const)
        if isinstance(value, str) and value in ANSWER_TYPES:
            setattr(out, const.lower(), value)
    _, tags = _module_constant(tree, "TAGS")
    if isinstance(tags, (list, tuple)):
        out.tags = [valid_text(t) for t in tags if isinstance(t, str) and len(t) <= MAX_TAG_CHARS][:MAX_TAGS]
    doc = ast.get_docstring(tree)
    out.doc = valid_text(doc[:MAX_DOC_CHARS]) if doc else None
    return out


# -- what a standard-library module exports ---------------------------------------------------------
@functools.cache
def _is_module(path: str) -> bool:
    """`path` (dotted) is a module under an allowed top-level package."""
    if path.split(".")[0] not in ALLOWED_IMPORTS:
        return False
    try:
        return importlib.util.find_spec(path) is not None
    except (ImportError, ValueError):
        return False


@functools.cache
def module_exports(path: str) -> frozenset[str]:
    """The public names of an allowed module: its __all__, else its names without a leading
    underscore; never a module it merely imported (`dataclasses.sys`, `random._os`)."""
    try:
        module = importlib.import_module(path)
    except ImportError:
        return frozenset()
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in dir(module) if not n.startswith("_")]
    return frozenset(
        n
        for n in names
        if isinstance(n, str) and not n.startswith("_") and not isinstance(getattr(module, n, None), types.ModuleType)
    )


def _attribute_problem(attr: str) -> str | None:
    if attr.startswith("_") and attr not in ALLOWED_UNDERSCORE_ATTRIBUTES:
        return f"access to attribute {attr!r} is not allowed (no attribute that starts with '_')"
    if attr in FORBIDDEN_ATTRIBUTES:
        return f"access to attribute {attr!r} is not allowed"
    if attr in FRAME_ATTRIBUTES:
        return f"access to frame, code or generator attribute {attr!r} is not allowed"
    return None


class _ModuleUse:
    """Where the source's imported modules are used: only as `module.public_name`."""

    def __init__(self, tree: ast.Module):
        self.modules: dict[str, str] = {}  # local name -> dotted module
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.modules[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.modules[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    if alias.name != "*" and _is_module(sub):
                        self.modules[alias.asname or alias.name] = sub
        self.bases = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}

    def module_of(self, node: ast.AST) -> str | None:
        """The module an expression names (`random`, `collections.abc`), if it names one."""
        if isinstance(node, ast.Name):
            return self.modules.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.module_of(node.value)
            if base is not None and _is_module(f"{base}.{node.attr}"):
                return f"{base}.{node.attr}"
        return None

    def problem(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name) and node.id in self.modules and id(node) not in self.bases:
            what = "assigned" if not isinstance(node.ctx, ast.Load) else "used as a value"
            return f"module {node.id!r} is {what} (line {node.lineno}); use only module.name"
        if isinstance(node, ast.Attribute):
            module = self.module_of(node.value)
            if (
                module is not None
                and node.attr not in module_exports(module)
                and not _is_module(f"{module}.{node.attr}")
            ):
                return f"{module}.{node.attr} is not a public name of {module} (line {node.lineno})"
        return None


def _bound_names(node: ast.AST) -> list[str]:
    """Names a node binds (or unbinds), however it does so."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return [node.id]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, ast.alias):
        return [node.asname or node.name.split(".")[0]]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return [node.name]
    if isinstance(node, ast.MatchMapping) and node.rest:
        return [node.rest]
    return []


def _module_level_bindings(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    """(name, node) for each binding of a module-level name: statements at module scope (not
    inside a function or class body, where a name is local) and `global` declarations."""
    found = [(n, node) for node in ast.walk(tree) if isinstance(node, ast.Global) for n in node.names]
    stack = list(ast.iter_child_nodes(tree))
    while stack:
        node = stack.pop()
        if not isinstance(node, ast.Global):
            found += [(n, node) for n in _bound_names(node)]
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return sorted(found, key=lambda item: getattr(item[1], "lineno", 0))


def check_source(
    source: bytes, max_bytes: int = MAX_SOURCE_BYTES, allowed_imports: frozenset[str] = ALLOWED_IMPORTS
) -> StaticReport:
    """The static contract; the first problem found is the reason."""
    if len(source) > max_bytes:
        return _fail(f"source is {len(source)} bytes, over {max_bytes}")
    try:
        tree = parse_python(source.decode("utf-8"))
    except UnicodeDecodeError:
        return _fail("source is not UTF-8 text")
    except SyntaxError as exc:
        return _fail(f"syntax error at line {exc.lineno}: {exc.msg}")
    except (ValueError, MemoryError, RecursionError) as exc:
        return _fail(f"cannot parse: {type(exc).__name__}")

    found, name = _module_constant(tree, "NAME")
    if not found:
        return _fail("NAME is not defined at module level")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        return _fail("NAME must be a snake_case string literal of at most 64 characters")
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for fn, arity in REQUIRED_FUNCTIONS.items():
        node = functions.get(fn)
        if node is None:
            return _fail(f"function {fn}() is not defined at module level", name)
        if isinstance(node, ast.AsyncFunctionDef):
            return _fail(f"{fn}() must be a plain function, not async", name)
        positional = len(node.args.posonlyargs) + len(node.args.args)
        if positional < arity and node.args.vararg is None:
            return _fail(f"{fn}() takes {positional} positional arguments, the contract passes {arity}", name)
    for const in ("ANSWER_TYPE", "INPUT_TYPE"):
        present, value = _module_constant(tree, const)
        if present and value not in ANSWER_TYPES:
            return _fail(f"{const} must be one of {', '.join(ANSWER_TYPES)}", name)
    if _module_constant(tree, "INPUT_TYPE")[0] and "generate_from" not in functions:
        return _fail("INPUT_TYPE is set but generate_from() is not defined", name)

    bindings = {c: 0 for c in CONTRACT_CONSTANTS}
    for bound, node in _module_level_bindings(tree):
        if bound in bindings:
            bindings[bound] += 1
            if bindings[bound] > 1:
                return _fail(
                    f"{bound} is assigned more than once (line {getattr(node, 'lineno', '?')}); "
                    "it must be one literal at module level",
                    name,
                )
    modules = _ModuleUse(tree)
    grant = import_grant(source)  # evoenv's import template only: see runtime/import_template.py
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root not in allowed_imports and not (grant and grant.allows(root, node.lineno)):
                    return _fail(f"import of {alias.name!r} is not allowed (line {node.lineno})", name)
        elif isinstance(node, ast.ImportFrom):
            root = (node.module or "").split(".")[0]
            if node.level or (root not in allowed_imports and not (grant and grant.allows(root, node.lineno))):
                return _fail(f"import from {node.module or '.'!r} is not allowed (line {node.lineno})", name)
            for alias in node.names:
                if alias.name == "*":
                    return _fail(f"'from {node.module} import *' is not allowed (line {node.lineno})", name)
                if alias.name not in module_exports(node.module) and not _is_module(f"{node.module}.{alias.name}"):
                    return _fail(
                        f"{node.module}.{alias.name} is not a public name of {node.module} (line {node.lineno})", name
                    )
                problem = _attribute_problem(alias.name)
                if problem:
                    return _fail(f"{problem} (line {node.lineno})", name)
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            return _fail(f"use of {node.id!r} is not allowed (line {node.lineno})", name)
        elif isinstance(node, ast.Attribute):
            problem = _attribute_problem(node.attr)
            if problem:
                return _fail(f"{problem} (line {node.lineno})", name)
        elif isinstance(node, ast.MatchClass):  # `case object(__class__=c)` reads attributes by name
            for attr in node.kwd_attrs:
                problem = _attribute_problem(attr)
                if problem:
                    return _fail(f"{problem} (line {node.lineno})", name)
        problem = modules.problem(node)
        if problem:
            return _fail(problem, name)
    return StaticReport(True, "", name)


EXPORTS = (*CONTRACT_CONSTANTS, *CALLS)  # what a part's embedded module hands back


# -- a part's source embedded in a composite (compose), and the sources trusted to import a package -----------------------------------------------------------------------
class _GlobalToNonlocal(ast.NodeTransformer):
    """Inside a wrapping function a part's `global x` must become `nonlocal x`."""

    def __init__(self):
        self.names: set[str] = set()
        self.depth = 0

    def _scope(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _scope

    def visit_ClassDef(self, node):
        return self._scope(node)

    def visit_Global(self, node):
        self.names.update(node.names)
        if self.depth == 0:
            return None  # `global` at a module's top level means nothing
        return ast.copy_location(ast.Nonlocal(names=node.names), node)


def embed(source: str, function: str) -> str:
    """A part's module as a function returning its public names: top-level code runs once when
    the composite is imported, and each part keeps its own namespace."""
    tree = parse_python(source)
    body = [n for n in tree.body if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
    fixer = _GlobalToNonlocal()
    body = [fixer.visit(n) for n in body]
    body = [n for n in body if n is not None]
    defined = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(t.id for t in targets if isinstance(t, ast.Name))
    pre = [parse_python(f"{name} = None").body[0] for name in sorted(fixer.names)]
    exported = ", ".join(f"{name!r}: {name}" for name in EXPORTS if name in defined)
    inner = ast.unparse(ast.Module(body=pre + body, type_ignores=[]))
    return f"def {function}():\n" + textwrap.indent(inner, "    ") + f"\n    return {{{exported}}}\n"


@dataclass(frozen=True)
class ImportGrant:
    """What one environment source may import beyond the standard library: pinned requirements,
    the import names its own code may use, and the source lines where those imports may stand.
    (runtime/packages.py's PackageGrant adds where the jail finds the packages.)"""

    requires: tuple[str, ...]  # e.g. ("reasoning-gym==0.1.25",)
    modules: frozenset[str]
    regions: tuple[tuple[int, int], ...]

    def allows(self, module: str, line: int) -> bool:
        return module in self.modules and any(a <= line <= b for a, b in self.regions)


def import_grant(source: bytes) -> ImportGrant | None:
    """The grant for an environment source, decided by its content, or None (the usual case:
    standard library only). Only evoenv's import template (runtime/import_template.py), or a
    composite function that is exactly `embed` of one, gets it."""
    found = trusted_regions(source)
    if found is None:
        return None
    requires, regions = found
    return ImportGrant(tuple(requires), frozenset({import_template.MODULE}), tuple(regions))


def _literals(body: list) -> dict[str, Any]:
    out = {}
    for node in body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in ("TASK", "REQUIRES", "LEVELS")
        ):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                return {}
    return out


def _renders(found: dict[str, Any]) -> str | None:
    """The template for the literals a file declares, when they are well formed and pinned to
    the installed reasoning-gym; else None."""
    task, requires, levels = found.get("TASK"), found.get("REQUIRES"), found.get("LEVELS")
    if (
        not isinstance(task, str)
        or not isinstance(levels, dict)
        or import_template.version() is None
        or requires != [import_template.requirement()]
    ):
        return None
    return import_template.render_environment(task, levels, requires)


def _parsed_import(source: bytes) -> tuple[str, ast.Module] | None:
    """(text, tree) of a source that names reasoning_gym and parses; None otherwise."""
    if import_template.MODULE.encode() not in source:
        return None
    try:
        text = source.decode("utf-8")
        return text, parse_python(text)
    except (UnicodeDecodeError, SyntaxError, ValueError):
        return None


def _is_whole_template(text: str, tree: ast.Module) -> bool:
    whole = _renders(_literals(tree.body))
    return whole is not None and whole == text


def is_import_template(source: bytes) -> bool:
    """The whole file is exactly `evoenv import`'s template for its own TASK/LEVELS/REQUIRES
    (what `trusted_regions` grants the whole file)."""
    parsed = _parsed_import(source)
    return parsed is not None and _is_whole_template(*parsed)


def trusted_regions(source: bytes) -> tuple[list[str], list[tuple[int, int]]] | None:
    """Where a source may import reasoning_gym: ([requirement], [(first line, last line)]) when
    the whole file is exactly `evoenv import`'s template for its own TASK/LEVELS/REQUIRES, or
    when functions of a composite are exactly compose's embedding of such a template; None
    otherwise (the file keeps the standard-library allow-list)."""
    parsed = _parsed_import(source)
    if parsed is None:
        return None
    text, tree = parsed
    if _is_whole_template(text, tree):
        return [import_template.requirement()], [(1, len(text.splitlines()) + 1)]
    regions = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or not node.name.startswith("_part_"):
            continue
        template = _renders(_literals(node.body))
        if template is None:
            continue
        expected = parse_python(embed(template, node.name)).body[0]
        if ast.dump(expected) == ast.dump(node):
            regions.append((node.lineno, node.end_lineno or node.lineno))
    return ([import_template.requirement()], regions) if regions else None
