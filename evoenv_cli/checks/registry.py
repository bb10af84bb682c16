"""The validation checks' registry: one `Check` record per check, registered once in `CHECKS`
by the module that holds the check. Importing this module imports every module of the
`evoenv_cli.checks` package (in name order), so a check module registers itself by being
there: a new check is one new file in `evoenv_cli/checks/` ending with `register(Check(...))`,
and nothing else is edited. The stage (`stages/validate.py`), the admission summary's funnel
and the validate command's help read the names and the order from here.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evoenv_cli.checks.context import Checker


@dataclass(frozen=True)
class Check:
    """One validation check, the one place its facts are written. `name` is the verdict's
    stage when it decides; `run` raises `Rejected` on the first defect it finds (usually under
    its own name; a step may name the check its finding belongs to, as score failing on a
    probe during `determinism` is a `discrimination` verdict). Checks run by `order`, cheapest
    first; `sandboxed` False: the check reads the source alone and runs, with the others like
    it, before any worker starts (it may set `static_name`)."""

    name: str
    guards: str  # what it guards, in one line (the validate command's help lists it)
    run: Callable[[Checker], None]
    order: int
    sandboxed: bool = True


CHECKS: dict[str, Check] = {}


def register(check: Check) -> Check:
    """Add a check to `CHECKS`: one call is all a new check needs besides its function. A name
    or place already taken, or a source check placed after a sandboxed one, is a ValueError."""
    if check.name in CHECKS or check.name == "admitted":
        raise ValueError(f"validation check {check.name!r} is already registered")
    for other in CHECKS.values():
        if other.order == check.order:
            raise ValueError(f"validation checks {other.name!r} and {check.name!r} both have order {check.order}")
        first, then = sorted((check, other), key=lambda c: c.order)
        if first.sandboxed and not then.sandboxed:
            raise ValueError(
                f"{then.name!r} reads the source alone, so it runs before every sandboxed check: "
                f"its order must be below {first.name!r}'s"
            )
    CHECKS[check.name] = check
    return check


def checks(sandboxed: bool | None = None) -> list[Check]:
    """The registered checks in the order they run (only the sandboxed ones, or only the
    source ones, when asked)."""
    return sorted((c for c in CHECKS.values() if sandboxed is None or c.sandboxed == sandboxed), key=lambda c: c.order)


def stage_names() -> tuple[str, ...]:
    """The checks' names in the order they run: the stages a verdict can name besides `admitted`."""
    return tuple(c.name for c in checks())


def in_turn(*steps: Callable[[Checker], None]) -> Callable[[Checker], None]:
    """One check made of several steps, run in turn (the first to reject decides)."""

    def run(checker: Checker) -> None:
        for step in steps:
            step(checker)

    return run


def _import_every_check() -> None:
    """Every module of this package, in name order: those that hold a check register it as they
    load (the machinery modules register nothing). Runs once, as this module loads, after
    `register` exists; a check module imported first finds this module half loaded, with
    `Check` and `register` already there, and registers itself when its own import ends."""
    package = __name__.rpartition(".")[0]
    for info in sorted(pkgutil.iter_modules(importlib.import_module(package).__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{package}.{info.name}")


_import_every_check()
