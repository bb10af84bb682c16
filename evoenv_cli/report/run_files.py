"""Reading a run folder for the report, read-only and tolerant.

A run may be finished, still going, or killed part way, and other tools may add fields or files
to it. So every file is optional, a JSONL line that does not parse (torn by a kill, or still
being written) is skipped and named, with the lines around it still read, and nothing in the
run is ever written: unlike `artifacts.read_jsonl_tolerant`, which truncates a torn tail of a
file the stage itself appends to, this reader only reports it. A round's finished steps are
read as the loop reads them, as `stage.Result`s (`results`), their markers through this reader.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from evoenv_cli import artifacts, stage, stages
from evoenv_cli.errors import InputError
from evoenv_cli.loop import ROUNDS_FILE
from evoenv_cli.stages.bound import RECORDS_FILE


@dataclass(frozen=True)
class Problem:
    """Something in the run the report could not read; shown at the top of the page."""

    path: str  # relative to the run folder
    line: int | None
    message: str

    def text(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.message}"

    def record(self) -> dict:
        return {"path": self.path, "line": self.line, "message": self.message}


@dataclass(frozen=True)
class Line:
    """One JSON object of a JSONL file and its 1-based line number."""

    number: int
    record: dict


class RunFiles:
    """The files of one run folder, each read once."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not self.root.exists():
            raise InputError(f"{self.root}: no such folder")
        if not self.root.is_dir():
            raise InputError(f"{self.root}: not a folder (a run folder holds round-NN/, pool/ and rounds.jsonl)")
        if (
            not self.rounds()
            and not (self.root / ROUNDS_FILE).is_file()
            and not (self.root / "pool" / artifacts.INDEX).is_file()
            and not self.bound_files()
        ):
            raise InputError(
                f"{self.root}: not an evoenv run (no round-NN/ folder, pool/index.jsonl, rounds.jsonl or "
                "bounds.jsonl in it)"
            )
        self.problems: list[Problem] = []
        self._jsonl: dict[str, list[Line]] = {}
        self._json: dict[str, dict | None] = {}
        self._results: dict[str, dict[str, stage.Result]] = {}

    def rounds(self) -> list[int]:
        """The round numbers that have a folder, in order."""
        return [stage.round_number(p.name) for p in stage.round_folders(self.root)]

    def bound_files(self) -> list[str]:
        """The bounds.jsonl files `evoenv bound` wrote beside its codes: in the run folder and
        one folder down (a progressive run's, or one a loop run holds), relative paths."""
        found = [self.root / RECORDS_FILE, *sorted(self.root.glob(f"*/{RECORDS_FILE}"))]
        return [str(p.relative_to(self.root)) for p in found if p.is_file()]

    def path(self, rel: str) -> Path:
        return self.root / rel

    def exists(self, rel: str) -> bool:
        return (self.root / rel).exists()

    def _problem(self, rel: str, line: int | None, message: str) -> None:
        self.problems.append(Problem(rel, line, message))

    def jsonl(self, rel: str) -> list[Line]:
        """The JSON objects of a JSONL file (none when it is missing); every line that is not
        one is named in `problems` and skipped, and the lines after it are still read."""
        if rel in self._jsonl:
            return self._jsonl[rel]
        p = self.root / rel
        out: list[Line] = []
        self._jsonl[rel] = out
        if not p.is_file():
            return out
        try:
            data = p.read_bytes()
        except OSError as exc:
            self._problem(rel, None, f"unreadable ({exc.strerror})")
            return out
        lines = data.split(b"\n")
        last = len(lines)
        if lines and lines[-1] == b"":
            lines.pop()
            last = None  # the file ends with a newline: no line is cut short
        for n, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                self._problem(rel, n, "not UTF-8 text; line skipped")
                continue
            except ValueError:
                if n == last:
                    self._problem(
                        rel, n, "torn last line (no newline at its end: a writer still running or killed); line skipped"
                    )
                else:
                    self._problem(rel, n, "torn line (not valid JSON); line skipped, the lines around it are read")
                continue
            if not isinstance(record, dict):
                self._problem(rel, n, "not a JSON object; line skipped")
                continue
            out.append(Line(n, record))
        return out

    def records(self, rel: str) -> list[dict]:
        return [line.record for line in self.jsonl(rel)]

    def json(self, rel: str) -> dict | None:
        """A JSON object file, or None when it is missing or unreadable (the latter named)."""
        if rel in self._json:
            return self._json[rel]
        p = self.root / rel
        value = None
        if p.is_file():
            try:
                parsed = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError):
                self._problem(rel, None, "not a readable JSON file; ignored")
            else:
                if isinstance(parsed, dict):
                    value = parsed
                else:
                    self._problem(rel, None, "not a JSON object; ignored")
        self._json[rel] = value
        return value

    def marker(self, path: Path) -> dict | None:
        """A step's JSON marker, by its path, read as `json` reads (an unreadable one named)."""
        return self.json(str(path.relative_to(self.root)))

    def results(self, rel: str) -> dict[str, stage.Result]:
        """The Results of the round steps finished in folder `rel` (round-NN), by name in round
        order: `stage.round_results`, the loop's own reader of a finished round."""
        if rel not in self._results:
            self._results[rel] = stage.round_results(self.root / rel, stages.round_steps(), self.marker)
        return self._results[rel]

    def result(self, name: str, rel: str) -> stage.Result | None:
        """The Result step `name` left in folder `rel` (the baseline's evaluation), or None."""
        return stage.result_in(stages.get(name), self.root / rel, self.marker)

    def text(self, rel: str, limit: int = 200_000) -> str | None:
        """A text file's contents (at most `limit` characters), or None."""
        p = self.root / rel
        if not p.is_file():
            return None
        try:
            with p.open("r", encoding="utf-8", errors="replace") as f:
                return f.read(limit)
        except OSError:
            return None
