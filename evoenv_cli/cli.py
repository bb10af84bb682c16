"""The `evoenv` command: one thin command per stage of the loop.

Each command turns flags into a stage config (recipe first, flags over it), calls the stage,
and maps failures to exit codes: 2 for bad input (one line, no traceback), 1 for a run error,
130 on Ctrl-C. Data goes to stdout or files; progress and messages go to stderr.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from evoenv_cli.artifacts import InputError

app = typer.Typer(
    name="evoenv",
    help="Self-evolving reasoning RL: synthesize verifiable environments, admit them through "
    "four contracts, and train on them with GRPO.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, highlight=False)
state = {"verbose": False}

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="Recipe YAML; flags override it.")]
SandboxOpt = Annotated[str | None, typer.Option("--sandbox", help="Where environment code runs: auto (bwrap when it works), bwrap, or process (weaker fallback).")]
WorkersOpt = Annotated[int | None, typer.Option("--workers", help="Sandboxed worker processes.", min=1)]


def fail(code: int, message: str) -> None:
    err.print(f"[red]error:[/] {message}", soft_wrap=True)
    raise typer.Exit(code)


def stage_command(fn):
    """Shared error handling: InputError -> 2, Ctrl-C -> 130, anything else -> 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from evoenv_cli.runtime.sandbox import SandboxUnavailable

        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except (InputError, SandboxUnavailable) as exc:
            if state["verbose"]:
                err.print_exception()
            fail(2, str(exc))
        except KeyboardInterrupt:
            err.print("[yellow]interrupted[/]: files already written are complete; rerun with --resume where the stage has it")
            raise typer.Exit(130) from None
        except Exception as exc:  # a run error: one line unless --verbose
            if state["verbose"]:
                err.print_exception()
            fail(1, f"{type(exc).__name__}: {exc}")

    return wrapper


@app.callback()
def main_options(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show tracebacks for errors.")] = False,
) -> None:
    state["verbose"] = verbose


def _runtime(config: Path | None, sandbox: str | None, workers: int | None):
    from evoenv_cli import config as cfgmod

    recipe = cfgmod.load_recipe(config)
    recipe.runtime = cfgmod.override(recipe.runtime, sandbox=sandbox, workers=workers)
    return recipe


def _pool(recipe):
    from evoenv_cli.runtime.pool import SandboxPool

    rt = recipe.runtime
    return SandboxPool(limits=rt.limits, sandbox_mode=rt.sandbox, workers=rt.workers)


@app.command()
@stage_command
def sample(
    library: Annotated[Path, typer.Argument(help="Environment library: a folder of .py files or a stage's output folder.")],
    out: Annotated[str, typer.Option("--out", "-o", help="Output JSONL ('-' for stdout).")],
    per_env: Annotated[int | None, typer.Option("--per-env", "-n", help="Rows per environment.")] = None,
    difficulty: Annotated[int | None, typer.Option("--difficulty", "-d", help="One difficulty 1..10 for every row (default: rows spread over 1..10).")] = None,
    difficulty_from: Annotated[str | None, typer.Option("--difficulty-from", help="'index': the calibrated levels in the library's index.jsonl.")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Base seed for instance seeds.")] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="trl (default), verl or openrlhf.")] = None,
    config: ConfigOpt = None,
    sandbox: SandboxOpt = None,
    workers: WorkersOpt = None,
) -> None:
    """Write training rows (chat prompt, reference answer, instance) from a library.

    Example: [bold]evoenv sample seeds/ --out data.jsonl --per-env 64 --seed 1[/]
    """
    from evoenv_cli import artifacts
    from evoenv_cli import config as cfgmod
    from evoenv_cli.stages import sample as stage

    recipe = _runtime(config, sandbox, workers)
    cfg = cfgmod.override(recipe.sample, per_env=per_env, difficulty=difficulty,
                          difficulty_from=difficulty_from, seed=seed, format=fmt)
    lib = artifacts.EnvLibrary.open(library)
    lib.check_python()
    stage.check_config(cfg, lib)
    if out != "-":
        artifacts.check_writable_parent(Path(out))
    with _pool(recipe) as pool:
        report = stage.run(lib, cfg, pool)
    rows = (stage.to_format(r, cfg.format, i) for i, r in enumerate(report.rows))
    n = artifacts.write_jsonl_atomic(out, rows)
    for s in report.skipped[:5]:
        err.print(f"[yellow]skipped[/] {s['env']} seed={s['seed']} d={s['difficulty']}: {s['reason']}")
    if len(report.skipped) > 5:
        err.print(f"[yellow]... and {len(report.skipped) - 5} more skipped[/]")
    err.print(f"sampled {n} rows from {len(report.per_env)} environments"
              f" ({len(report.skipped)} skipped) -> {out}")


@app.command()
@stage_command
def validate(
    library: Annotated[Path, typer.Argument(help="Candidates: a folder of .py files or a previous stage's output folder.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (envs/, verdicts.jsonl, index.jsonl, manifest.json, summary.json).")],
    config: ConfigOpt = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue a previous run into OUT, skipping files already judged.")] = False,
    clean: Annotated[bool, typer.Option("--clean", help="Delete OUT's results first.")] = False,
    workers: WorkersOpt = None,
    sandbox: SandboxOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout instead of the table.")] = False,
) -> None:
    """The execution contract: admit only environment files that pass ten staged checks
    (static, load, run, determinism, diversity, reference, discrimination, constant_answer,
    leak, budget); the first failing check is the verdict's stage.

    Example: [bold]evoenv validate runs/r1/synthesize --out runs/r1/validate --workers 2[/]
    """
    import json

    from evoenv_cli import artifacts
    from evoenv_cli.stages import validate as stage

    recipe = _runtime(config, sandbox, workers)
    lib = artifacts.EnvLibrary.open(library, allow_empty=True)
    out_dir = artifacts.prepare_out_dir(out, resume, clean)
    progress = _progress(len(lib.files), "validate", quiet=as_json)
    try:
        with progress:
            summary = stage.run(lib, recipe.validate, recipe.runtime, out_dir,
                                on_verdict=lambda v: progress.advance(v))
    except KeyboardInterrupt:
        err.print(f"[yellow]interrupted[/]: verdicts so far are in {out_dir / 'verdicts.jsonl'}; "
                  "rerun with --resume to finish")
        raise typer.Exit(130) from None
    if as_json:
        print(json.dumps(summary.record()))
    else:
        _funnel(summary.record(), out_dir)


class _progress:
    """A rich progress bar on stderr that counts verdicts (silent with --json)."""

    def __init__(self, total: int, label: str, quiet: bool = False):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.bar = None if quiet else Progress(
            TextColumn(f"[bold]{label}[/]"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[last]}"), TimeElapsedColumn(), console=err, transient=True)
        self.total = total

    def __enter__(self):
        if self.bar:
            self.bar.__enter__()
            self.task = self.bar.add_task(self.total, total=self.total, last="")
        return self

    def __exit__(self, *exc):
        if self.bar:
            self.bar.__exit__(*exc)

    def advance(self, verdict) -> None:
        if self.bar:
            mark = "[green]admitted[/]" if verdict.admitted else f"[red]{verdict.stage}[/]"
            self.bar.update(self.task, advance=1, last=f"{verdict.file}: {mark}")


def _funnel(summary: dict, out_dir: Path) -> None:
    from rich.table import Table

    table = Table(title=f"{summary['stage']} funnel", title_justify="left")
    table.add_column("step")
    table.add_column("count", justify="right")
    table.add_row("entered", str(summary["entered"]))
    for stage_name, n in summary["rejected_by_stage"].items():
        table.add_row(f"  rejected: {stage_name}", str(n) if n else "[dim]0[/]")
    table.add_row("[bold]admitted[/]", f"[bold]{summary['admitted']}[/]")
    err.print(table)
    err.print(f"results in {out_dir}")


@app.command()
@stage_command
def preview(
    data: Annotated[Path, typer.Argument(help="A JSONL file written by `evoenv sample`.")],
    n: Annotated[int, typer.Option("--n", "-n", help="Rows to show.")] = 3,
) -> None:
    """Show sampled rows of a few environments: difficulty, prompt and reference answer.

    Example: [bold]evoenv preview data.jsonl -n 2[/]
    """
    from rich.panel import Panel

    from evoenv_cli import artifacts

    out = Console()
    shown: set = set()
    for row in artifacts.read_jsonl(data):
        if len(shown) >= n:
            break
        if row.get("env_id") in shown:  # one row per environment: a preview shows variety
            continue
        shown.add(row.get("env_id"))
        messages = row.get("prompt") or row.get("input") or []
        text = "\n\n".join(m.get("content", "") for m in messages if isinstance(m, dict))
        ref = row.get("answer", row.get("label", ""))
        title = f"{row.get('env_name', '?')}  difficulty={row.get('difficulty')}  seed={row.get('seed')}"
        out.print(Panel(f"{text}\n\n[bold green]reference:[/] {ref}", title=title, expand=False))


NOT_YET = {
    "synthesize": ("Write candidate environments with the policy (LLM).", "evoenv synthesize --seeds seeds/ --out runs/r1/synth --n 64 --model M"),
    "review": ("The semantic contract: the policy reviews its own candidates.", "evoenv review runs/r1/validate --out runs/r1/review --model M"),
    "calibrate": ("The difficulty contract: keep environments the solver sometimes solves.", "evoenv calibrate runs/r1/review --out runs/r1/calibrate --model M"),
    "dedupe": ("The novelty contract: drop near-duplicates of the pool and of each other.", "evoenv dedupe runs/r1/calibrate --out runs/r1/dedupe --against runs/pool"),
    "compose": ("RACES: compose environments into new verifiable ones.", "evoenv compose seeds/ --out runs/r1/compose --n 20"),
    "train": ("GRPO on sampled rows, rewarded by the environments in the sandbox.", "evoenv train data.jsonl --library runs/pool --model M --out runs/r1/ckpt"),
    "evaluate": ("Held-out environment instances and benchmark files.", "evoenv evaluate --model runs/r1/ckpt --out runs/r1/eval --library runs/pool"),
}


def _not_yet(name: str, summary: str, example: str):
    def command(args: Annotated[list[str] | None, typer.Argument(hidden=True)] = None) -> None:
        err.print(f"evoenv {name}: not implemented yet")
        raise typer.Exit(1)

    command.__doc__ = f"{summary}\n\nExample: [bold]{example}[/]"
    command.__name__ = name
    return command


for _name, (_summary, _example) in NOT_YET.items():
    app.command(name=_name, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(
        _not_yet(_name, _summary, _example)
    )


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
