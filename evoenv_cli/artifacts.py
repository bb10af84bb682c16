"""Reading and writing what stages pass each other: JSONL files ('-' for stdin/stdout),
atomically written summaries and manifests, stage output directories, environment libraries.

One writer for each kind of file, so every stage gets the same guarantees: appends are flushed
as records finish, summaries are replaced atomically (through a temp file with a fixed name, so
a rerun replaces what a killed run left), every line written is valid UTF-8, bad input is an
`InputError` naming the file and the problem. A library reads only what is its own: a symlink
that leaves it, a file name that is not UTF-8 or a file too big to be an environment is refused
with a reason (a verdict in admission stages), never read.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

from evoenv_cli.envfile import EnvFile, env_id_of
from evoenv_cli.errors import InputError  # also the old path users' code names (artifacts.InputError)
from evoenv_cli.filemodes import follow_umask, new_file_mode  # noqa: F401 - re-exported: its old home
from evoenv_cli.runtime.contract import MAX_SOURCE_BYTES, parse_python, valid_text

MAX_FILE_BYTES = 10 * MAX_SOURCE_BYTES  # a library file larger than this is not even read


def dumps(record: Any) -> str:
    """The one JSON-line encoding: stable key order as built, UTF-8, no NaN. A lone surrogate
    anywhere (a file name, a message) becomes U+FFFD: no record can break a writer."""
    return valid_text(json.dumps(record, ensure_ascii=False, allow_nan=False))


def display_name(name: str) -> str:
    """A file name as text that any writer accepts: undecodable bytes shown as \\xNN."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _tmp_path(p: Path) -> Path:
    """Where `p` is written before it replaces `p`: one fixed name per process, so a rerun of
    a killed write truncates and replaces it instead of leaving another one beside it. Under a
    distributed launcher (`accelerate launch`, torchrun: RANK of WORLD_SIZE > 1) the name holds
    the rank, so two ranks writing one file never share a temp file (each rename is whole)."""
    if int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
        return p.with_name(f".{p.name}.rank{os.environ.get('RANK', '0')}.tmp")
    return p.with_name(f".{p.name}.tmp")


@contextlib.contextmanager
def atomic_file(path: Path, mode: str = "w") -> Iterator[Any]:
    """The one way evoenv replaces a file: written beside it (`_tmp_path`), flushed and
    fsynced, then renamed over it, so a reader or a kill sees the old file or the whole new
    one, never a part; on any error the partial file is removed and `path` is untouched."""
    tmp = _tmp_path(path)
    try:
        with tmp.open(mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# -- stdout carries data only ---------------------------------------------------------------------
_DATA_OUT: list[TextIO] = []


@contextlib.contextmanager
def stdout_for_data():
    """While a command runs, stdout carries its data only (JSONL rows, --json summaries):
    whatever else prints there (TRL's log dicts, a library's print) goes to stderr."""
    _DATA_OUT.append(sys.stdout)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _DATA_OUT.pop()


def data_stdout() -> TextIO:
    """Where a command's data goes: the real stdout, even inside `stdout_for_data`."""
    return _DATA_OUT[-1] if _DATA_OUT else sys.stdout


# -- JSONL ---------------------------------------------------------------------------------------
def read_jsonl(path: str | Path) -> Iterator[dict]:
    """Records of a JSONL file ('-' reads stdin); an unreadable line is an InputError."""
    if str(path) == "-":
        stream, name = sys.stdin, "<stdin>"
    else:
        p = Path(path)
        if not p.is_file():
            raise InputError(f"{p}: no such file")
        stream, name = p.open(encoding="utf-8"), str(p)
    try:
        for n, line in enumerate(stream, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise InputError(f"{name}:{n}: not valid JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise InputError(f"{name}:{n}: expected a JSON object per line")
            yield record
    except UnicodeDecodeError:
        raise InputError(f"{name}: not UTF-8 text") from None
    finally:
        if stream is not sys.stdin:
            stream.close()


def write_jsonl_atomic(path: str | Path, records: Iterable[dict]) -> int:
    """Write all records, replacing `path` only when complete; '-' writes stdout."""
    if str(path) == "-":
        out, n = data_stdout(), 0
        for record in records:
            out.write(dumps(record) + "\n")
            n += 1
        out.flush()
        return n
    p = Path(path)
    check_output_file(p)
    n = 0
    with atomic_file(p) as f:
        for record in records:
            f.write(dumps(record) + "\n")
            n += 1
    return n


PARQUET_GROUP_ROWS = 8192  # rows per Parquet row group: what memory holds while they stream in


def write_parquet_atomic(path: str | Path, records: Iterable[dict]) -> int:
    """Write all records as one Parquet table (nested lists and objects as Arrow types), a row
    group at a time as they come (the first group's types are the table's), replacing `path`
    only when complete. Needs pyarrow (it comes with the train extra)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(f"{path}: writing Parquet needs pyarrow (pip install pyarrow)") from None
    p = Path(path)
    check_output_file(p)
    n, writer = 0, None
    records = iter(records)
    with atomic_file(p, "wb") as f:
        try:
            while True:
                group = list(itertools.islice(records, PARQUET_GROUP_ROWS))
                if not group and writer is not None:
                    break
                table = pa.Table.from_pylist(group, schema=writer.schema if writer else None)
                writer = writer or pq.ParquetWriter(f, table.schema)
                writer.write_table(table)
                n += len(group)
                if len(group) < PARQUET_GROUP_ROWS:
                    break
        finally:
            if writer is not None:
                writer.close()
    return n


def write_text_atomic(path: str | Path, text: str) -> None:
    """Replace `path` with `text` only when it is completely written."""
    with atomic_file(Path(path)) as f:
        f.write(text)


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Replace `path` with `data` only when it is completely written."""
    with atomic_file(Path(path), "wb") as f:
        f.write(data)


def write_json_atomic(path: str | Path, obj: Any) -> None:
    with atomic_file(Path(path)) as f:
        f.write(valid_text(json.dumps(obj, ensure_ascii=False, indent=2, allow_nan=False)))
        f.write("\n")


class JsonlAppender:
    """Appends records as they finish, flushed and fsynced; a torn last line from a kill is
    dropped when the file is read back with `read_jsonl_tolerant`."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._f = self.path.open("a", encoding="utf-8")

    def append(self, record: dict) -> None:
        self._f.write(dumps(record) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_jsonl_tolerant(path: str | Path) -> list[dict]:
    """Records of a file we append to ourselves, dropping a torn final line (killed writer)."""
    p = Path(path)
    if not p.exists():
        return []
    records, good_bytes = [], 0
    with p.open("rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break
            try:
                records.append(json.loads(raw))
            except ValueError:
                break
            good_bytes += len(raw)
    if good_bytes != p.stat().st_size:
        with p.open("r+b") as f:
            f.truncate(good_bytes)
    return records


def check_writable_parent(p: Path) -> None:
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{p}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise InputError(f"{p}: folder {parent} is not writable")


def check_output_file(p: Path) -> None:
    """An output that must be a file: its folder is writable and it is not a folder (checked
    before any work is done)."""
    if p.is_dir():
        raise InputError(f"{p}: is a folder; the output here is a file")
    check_writable_parent(p)


def check_output_folder(p: Path) -> None:
    """An output that must be a folder: it is not a file, and it can be made."""
    if p.exists() and not p.is_dir():
        raise InputError(f"{p}: is a file; the output here is a folder")
    check_writable_parent(p)


# -- stage output directories ----------------------------------------------------------------------
INDEX = "index.jsonl"  # a library's index: a record per admitted file, by the stage that wrote it
MANIFEST = "manifest.json"  # what a stage run read, with what settings, and what it gave
RUN_CONFIG = "run-config.json"  # the settings a stage folder was started with, and their hash


def holds_results(d: Path) -> bool:
    """Whether a stage folder holds anything worth keeping: a file with content other than the
    settings record. A run that failed at its start (a wrong model path, a missing backend)
    leaves at most empty folders and files, so fixing the mistake and rerunning just works."""
    if not d.is_dir():
        return False
    record = (RUN_CONFIG, f".{RUN_CONFIG}.")  # the record, and its temp file while it is written
    return any(p.is_file() and not p.name.startswith(record) and p.stat().st_size > 0 for p in d.rglob("*"))


def config_hash(settings: dict) -> str:
    """A short, stable hash of a stage's resolved settings (canonical JSON)."""
    text = json.dumps(settings, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def recorded_config_hash(d: str | Path) -> str | None:
    """The config hash a stage folder was started with (None if it has no record)."""
    return _read_run_config(Path(d)).get("config_hash")


def _read_run_config(d: Path) -> dict:
    try:
        record = json.loads((d / RUN_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def settings_changes(old: Any, new: Any, prefix: str = "") -> list[str]:
    """'key: old -> new' for every leaf that differs between two settings trees."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            out += settings_changes(old.get(k, "(unset)"), new.get(k, "(unset)"), f"{prefix}{k}.")
        return out
    if old == new:
        return []
    return [f"{prefix.rstrip('.')}: {json.dumps(old, default=str)} -> {json.dumps(new, default=str)}"]


def check_parent_creatable(p: Path) -> None:
    """The nearest existing folder above `p` is a writable folder (missing ones are created)."""
    parent = p.parent if str(p.parent) else Path(".")
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"{p}: {parent} is not a folder")
    if not os.access(parent, os.W_OK):
        raise InputError(f"{p}: folder {parent} is not writable")


def prepare_out_dir(
    out: str | Path,
    resume: bool,
    clean: bool,
    envs: bool = True,
    settings: dict | None = None,
    resumable: bool | None = None,
) -> Path:
    """A stage's output folder, created (with its parents) and ready: refused if it holds
    results, unless resume (for stages that can) or clean. `envs`: an admission stage's
    folder, with envs/ in it. `resumable`: whether the stage has --resume (default: `envs`).

    `settings`: the resolved settings the results depend on; their hash goes in
    OUT/run-config.json (and from there in the manifest), and resuming a folder that was
    started with other settings is refused, naming what changed."""
    d = Path(out)
    resumable = envs if resumable is None else resumable
    if resume and clean:
        raise InputError("--resume and --clean contradict each other: pass one")
    if d.exists() and not d.is_dir():
        raise InputError(f"{d}: exists and is not a directory")
    used = holds_results(d)
    if used and not resume and not clean:
        how = "pass --resume to continue or --clean to start over" if resumable else "pass --clean to start over"
        raise InputError(f"{d}: already holds results; {how}")
    if used and resume and settings is not None:
        old = _read_run_config(d)
        if old.get("config_hash") not in (None, config_hash(settings)):
            changes = settings_changes(old.get("settings", {}), settings)
            shown = "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")
            raise InputError(
                f"{d}: was started with other settings ({shown or 'see ' + RUN_CONFIG}); "
                "resume with the same ones, or pass --clean to start over"
            )
    if d.exists() and clean:
        shutil.rmtree(d)
    check_parent_creatable(d)
    try:
        (d / "envs" if envs else d).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{d}: cannot create ({exc.strerror})") from None
    if settings is not None:
        write_json_atomic(d / RUN_CONFIG, {"config_hash": config_hash(settings), "settings": settings})
    return d


# -- environment libraries ---------------------------------------------------------------------
@dataclass(frozen=True)
class Refused:
    """A library entry that was not read (it is not the library's own, or cannot be an
    environment): admission stages give it a verdict, other stages skip it with the reason."""

    file: str  # the entry's name as valid text
    reason: str


def _read_own(f: Path, root: Path) -> bytes | Refused:
    """An entry's bytes, or why it is refused: a symlink whose target leaves the library, a
    name that is not UTF-8, a file over MAX_FILE_BYTES (not read beyond that)."""
    name = display_name(f.name)
    try:
        f.name.encode("utf-8")
    except UnicodeEncodeError:
        return Refused(name, "file name is not valid UTF-8: not read")
    target = f.resolve()
    if f.is_symlink() and not target.is_relative_to(root):
        return Refused(name, f"a symlink to {display_name(str(target))}, outside the library: not read")
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(f"{name}: unreadable ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as stream:
        data = stream.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        return Refused(name, f"file is over {MAX_FILE_BYTES} bytes, too big to be an environment: not read")
    return data


@dataclass
class EnvLibrary:
    """A directory of environment files (or a stage's output directory with envs/)."""

    root: Path
    files: list[EnvFile]
    index: dict[str, dict] = field(default_factory=dict)  # env_id -> index record
    refused: list[Refused] = field(default_factory=list)  # entries not read, with the reason

    @classmethod
    def open(cls, path: str | Path, allow_empty: bool = False) -> EnvLibrary:
        p = Path(path)
        if not p.exists():
            raise InputError(f"{p}: no such library (a folder of environment .py files)")
        envs: list[EnvFile] = []
        refused: list[Refused] = []
        if p.is_file():
            if p.suffix != ".py":
                raise InputError(f"{p}: not a Python file (an environment is a .py file)")
            root = p.parent
            try:
                envs.append(EnvFile.from_path(p))  # named on purpose: followed wherever it points
            except OSError as exc:
                raise InputError(f"{p}: unreadable ({exc.strerror})") from None
        else:
            root = p
            env_dir = p / "envs" if (p / "envs").is_dir() else p
            own = env_dir.resolve()
            for f in sorted(f for f in env_dir.iterdir() if f.suffix == ".py"):
                if not f.is_file() and not f.is_symlink():
                    continue
                if f.is_symlink() and not f.exists():
                    refused.append(Refused(display_name(f.name), "a broken symlink: not read"))
                    continue
                if not f.resolve().is_file():
                    continue
                data = _read_own(f, own)
                if isinstance(data, Refused):
                    refused.append(data)
                else:
                    envs.append(EnvFile(f, data, env_id_of(data)))
        if not envs and not refused and not allow_empty:
            raise InputError(f"{p}: empty library (no .py environment files)")
        index = {}
        if (root / INDEX).is_file() and p.is_dir():
            for record in read_jsonl(root / INDEX):
                if isinstance(record.get("env_id"), str):
                    index[record["env_id"]] = record
        return cls(root, envs, index, refused)

    def check_python(self) -> None:
        """Every file parses as Python; else an InputError naming the first that does not.
        A file over the contract's size limit is not parsed here (the pool refuses to run it)."""
        for env in self.files:
            if len(env.source) > MAX_SOURCE_BYTES:
                continue
            try:
                parse_python(env.source.decode("utf-8"), filename=str(env.path))
            except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
                line = getattr(exc, "lineno", None)
                where = f":{line}" if line else ""
                raise InputError(
                    f"{display_name(str(env.path))}{where}: not valid Python ({type(exc).__name__})"
                ) from None

    def by_id(self) -> dict[str, EnvFile]:
        return {e.env_id: e for e in self.files}


# -- manifests -------------------------------------------------------------------------------------
def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def git_commit() -> str | None:
    try:
        r = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() or None if r.returncode == 0 else None


def package_versions(
    names: Iterable[str] = ("evoenv", "typer", "rich", "datasketch", "torch", "transformers", "trl", "vllm"),
) -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            continue
    return out


def _sandbox_plans() -> list:
    from evoenv_cli.runtime import sandbox  # only a stage that ran environments has plans to record

    return sandbox.resolved_plans()


def manifest(
    stage: str,
    config: dict,
    inputs: list[EnvFile] | list[Path],
    started: str,
    counts: dict[str, int],
    extra: dict | None = None,
    out: str | Path | None = None,
) -> dict:
    """A stage's manifest; `out`: its folder, whose recorded settings hash it carries."""
    rows = []
    for item in inputs:
        if isinstance(item, EnvFile):
            rows.append({"file": item.path.name, "env_id": item.env_id})
        else:
            rows.append({"file": str(item)})
    return {
        "stage": stage,
        "config": config,
        "config_hash": recorded_config_hash(out) if out is not None else None,
        "inputs": rows,
        "versions": package_versions(),
        "git_commit": git_commit(),
        "started": started,
        "finished": now_iso(),
        "counts": counts,
        "sandbox": _sandbox_plans(),  # the jails this run used, a fallback from auto included
        **(extra or {}),
    }
