"""Static checks on an environment's source (AST only, nothing runs): the required names,
an allow-list of standard-library imports suited to puzzles, and no way to reach the
interpreter's internals (eval/exec, __import__, open, dunder attribute walks).

A sandbox cannot stop code from forging its own results, so these checks are one of the
defences outside the jail: they keep the easy routes to a forged reward out of the pool.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

ANSWER_TYPES = ("int", "float", "str", "list[int]", "list[str]")
REQUIRED_FUNCTIONS = {"generate": 2, "prompt": 1, "solve": 1, "score": 2}
ALLOWED_IMPORTS = frozenset({
    "__future__", "random", "math", "cmath", "itertools", "functools", "collections",
    "heapq", "bisect", "fractions", "decimal", "string", "re", "json", "statistics",
    "dataclasses", "typing", "operator", "copy", "enum", "abc", "numbers", "array",
    "textwrap", "unicodedata", "hashlib",
})
FORBIDDEN_NAMES = frozenset({
    "eval", "exec", "compile", "__import__", "open", "input", "breakpoint", "globals",
    "locals", "vars", "getattr", "setattr", "delattr", "__builtins__", "__loader__", "__spec__",
    "memoryview", "exit", "quit",
})
FORBIDDEN_ATTRIBUTES = frozenset({
    "__subclasses__", "__globals__", "__builtins__", "__code__", "__class__", "__bases__",
    "__base__", "__mro__", "__dict__", "__getattribute__", "__closure__", "__func__",
    "__self__", "__module__", "__reduce__", "__reduce_ex__", "__loader__", "__spec__",
    "__import__", "f_globals", "f_locals", "f_back", "gi_frame", "cr_frame", "tb_frame",
})
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
MAX_SOURCE_BYTES = 100_000


_NOT_A_LITERAL = object()


@dataclass
class StaticReport:
    ok: bool
    reason: str = ""
    name: str | None = None


def _fail(reason: str, name: str | None = None) -> StaticReport:
    return StaticReport(False, reason, name)


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
        except ValueError:
            return True, _NOT_A_LITERAL
    return False, None


def check_source(source: bytes, max_bytes: int = MAX_SOURCE_BYTES,
                 allowed_imports: frozenset[str] = ALLOWED_IMPORTS) -> StaticReport:
    """The static contract; the first problem found is the reason."""
    if len(source) > max_bytes:
        return _fail(f"source is {len(source)} bytes, over {max_bytes}")
    try:
        tree = ast.parse(source.decode("utf-8"))
    except UnicodeDecodeError:
        return _fail("source is not UTF-8 text")
    except SyntaxError as exc:
        return _fail(f"syntax error at line {exc.lineno}: {exc.msg}")
    except ValueError as exc:
        return _fail(f"cannot parse: {exc}")

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

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root not in allowed_imports:
                    return _fail(f"import of {alias.name!r} is not allowed (line {node.lineno})", name)
        elif isinstance(node, ast.ImportFrom):
            root = (node.module or "").split(".")[0]
            if node.level or root not in allowed_imports:
                return _fail(f"import from {node.module or '.'!r} is not allowed (line {node.lineno})", name)
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            return _fail(f"use of {node.id!r} is not allowed (line {node.lineno})", name)
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
            return _fail(f"access to attribute {node.attr!r} is not allowed (line {node.lineno})", name)
    return StaticReport(True, "", name)
