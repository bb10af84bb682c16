"""An environment file as every stage holds it: its path and exact bytes, named by the hash
of those bytes. A record of its own (no sandbox, no I/O beyond reading the file), so that code
which only passes environments around does not load the runtime."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class EnvFile:
    """An environment's exact bytes; what runs is what was hashed."""

    path: Path
    source: bytes
    env_id: str

    @classmethod
    def from_path(cls, path: str | Path) -> EnvFile:
        source = Path(path).read_bytes()
        return cls(Path(path), source, env_id_of(source))

    @property
    def name(self) -> str:
        return self.path.stem


def env_id_of(source: bytes) -> str:
    return hashlib.sha256(source).hexdigest()[:16]
