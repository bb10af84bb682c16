"""The stages of the loop, one module each, each declaring its record (`evoenv_cli.stage.Stage`).

`all()` imports every module here (and the pool's update step) so that each registers itself;
a new stage is one new module in this folder.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil

from evoenv_cli.stage import Stage, registered


def all() -> dict[str, Stage]:  # noqa: A001 (the registry's own name for its contents)
    """Every stage, by name, in round order (the steps of the round first, then the others)."""
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    importlib.import_module("evoenv_cli.pool")  # the pool update, a step of the round
    ordered = sorted(registered().values(), key=lambda s: (s.place is None, s.place or 0, s.name))
    return {s.name: s for s in ordered}


def get(name: str) -> Stage:
    """One stage's record: its own module first (a command imports only the stage it runs),
    every stage when the record lives in another module (the pool update's, in pool.py)."""
    found = registered().get(name)
    if found is None and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        importlib.import_module(f"{__name__}.{name}")
        found = registered().get(name)
    return found if found is not None else all()[name]


def round_steps() -> list[Stage]:
    """The round's steps in the order the loop runs them."""
    return [s for s in all().values() if s.place is not None]
