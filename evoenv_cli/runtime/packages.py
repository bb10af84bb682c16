"""Packages beyond the standard library, for imported environments only.

An environment that `evoenv import` wrote (reasoning-gym's tasks) needs its library inside the
jail. The grant is decided by content, never by what a file claims: only a source that is
byte for byte evoenv's import template (or a composite function that is exactly compose's
embedding of one) gets it, and only for the one pinned requirement the template declares,
matching the installed version. Synthesized code keeps the standard-library allow-list.

What a grant makes visible: the requirement's installed files and its dependency closure,
each top-level entry of site-packages bound read-only under /evoenv-packages in the bwrap jail
(a folder of symlinks in the `process` fallback), put first on the worker's sys.path. Nothing
else of the host's Python install is visible, and every other wall of the sandbox stays.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from evoenv_cli.runtime.contract import ImportGrant, import_grant

JAIL_PATH = "/evoenv-packages"


@dataclass(frozen=True)
class PackageGrant(ImportGrant):
    """What one environment source may import beyond the standard library (contract.ImportGrant,
    decided there by content), and where the jail finds it."""

    @property
    def entries(self) -> tuple[Path, ...]:
        """The site-packages entries (files and folders) the jail must see."""
        return closure_entries(self.requires)


def grant_for(source: bytes) -> PackageGrant | None:
    """The grant for an environment source, or None (the usual case: stdlib only)."""
    grant = import_grant(source)
    return None if grant is None else PackageGrant(grant.requires, grant.modules, grant.regions)


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def closure_entries(requires: tuple[str, ...]) -> tuple[Path, ...]:
    """Top-level site-packages entries of the pinned requirements and everything they need
    (markers evaluated for this interpreter, extras not followed). A requirement that is not
    installed at its pinned version raises LookupError naming it."""
    from packaging.requirements import Requirement

    seen: dict[str, metadata.Distribution] = {}
    todo = []
    for spec in requires:
        req = Requirement(spec)
        try:
            installed = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            raise LookupError(f"{spec} is not installed") from None
        if not req.specifier.contains(installed, prereleases=True):
            raise LookupError(f"{spec} is required, {req.name} {installed} is installed")
        todo.append(req.name)
    while todo:
        name = todo.pop()
        if _key(name) in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise LookupError(f"{name} (needed by {', '.join(requires)}) is not installed") from None
        seen[_key(name)] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    entries: set[Path] = set()
    for dist in seen.values():
        root = Path(dist.locate_file(""))
        for f in dist.files or []:
            top = f.parts[0] if f.parts else ""
            if top in ("", "..", "__pycache__") or top.endswith(".pth"):
                continue
            path = root / top
            if path.exists():
                entries.add(path.resolve())
    return tuple(sorted(entries))


def symlink_farm(folder: Path, grant: PackageGrant) -> Path:
    """The `process` mode's view: a folder of symlinks to the granted entries only."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in grant.entries:
        link = folder / entry.name
        if not link.exists():
            link.symlink_to(entry)
    return folder
