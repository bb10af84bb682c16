"""A pool's saved index: the signatures of its environments in one binary file, reused by the
next round's `--against` instead of sampling the pool again. A magic line, a JSON header, then
an .npz of plain arrays read with allow_pickle=False, so a forged index file can be wrong but
never runs code. The keys here (`settings_key`, `index_keys`) say when a saved signature is
stale."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evoenv_cli import artifacts
from evoenv_cli.config import DedupeConfig
from evoenv_cli.envfile import EnvFile
from evoenv_cli.novelty.index import KINDS, NoveltyIndex, lsh_weights
from evoenv_cli.novelty.minhash import (
    MINHASH_SCHEME,
    MINHASH_SEED,
    SIGNATURE_VERSION,
    behaviour_pairs,
    code_signature,
    scaffold_for,
)
from evoenv_cli.novelty.tokens import STABLE_ATTRS, STABLE_BARE

INDEX_FILE = "dedupe-index.bin"  # its name in a library's folder
INDEX_MAGIC = b"evoenv-dedupe-index-v2\n"
MAX_INDEX_HEADER_BYTES = 64 << 20
_VOCABULARY_DIGEST = hashlib.sha256("\n".join(sorted(STABLE_BARE) + ["."] + sorted(STABLE_ATTRS)).encode()).hexdigest()


def _signature_settings(cfg: DedupeConfig) -> dict:
    """Everything a signature depends on besides the file itself (the stable names come from
    the running Python's builtins and stdlib, so they are in it too)."""
    return {
        "signature_version": SIGNATURE_VERSION,
        "minhash": [MINHASH_SCHEME, MINHASH_SEED],
        "stable_names": _VOCABULARY_DIGEST,
        "num_perm": cfg.num_perm,
        "code_shingle": cfg.code_shingle,
        "behaviour_shingle": cfg.behaviour_shingle,
        "behaviour_pairs": behaviour_pairs(cfg),
    }


def settings_key(cfg: DedupeConfig) -> str:
    return hashlib.sha256(json.dumps(_signature_settings(cfg)).encode()).hexdigest()[:16]


def _digest(values: np.ndarray) -> str:
    return hashlib.sha256(values.astype("<u4").tobytes()).hexdigest()[:16]


def index_keys(files: list[EnvFile], cfg: DedupeConfig, scaffold: np.ndarray) -> tuple[str, str]:
    """(signatures key, LSH key): the pool's files (names and env_ids, in order) with the
    settings that shape the signatures (the scaffold taken out of the code included); then
    also those that shape the LSH tables."""
    sig = hashlib.sha256(
        json.dumps(
            {
                **_signature_settings(cfg),
                "scaffold": _digest(scaffold),
                "files": [[e.path.name, e.env_id] for e in files],
            }
        ).encode()
    ).hexdigest()
    lsh = hashlib.sha256(
        json.dumps(
            {
                "signatures": sig,
                "thresholds": [cfg.code_threshold, cfg.behaviour_threshold],
                "weights": list(lsh_weights(cfg)),
                "datasketch": _datasketch_version(),
            }
        ).encode()
    ).hexdigest()
    return sig, lsh


def _datasketch_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("datasketch")
    except metadata.PackageNotFoundError:
        return "?"


def save_index(path: Path, files: list[EnvFile], index: NoveltyIndex, rows: list[int]) -> None:
    """Write the signatures of `rows`, which are `files` in order, to `path`: a magic line, a
    JSON header (keys, members, payload size and sha256), then an .npz of plain uint32/bool
    arrays. The LSH tables are not saved: they are rebuilt from the signatures on load. The
    code signatures are made again with the scaffold these files give as a pool, the one a
    later `--against` of them computes."""
    cfg = index.cfg
    scaffold = scaffold_for([files], cfg)
    code = np.zeros((len(rows), cfg.num_perm), dtype="<u4")
    behaviour = np.zeros((len(rows), cfg.num_perm), dtype="<u4")
    has = {k: np.zeros(len(rows), dtype=bool) for k in KINDS}
    for i, (env, row) in enumerate(zip(files, rows)):
        for kind, matrix in (("code", code), ("behaviour", behaviour)):
            values = code_signature(env.source, cfg, scaffold) if kind == "code" else index.values(kind, row)
            if values is not None:
                matrix[i] = values
                has[kind][i] = True
    buffer = io.BytesIO()
    np.savez(buffer, code=code, behaviour=behaviour, has_code=has["code"], has_behaviour=has["behaviour"])
    payload = buffer.getvalue()
    members = [[e.path.name, e.env_id, index.members[row].name] for e, row in zip(files, rows)]
    sig_key, lsh_key = index_keys(files, cfg, scaffold)
    header = {
        "version": 2,
        "signature_key": sig_key,
        "lsh_key": lsh_key,
        "files": len(files),
        "members": members,
        "num_perm": cfg.num_perm,
        "payload_bytes": len(payload),
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
    }
    with artifacts.atomic_file(path, "wb") as f:  # fsynced: a kill leaves the old index or the new
        f.write(INDEX_MAGIC + json.dumps(header).encode() + b"\n")
        f.write(payload)


@dataclass
class SavedIndex:
    members: list[tuple[str, str, str | None]]
    code: np.ndarray
    behaviour: np.ndarray
    has_code: np.ndarray
    has_behaviour: np.ndarray
    same_lsh: bool  # the LSH settings are those it was saved with (else "rebuilt" is reported)


def _arrays(payload: bytes, n: int, num_perm: int) -> dict[str, np.ndarray]:
    """The payload's four arrays, of exactly the expected shapes and types; ValueError if not."""
    with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
        want = {
            "code": ((n, num_perm), np.uint32),
            "behaviour": ((n, num_perm), np.uint32),
            "has_code": ((n,), np.bool_),
            "has_behaviour": ((n,), np.bool_),
        }
        if set(npz.files) != set(want):
            raise ValueError("unexpected arrays")
        out = {}
        for key, (shape, dtype) in want.items():
            array = npz[key]
            if array.shape != shape or array.dtype != dtype:
                raise ValueError(f"{key} has shape {array.shape} and type {array.dtype}")
            out[key] = array
    return out


def load_index(
    path: Path, files: list[EnvFile], cfg: DedupeConfig, scaffold: np.ndarray
) -> tuple[SavedIndex | None, str]:
    """A pool's saved index when it matches the pool's files and the settings, else (None, why).
    The header is checked, and the payload's size and sha256; the arrays are read with
    allow_pickle=False and must have the expected shapes: nothing in the file is executed."""
    if not path.is_file():
        return None, "no saved index"
    sig_key, lsh_key = index_keys(files, cfg, scaffold)
    try:
        with path.open("rb") as f:
            if f.read(len(INDEX_MAGIC)) != INDEX_MAGIC:
                return None, "saved index unreadable (not an evoenv dedupe index)"
            header = json.loads(f.readline(MAX_INDEX_HEADER_BYTES))
            if not isinstance(header, dict) or header.get("version") != 2:
                return None, "saved index unreadable (unknown version)"
            if header.get("signature_key") != sig_key:
                return None, "saved index stale (the pool's files or the signature settings changed)"
            size = header.get("payload_bytes")
            if type(size) is not int or size < 0:
                return None, "saved index unreadable (bad header)"
            payload = f.read(size + 1)
        if len(payload) != size or hashlib.sha256(payload).hexdigest() != header.get("payload_sha256"):
            return None, "saved index unreadable (payload size or checksum mismatch)"
        members = header.get("members")
        if not isinstance(members, list) or not all(
            isinstance(m, list)
            and len(m) == 3
            and all(isinstance(x, str) for x in m[:2])
            and (m[2] is None or isinstance(m[2], str))
            for m in members
        ):
            return None, "saved index unreadable (bad members)"
        arrays = _arrays(payload, len(members), cfg.num_perm)
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
        return None, f"saved index unreadable ({type(exc).__name__})"
    saved = SavedIndex(
        [tuple(m) for m in members],
        arrays["code"].astype(np.uint32),
        arrays["behaviour"].astype(np.uint32),
        arrays["has_code"],
        arrays["has_behaviour"],
        header.get("lsh_key") == lsh_key,
    )
    if [tuple(m[:2]) for m in saved.members] != [(e.path.name, e.env_id) for e in files]:
        return None, "saved index stale (its members differ from the pool's files)"
    return saved, "loaded" if saved.same_lsh else "loaded signatures; LSH tables rebuilt (thresholds changed)"
