"""What every admission stage (validate, review, calibrate, dedupe, compose) writes, in one
place: verdicts appended as they are decided, admitted files copied unchanged into envs/,
and at the end index.jsonl, summary.json and manifest.json written atomically.

A stage decides; `AdmissionLog` records. Killed at any point and resumed, a stage finds its
final verdicts again (`log.done`), judges only the rest, and duplicates nothing. Library
entries that were refused unread (`EnvLibrary.refused`) get a verdict of stage "library";
the manifest says which jails ran the stage's code (`sandbox`).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from evoenv_cli import artifacts
from evoenv_cli.envfile import EnvFile

VERDICTS = "verdicts.jsonl"  # a verdict per file judged, in the order decided: a stopped run's partial records
SUMMARY = "summary.json"  # the counts, written last: the finished marker of every admission stage

CORE_KEYS = ("file", "env_id", "name", "admitted", "stage", "reason")
# Measured times vary from run to run: they stay in verdicts and manifests, never in index.jsonl
# (which the pool is made of), so the same inputs give byte-identical libraries.
TIMING_KEYS = ("wall_s", "import_seconds", "import_seconds_fresh_worker", "seconds_at_top_level", "seconds_by_level")


@dataclass
class Verdict:
    file: str
    env_id: str | None  # None only for a library entry that was refused unread
    name: str | None
    admitted: bool
    stage: str  # the check that decided, or "admitted"
    reason: str
    measurements: dict = field(default_factory=dict)

    def record(self) -> dict:
        return {
            "file": self.file,
            "env_id": self.env_id,
            "name": self.name,
            "admitted": self.admitted,
            "stage": self.stage,
            "reason": self.reason,
            **self.measurements,
        }


@dataclass
class Summary:
    stage: str
    entered: int
    admitted: int
    rejected_by_stage: dict[str, int]
    admitted_uncalibrated: int | None = None  # calibrate: admitted with nothing measured

    def record(self) -> dict:
        record = {
            "stage": self.stage,
            "entered": self.entered,
            "admitted": self.admitted,
            "rejected": self.entered - self.admitted,
            "rejected_by_stage": self.rejected_by_stage,
        }
        if self.admitted_uncalibrated is not None:
            record["admitted_uncalibrated"] = self.admitted_uncalibrated
        return record


class AdmissionLog:
    """verdicts.jsonl of one stage run, resumable; thread-safe `add`."""

    def __init__(self, out: Path, files: list[EnvFile] | None, retry_stages: tuple[str, ...] = ()):
        """`files` None: the files become known as they are made (compose); every earlier
        verdict is kept and the stage compares env_ids itself. Verdicts whose stage is in
        `retry_stages` (a backend that failed) are not final: a resumed run judges them again."""
        self.out = out
        self.path = out / VERDICTS
        self.started = artifacts.now_iso()
        self.current = {e.path.name: e for e in files or []}
        self.done: dict[str, dict] = {}
        kept = 0
        records = artifacts.read_jsonl_tolerant(self.path)
        for record in records:
            name = record.get("file")
            env = self.current.get(name)
            known = files is None or (env is not None and record.get("env_id") == env.env_id)
            final = record.get("stage") not in retry_stages
            if isinstance(name, str) and known and final and name not in self.done:
                self.done[name] = record
                kept += 1
        if kept != len(records):  # verdicts of files no longer in the input, or changed since
            artifacts.write_jsonl_atomic(self.path, list(self.done.values()))
        self._lock = threading.Lock()
        self._appender = artifacts.JsonlAppender(self.path)

    def pending(self) -> list[EnvFile]:
        return [e for e in self.current.values() if e.path.name not in self.done]

    def add(self, verdict: Verdict, source: bytes | None = None) -> None:
        """Record a final verdict; an admitted file lands in envs/ before its verdict does."""
        with self._lock:
            if verdict.admitted:
                artifacts.write_bytes_atomic(
                    self.out / "envs" / verdict.file,
                    source if source is not None else self.current[verdict.file].source,
                )
            record = verdict.record()
            self._appender.append(record)
            self.done[verdict.file] = record

    def close(self) -> None:
        self._appender.close()

    def __enter__(self) -> AdmissionLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def finish(
        self,
        stage: str,
        checks: tuple[str, ...],
        library: artifacts.EnvLibrary,
        config: dict,
        order: list[str] | None = None,
        index_extra: dict[str, dict] | None = None,
        manifest_extra: dict | None = None,
        count_uncalibrated: bool = False,
    ) -> Summary:
        """envs/ made exactly the admitted set; index, summary and manifest written atomically.
        Each admitted file's index record carries forward the input's and adds this stage's
        measurements under the stage's name. `count_uncalibrated`: the summary counts apart
        the admitted verdicts marked `uncalibrated` (nothing was measured)."""
        for refused in library.refused:  # entries the library would not read: judged unread
            if refused.file not in self.done:
                self.add(Verdict(refused.file, None, None, False, "library", refused.reason))
        order = (order or [e.path.name for e in library.files]) + [r.file for r in library.refused]
        records = [self.done[f] for f in order if f in self.done]
        admitted = [r for r in records if r["admitted"]]
        keep = {r["file"] for r in admitted}
        for f in (self.out / "envs").iterdir():
            if f.name not in keep:
                f.unlink()
        index = []
        for r in admitted:
            record = dict(library.index.get(r["env_id"], {}))
            record.update({"file": r["file"], "env_id": r["env_id"], "name": r["name"]})
            record.setdefault("origin", "input")
            record[stage] = {k: v for k, v in r.items() if k not in CORE_KEYS and k not in TIMING_KEYS}
            record.update((index_extra or {}).get(r["file"], {}))
            index.append(record)
        artifacts.write_jsonl_atomic(self.out / artifacts.INDEX, index)
        by_check = Counter(r["stage"] for r in records if not r["admitted"])
        checks = checks + ("library",) if by_check.get("library") else checks
        summary = Summary(
            stage,
            len(records),
            len(admitted),
            {c: by_check.get(c, 0) for c in checks},
            sum(bool(r.get("uncalibrated")) for r in admitted) if count_uncalibrated else None,
        )
        artifacts.write_json_atomic(
            self.out / artifacts.MANIFEST,
            artifacts.manifest(
                stage,
                config,
                library.files,
                self.started,
                {"entered": summary.entered, "admitted": summary.admitted, **by_check},
                {"library": str(library.root), "refused": [vars(r) for r in library.refused], **(manifest_extra or {})},
                out=self.out,
            ),
        )
        # the marker last: a kill before it leaves the stage unfinished, so a rerun writes all three
        artifacts.write_json_atomic(self.out / SUMMARY, summary.record())
        return summary
