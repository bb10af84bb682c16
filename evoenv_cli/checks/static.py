"""The `static` check: the source alone (the contract's AST rules), read before any worker starts."""

from __future__ import annotations

from evoenv_cli.checks.context import Checker, Rejected
from evoenv_cli.checks.registry import Check, register
from evoenv_cli.runtime.contract import check_source


def check_static(checker: Checker) -> None:
    report = check_source(checker.env.source, max_bytes=checker.cfg.max_source_bytes)
    checker.static_name = report.name
    if not report.ok:
        raise Rejected("static", report.reason, cut=False)


register(
    Check(
        "static",
        "the source alone: required names, stdlib imports only, no eval/exec/open, NAME assigned once",
        check_static,
        10,
        sandboxed=False,
    )
)
