"""The static contract's hardening (runtime/contract.py): the routes to os, sys, builtins or
an eval that hostile files took without naming them, each refused with its reason; the
ordinary code environments are written with, still accepted; and what a source declares
(NAME, ANSWER_TYPE, TAGS, doc) read from its AST, bounded, with no run."""

from __future__ import annotations

import pytest

from evoenv_cli.runtime.contract import check_source, declared

BASE = '''"""A base environment the cases edit."""
import random
import dataclasses
import operator
import string
import typing
import functools

NAME = "base_env"


def generate(seed, difficulty):
    return {"n": random.Random(seed).randint(0, 99)}


def prompt(instance):
    return "n?"


def solve(instance):
    return str(instance["n"])


def score(instance, answer):
    return 1.0 if answer.strip() == solve(instance) else 0.0
'''

# Each route reached os, sys, builtins, frames or an eval in a real hostile file (issue 12).
ROUTES = {
    "random._os": ("x = random._os", "'_os'"),
    "dataclasses.sys": ("x = dataclasses.sys.modules", "dataclasses.sys is not a public name"),
    "dataclasses.builtins": ("x = dataclasses.builtins", "dataclasses.builtins is not a public name"),
    "dataclasses.inspect": ("x = dataclasses.inspect.currentframe()", "dataclasses.inspect"),
    "attrgetter": ("x = operator.attrgetter('__class__.__bases__')(1)", "'attrgetter'"),
    "methodcaller": ("x = operator.methodcaller('__getattribute__', '__globals__')", "'methodcaller'"),
    "Formatter": ("x = string.Formatter().get_field('0.__class__', [1], {})", "'get_field'"),
    "from_string_Formatter": ("from string import Formatter", "'Formatter'"),
    "ag_frame": ("async def g():\n    yield 1\nx = g().ag_frame.f_builtins", "frame"),
    "gi_frame_back": ("def g():\n    yield 1\nx = g().gi_frame", "'gi_frame'"),
    "tb_frame": ("try:\n    1 / 0\nexcept Exception as e:\n    x = e.__traceback__", "'__traceback__'"),
    "builtins_eval_attribute": ("x = dataclasses.builtins.eval('1')", "'eval'"),
    "exec_attribute": ("class A:\n    pass\nx = A().exec", "'exec'"),
    "private_import": ("from random import _os", "random._os is not a public name"),
    "module_import_of_a_module": ("from dataclasses import sys", "dataclasses.sys is not a public name"),
    "star_import": ("from typing import *", "import *"),
    "module_alias_value": ("m = dataclasses\nx = m.sys", "module 'dataclasses' is used as a value"),
    "module_as_argument": ("x = list(map(str, [random]))", "module 'random' is used as a value"),
    "module_rebound": ("random = 3", "module 'random' is assigned"),
    "match_class_attribute": ("match 1:\n    case object(__class__=c):\n        pass", "'__class__'"),
    "get_type_hints": ("x = typing.get_type_hints(solve)", "'get_type_hints'"),
    "singledispatch": ("x = functools.singledispatch(solve)", "'singledispatch'"),
    "single_underscore_attribute": ("x = random.Random(1)._randbelow(3)", "'_randbelow'"),
    "name_reassigned": ("NAME = 'n' * 3_000_000", "NAME is assigned more than once"),
    "name_global": ("def f():\n    global NAME\n    NAME = 'x'", "NAME is assigned more than once"),
    "tags_mutated_by_rebinding": ("TAGS = ['a']\nTAGS = ['b']", "TAGS is assigned more than once"),
    "name_as_import_alias": ("import math as NAME", "NAME is assigned more than once"),
}


@pytest.mark.parametrize("name", list(ROUTES))
def test_routes_around_the_import_list_are_refused(name):
    code, needle = ROUTES[name]
    report = check_source((BASE + "\n" + code + "\n").encode())
    assert not report.ok, f"{name} passed the static check"
    assert needle in report.reason, report.reason


ALLOWED = {
    "type_name": "x = type(1).__name__",
    "super_init": "class A:\n    def __init__(self):\n        super().__init__()",
    "collections_abc": "import collections.abc\nx = collections.abc.Sequence",
    "from_collections_import_abc": "from collections import abc\nx = abc.Mapping",
    "public_names": "import math\nimport re\nx = (math.gcd(4, 6), re.compile('a'), random.Random, string.ascii_lowercase)",
    "from_import_public": "from collections import deque, Counter\nfrom functools import lru_cache",
    "private_instance_free_class": "class Grid:\n    def __init__(self, n):\n        self.cells = [0] * n",
    "async_free_generator_use": "def g():\n    yield 1\nx = list(g())",
    "typing_names": "from typing import List\nx: List[int] = []",
}


@pytest.mark.parametrize("name", list(ALLOWED))
def test_ordinary_code_still_passes(name):
    report = check_source((BASE + "\n" + ALLOWED[name] + "\n").encode())
    assert report.ok, report.reason


def test_declared_metadata_is_read_from_the_source_bounded():
    source = (
        '"""Doc \\ud800 line."""\nNAME = "ok_env"\nTAGS = ["a", "b\\udcff", 3, "'
        + "t" * 100
        + '"]\nANSWER_TYPE = "int"\nINPUT_TYPE = "dict"\nNAME = "n" * 10\n'
    ).encode()
    got = declared(source)
    assert got.name == "ok_env" and got.problem is None
    assert got.tags == ["a", "b\ufffd"]  # only short strings, valid UTF-8
    assert got.answer_type == "int" and got.input_type is None  # not one of the answer types
    assert got.doc == "Doc \ufffd line."


@pytest.mark.parametrize(
    "line,problem",
    [
        ('NAME = ["a", "list"]', True),
        ("NAME = 'Not Snake'", True),
        ("NAME = 'x' * 3", True),
        ("X = 1", False),
    ],
)
def test_declared_name_that_cannot_be_used(line, problem):
    got = declared(f"{line}\n".encode())
    assert got.name is None
    assert (got.problem is not None) == problem


def test_declared_of_an_unparseable_or_huge_source():
    assert declared(b"def (:\n").name is None
    assert declared(b'NAME = "a"\n' + b"x = 1\n" * 50_000).problem


def test_a_local_name_inside_a_function_is_not_the_module_name():
    """compose embeds each part's module in a function: its NAME there is a local."""
    code = "def part():\n    NAME = 'inner'\n    return NAME\nclass K:\n    NAME = 'attr'\n"
    assert check_source((BASE + "\n" + code).encode()).ok


def test_every_parse_in_evoenv_goes_through_the_locked_helper():
    """CPython 3.11 races on the AST constructor's recursion depth when two threads parse at
    once (a CI run failed with 'SystemError: AST constructor recursion depth mismatch' in the
    OpenRLHF reward function's thread pool); only parse_python may call ast.parse."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[2] / "evoenv_cli"
    calls = [
        (p.relative_to(root).as_posix(), n + 1)
        for p in sorted(root.rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines())
        if re.search(r"\bast\.parse\(", line)
    ]
    assert calls == [
        (
            "runtime/contract.py",
            next(
                n + 1
                for n, line in enumerate((root / "runtime/contract.py").read_text().splitlines())
                if "return ast.parse(text, filename=filename)" in line
            ),
        )
    ]


def test_parse_python_from_many_threads_gives_every_thread_the_same_tree():
    import ast
    import threading

    from evoenv_cli.runtime.contract import parse_python

    source = BASE + "\n".join(
        f"def f{i}(x):\n    return [[x + {i} for _ in range(2)] for _ in range(3)]\n" for i in range(60)
    )
    want = ast.dump(ast.parse(source))
    got, errors = [], []

    def work():
        try:
            for _ in range(20):
                got.append(ast.dump(parse_python(source)))
        except Exception as exc:  # noqa: BLE001 - the test reports whatever a thread raised
            errors.append(repr(exc))

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and got == [want] * 120
