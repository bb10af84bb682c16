"""File modes that follow the umask: what a new file gets, and widening what a library wrote
0600. Its own module (standard library only) so a backend that saves a model (llm/tiny.py) need
not import the artifacts layer, and the artifacts layer re-exports it."""

from __future__ import annotations

import os
from pathlib import Path


def _umask() -> int:
    """The process umask, read without setting it (os.umask sets it, racing other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return _UMASK_AT_IMPORT


_UMASK_AT_IMPORT = os.umask(0o022)
os.umask(_UMASK_AT_IMPORT)


def new_file_mode() -> int:
    """The mode `open()` gives a new file under the current umask (0644 under 022)."""
    return 0o666 & ~_umask()


def follow_umask(root: str | Path) -> None:
    """Widen files under `root` that a library wrote 0600 (temp-file-and-rename savers, e.g.
    safetensors through transformers) to what the umask allows, so a teammate can read them;
    no permission bit is ever removed."""
    mode = new_file_mode()
    root = Path(root)
    paths = [root] if root.is_file() else (p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    for p in paths:
        current = p.stat().st_mode & 0o777
        if current | mode != current:
            p.chmod(current | mode)
