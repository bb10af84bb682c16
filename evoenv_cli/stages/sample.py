"""`evoenv sample`: training rows from an environment library.

Each row is a chat prompt (the environment's task plus the answer-format instruction) with
its reference answer and everything the reward needs to score a completion later (`env_id`,
the instance as JSON, and the answer rule the prompt was made with: `answer_tag` and
`format_weight`, which every reward entry point reads from the row). Instance seeds are derived from (base seed, environment name, row), and
training seeds stay below 2**31 while held-out seeds (`evaluate`) have the top bit set, so the
two never meet.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from evoenv_cli import artifacts, row_formats
from evoenv_cli.artifacts import EnvLibrary
from evoenv_cli.config import ROW_FORMATS, AnswerConfig, SampleConfig, check_values
from evoenv_cli.conversations import Draw, Prepared, build_messages, draw_levels, levels_for, prepare
from evoenv_cli.envfile import EnvFile
from evoenv_cli.errors import InputError
from evoenv_cli.runtime import contract
from evoenv_cli.runtime.instances import instance_seed
from evoenv_cli.runtime.workers import SandboxWorkers
from evoenv_cli.stage import Context, Result, Round, Stage, register

__all__ = [
    "FORMATS",
    "LEVELS",
    "REQUIRED",
    "SampleReport",
    "build_messages",
    "check_config",
    "instance_seed",
    "levels_for",
    "make_row",
    "run",
    "stream",
    "to_format",
]

FORMATS = ROW_FORMATS
BATCH_ROWS = 2048  # rows drawn per batch of sandbox calls: what memory holds, whatever the total
LEVELS = contract.LEVELS
REQUIRED = tuple(contract.REQUIRED_FUNCTIONS)


@dataclass
class SampleReport:
    rows: list[dict] = field(default_factory=list)  # `run`'s rows (`stream` keeps none)
    per_env: dict[str, int] = field(default_factory=dict)
    skipped: list[dict] = field(default_factory=list)  # {"env", "seed", "difficulty", "reason"}
    written: int = 0  # rows written to the output


def check_config(cfg: SampleConfig, library: EnvLibrary) -> None:
    """The field rules of config.SampleConfig (as a recipe or a flag is checked), then what
    they cannot say alone: two settings that exclude each other, and the index a setting needs."""
    check_values(cfg, "sample")
    if cfg.difficulty is not None and cfg.difficulty_from is not None:
        raise InputError("--difficulty and --difficulty-from exclude each other: pass one")
    if cfg.difficulty_from == "index" and not (library.root / artifacts.INDEX).is_file():
        raise InputError(f"{library.root}: no index.jsonl to take calibrated difficulties from")


def run(
    library: EnvLibrary,
    cfg: SampleConfig,
    pool: SandboxWorkers,
    answer: AnswerConfig | None = None,
    format_weight: float = 0.0,
) -> SampleReport:
    """Rows for every environment, held in the report (`stream` draws them without keeping them);
    `answer`: the recipe's answer format (default: the defaults); `format_weight`: the recipe's
    reward.format_weight. Each row carries both."""
    report = SampleReport()
    report.rows = list(stream(library, cfg, pool, report, answer, format_weight))
    return report


def stream(
    library: EnvLibrary,
    cfg: SampleConfig,
    pool: SandboxWorkers,
    report: SampleReport,
    answer: AnswerConfig | None = None,
    format_weight: float = 0.0,
) -> Iterator[dict]:
    """The rows in order, drawn BATCH_ROWS at a time, so memory holds one batch whatever the
    number of rows; `report` counts them per environment and collects the skips as they happen."""
    check_config(cfg, library)
    report.skipped += [{"env": r.file, "seed": None, "difficulty": None, "reason": r.reason} for r in library.refused]
    wanted: list[tuple[EnvFile, str, list[int]]] = []  # (env, NAME, each row's level)
    for env in library.files:
        error = pool.load_error(env)
        meta = {} if error else pool.describe(env)
        missing = [n for n in REQUIRED if n not in meta.get("callables", [])]
        if error or missing or meta.get("name_problem"):
            reason = error or (f"missing {', '.join(missing)}" if missing else meta["name_problem"])
            report.skipped.append({"env": env.path.name, "seed": None, "difficulty": None, "reason": reason})
            continue
        name = meta.get("NAME") or env.name
        levels = levels_for(env, library, cfg)
        if not levels:
            report.skipped.append(
                {"env": env.path.name, "seed": None, "difficulty": None, "reason": "calibrated: no level in band"}
            )
            continue
        wanted.append((env, name, draw_levels(levels, cfg.per_env)))
    answer = answer or AnswerConfig()
    for _, name, _ in wanted:
        report.per_env[name] = 0
    for batch in batches(wanted, cfg, BATCH_ROWS):
        prepared, skipped = prepare(pool, batch, cfg, answer)
        report.skipped += skipped
        for plan, made in zip(batch, prepared):
            report.per_env[plan.name] += len(made)
            for p in made:
                yield make_row(p, answer.tag, format_weight)


def batches(wanted: list[tuple[EnvFile, str, list[int]]], cfg: SampleConfig, size: int) -> Iterator[list[Draw]]:
    """Each environment's rows, in order, as plans of `size` rows a batch (an environment may
    span batches); a batch's instance seeds are made with it, so memory holds one batch."""
    batch: list[Draw] = []
    room = size
    for env, name, drawn in wanted:
        start = 0
        while start < len(drawn):
            rows = range(start, min(len(drawn), start + room))
            batch.append(Draw(env, name, [(instance_seed(cfg.seed, name, i, cfg.split), drawn[i]) for i in rows]))
            start, room = rows.stop, room - len(rows)
            if room == 0:
                yield batch
                batch, room = [], size
    if batch:
        yield batch


def make_row(p: Prepared, answer_tag: str = "answer", format_weight: float = 0.0) -> dict:
    return {
        "prompt": p.messages,
        "answer": p.answer,
        "solution": p.answer,
        "env_id": p.env.env_id,
        "env_name": p.name,
        "instance": json.dumps(p.instance, ensure_ascii=False),
        "seed": p.seed,
        "difficulty": p.difficulty,
        "data_source": f"evoenv/{p.name}",
        "answer_tag": answer_tag,
        "format_weight": float(format_weight),
    }


def to_format(row: dict, fmt: str, index: int, split: str = "train") -> dict:
    """The same row as another trainer expects it, by that format's record in
    `row_formats.FORMATS` (`trl` is the row itself); an unknown format is a ValueError."""
    return row_formats.get(fmt).write(row, index, split)


# -- the stage's record (evoenv_cli/stage.py) ------------------------------------------------------
def _check(ctx: Context, lib: EnvLibrary) -> None:
    lib.check_python()
    check_config(ctx.recipe.sample, lib)
    if str(ctx.out) != "-":
        artifacts.check_output_file(ctx.out)


def _run(ctx: Context, lib: EnvLibrary, out: Path, llm, bar) -> SampleReport:
    """The rows written to OUT: a JSONL file ('-': stdout) or a .parquet file; no row at all
    (nothing calibrated in band) is an empty file, which the loop reads as nothing to train."""
    r = ctx.recipe
    cfg = r.sample
    report = SampleReport()
    write = artifacts.write_parquet_atomic if str(out).endswith(".parquet") else artifacts.write_jsonl_atomic
    with contextlib.ExitStack() as stack:
        pool = ctx.session.workers if ctx.session is not None else stack.enter_context(own_pool(r.runtime))
        drawn = stream(lib, cfg, pool, report, answer=r.answer, format_weight=r.reward.format_weight)
        rows = (to_format(row, cfg.format, i, cfg.split) for i, row in enumerate(drawn))
        report.written = write(str(out) if str(out) == "-" else out, rows)  # written as they are drawn
    return report


def own_pool(runtime) -> SandboxWorkers:
    return SandboxWorkers(limits=runtime.limits, sandbox_mode=runtime.sandbox, workers=runtime.workers)


def _in_round(rnd: Round, got: dict) -> dict:
    """In the loop: rows from the pool at the levels its index calibrated, drawn with the round's seed."""
    return dict(recipe=rnd.seeded("sample", difficulty_from="index"), library=rnd.pool.root)


def _line(label: str, done: Result, ctx: Context) -> str:
    n = done.value
    if not n.written:  # an empty train.jsonl: the round trains nothing
        return (
            f"sample: no pool environment has a level calibrated in band and above chance for this "
            f"policy ({len(n.skipped)} skipped; their calibration is in {ctx.library / artifacts.INDEX}): "
            "nothing to train on this round"
        )
    return f"sample: {n.written} rows from {len(n.per_env)} environments ({len(n.skipped)} skipped) -> {done.marker}"


STAGE = register(
    Stage(
        "sample",
        sections=("sample", "answer", "reward.format_weight", "runtime"),
        marker="train.jsonl",
        settings=None,  # one file, written whole (atomically): nothing to resume
        run=_run,
        place=9,
        partial=("rows", "nothing: rows stream into a temporary file, renamed into place once all are written"),
        rerun="run it again",
        check=_check,
        allow_empty=False,
        total=lambda ctx, lib: None,  # no progress bar
        in_round=_in_round,
        gives="rows",
        line=_line,
    )
)
