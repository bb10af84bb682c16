"""What every `evoenv` command shares: the app, its options, its error handling and its progress
display. The commands themselves are in cli.py (the stages and the loop) and beside this file.

Each command turns flags into a stage config (recipe first, flags over it), calls the stage,
and maps failures to exit codes: 2 for bad input (one line, no traceback), 1 for a run error,
130 on Ctrl-C, 0 when the reader of a pipe goes away (`... --out - | head`). Data goes to
stdout or files, and nothing else goes to stdout (libraries' prints are sent to stderr);
progress and messages go to stderr, with rich markup escaped in every value they show.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from evoenv_cli import stages
from evoenv_cli.errors import InputError
from evoenv_cli.llm.base import backends_help
from evoenv_cli.stage import Context, StageInterrupted, execute


def reflow(text: str | None) -> str | None:
    """Help text with the source's line breaks inside paragraphs joined (rich help keeps them,
    which makes ragged text); blank lines still separate paragraphs."""
    if not text:
        return text
    import inspect

    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def recipe_option(key: str, *aliases: str, detail: str = "") -> Any:
    """The option that overrides the recipe's `section.field`, made from that field: its flag
    (metadata `flag`, else --field-name), its help (metadata `help`, its choices, `detail`) and
    the recipe's default. Its bounds stay in the field: `config.override` checks the value.
    The option's own default is None: the recipe decides unless the flag is given."""
    from evoenv_cli.config import Recipe, flag_of

    section, name = key.split(".")
    f = next(f for f in dataclasses.fields(getattr(Recipe(), section)) if f.name == name)
    value = getattr(getattr(Recipe(), section), name)
    shown = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
    choices = f.metadata.get("items", {}).get("choices") or ()
    words = f.metadata["help"] + (": " + ", ".join(choices) if choices else "") + (f": {detail}" if detail else "")
    # rich help reads [...] as markup: the default is shown without brackets
    return typer.Option(flag_of(f), *aliases, help=f"{words.rstrip('.')}. Default {shown} (recipe: {key}).")


INPUT_HELP = "evoenv-input:"  # an input option's help until its command is looked up (input_help)


def input_option(key: str, *flags: str) -> Any:
    """The option that gives a stage's input ("stage.input": `ctx.inputs[input]`), its help the
    one the stage's record declares (stage.Input). The record is read when the command is looked
    up (`PipelineGroup.get_command`), not when the commands are listed: `evoenv --help` imports
    no stage module, and a command only the stage it runs."""
    return typer.Option(*flags, help=INPUT_HELP + key)


def input_argument(key: str) -> Any:
    """`input_option`'s argument form (the input given without a flag)."""
    return typer.Argument(help=INPUT_HELP + key)


def input_help(command) -> None:
    """A command's input options given their help from their stages' records."""
    for param in command.params:
        text = getattr(param, "help", None)
        if isinstance(text, str) and text.startswith(INPUT_HELP):
            name, field = text.removeprefix(INPUT_HELP).rsplit(".", 1)
            param.help = next(i.help for i in stages.get(name).inputs if i.name == field)


class PipelineGroup(TyperGroup):
    """The `evoenv` group: commands in round order, help text reflowed, no type label
    (`<bool>`) beside a plain on/off flag."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for command in [self, *self.commands.values()]:
            command.help = reflow(command.help)
            ctx = typer.Context(command)
            for param in [*command.params, command.get_help_option(ctx)]:
                if param is not None and getattr(param, "is_flag", False):
                    param.metavar = ""

    def get_command(self, ctx, cmd_name: str):
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            input_help(command)
        return command

    def list_commands(self, ctx) -> list[str]:
        """The stages' commands in round order (each record's `place`, the stages.all() order),
        then every other command in the order it was registered."""
        names = list(self.commands)
        rank = {name: i for i, name in enumerate(stages.all())}
        return sorted(names, key=lambda n: (rank.get(n, len(rank)), names.index(n)))


app = typer.Typer(
    name="evoenv",
    cls=PipelineGroup,
    help="Self-evolving reasoning RL: synthesize verifiable environments, admit them through "
    "four contracts, and train on them with GRPO.",
    no_args_is_help=True,
    invoke_without_command=True,
    add_completion=False,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, highlight=False, soft_wrap=True)  # one message, one line
state = {"verbose": False}

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="Recipe YAML; flags override it.")]
# an admission command's input and output (validate, compose, dedupe, review)
CandidatesArg = Annotated[
    Path, typer.Argument(help="Candidates: a folder of .py files or a previous stage's output folder.")
]
AdmissionOutOpt = Annotated[
    Path,
    typer.Option(
        "--out", "-o", help="Output folder (envs/, verdicts.jsonl, index.jsonl, manifest.json, summary.json)."
    ),
]
SandboxOpt = Annotated[str | None, recipe_option("runtime.sandbox")]
WorkersOpt = Annotated[int | None, recipe_option("runtime.workers")]
ResumeOpt = Annotated[
    bool,
    typer.Option(
        "--resume", help="Continue a previous run into OUT: verdicts already final are kept, the rest is judged."
    ),
]
CleanOpt = Annotated[bool, typer.Option("--clean", help="Delete OUT's results first.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout instead of the table.")]
# The policy model, shared by the LLM stages (synthesize, review, calibrate, evaluate); they go
# over the recipe's `backend:` section via evoenv_cli.llm.backend_from_config(recipe.backend, ...).
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="Policy model: a checkpoint folder or hub name (for --backend openai, the name the server serves).",
    ),
]
BackendOpt = Annotated[str | None, recipe_option("backend.kind", detail=backends_help())]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help="For --backend openai: the server, e.g. http://127.0.0.1:8000/v1 (key from $OPENAI_API_KEY if set).",
    ),
]


def fail(code: int, message: str) -> None:
    err.print(f"[red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def emit(text: str) -> None:
    """A command's data line on stdout (kept clean: see `artifacts.stdout_for_data`)."""
    from evoenv_cli import artifacts

    print(text, file=artifacts.data_stdout(), flush=True)


def _reader_gone() -> None:
    """The reader of our stdout went away (`| head`): stop quietly, as Unix tools do. Point
    stdout at /dev/null so the interpreter's final flush does not complain either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


class _DataConsole(Console):
    """rich on stdout for data: a closed pipe is handled like any other (rich would exit 1)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def stage_command(fn):
    """Shared error handling: InputError -> 2, Ctrl-C -> 130, a closed pipe -> 0 quietly,
    anything else -> 1. While the command runs, stdout carries its data only."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from evoenv_cli import artifacts
        from evoenv_cli.runtime.sandbox import SandboxUnavailable

        try:
            with artifacts.stdout_for_data():
                result = fn(*args, **kwargs)
            sys.stdout.flush()  # here, so a reader gone by now is seen as such too
            return result
        except typer.Exit:
            raise
        except BrokenPipeError:
            _reader_gone()
            raise typer.Exit(0) from None
        except (InputError, SandboxUnavailable) as exc:
            if state["verbose"]:
                err.print_exception()
            fail(2, str(exc))
        except StageInterrupted as exc:  # inside a stage: where its partial results are
            err.print(f"[yellow]interrupted[/]: {escape(exc.message)}", soft_wrap=True)
            raise typer.Exit(130) from None
        except KeyboardInterrupt:
            err.print(
                "[yellow]interrupted[/]: files already written are complete; rerun with --resume where the stage has it"
            )
            raise typer.Exit(130) from None
        except Exception as exc:  # a run error: one line unless --verbose
            if state["verbose"]:
                err.print_exception()
            fail(1, f"{type(exc).__name__}: {exc}")

    return wrapper


class _Notes(logging.Handler):
    """evoenv's own log messages (a backend's notes) as one stderr line each."""

    def emit(self, record: logging.LogRecord) -> None:
        style = "yellow" if record.levelno >= logging.WARNING else "dim"
        err.print(f"[{style}]note:[/] {escape(record.getMessage())}", soft_wrap=True)


def _route_notes() -> None:
    logger = logging.getLogger("evoenv_cli")
    if not any(isinstance(h, _Notes) for h in logger.handlers):
        logger.addHandler(_Notes())
        logger.setLevel(logging.INFO)
        logger.propagate = False


def versions(verbose: bool) -> list[str]:
    """`evoenv --version` lines: evoenv's own, then (verbose) what it runs on."""
    import shutil
    import subprocess
    from importlib import metadata

    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    lines = [f"evoenv {version('evoenv')}"]
    if not verbose:
        return lines
    lines.append(f"python {sys.version.split()[0]}")
    lines += [f"{name} {version(name)}" for name in ("torch", "transformers", "trl", "vllm")]
    bwrap = shutil.which("bwrap")
    found = "not installed (the sandbox falls back to a weaker one)"
    if bwrap:
        try:
            r = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10)
            found = (
                f"{r.stdout.strip().split()[-1]} ({bwrap})"
                if r.returncode == 0 and r.stdout.strip()
                else f"unknown ({bwrap})"
            )
        except (OSError, subprocess.TimeoutExpired):
            found = f"unknown ({bwrap})"
    lines.append(f"bubblewrap {found}")
    return lines


@app.callback()
def main_options(
    ctx: typer.Context,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Show tracebacks for errors; with --version, the versions of what evoenv runs on."
        ),
    ] = False,
    version: Annotated[bool, typer.Option("--version", help="Print evoenv's version and exit.")] = False,
) -> None:
    state["verbose"] = verbose
    _route_notes()
    if version:
        for line in versions(verbose):
            emit(line)
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        emit(ctx.get_help())  # `evoenv -v` alone: what `evoenv` alone shows
        raise typer.Exit(0)


def runtime_recipe(config: Path | None, sandbox: str | None, workers: int | None):
    from evoenv_cli import config as cfgmod

    recipe = cfgmod.load_recipe(config)
    recipe.runtime = cfgmod.override(recipe.runtime, sandbox=sandbox, workers=workers)
    return recipe


def sandbox_pool(recipe):
    from evoenv_cli.runtime.workers import SandboxWorkers

    rt = recipe.runtime
    return SandboxWorkers(limits=rt.limits, sandbox_mode=rt.sandbox, workers=rt.workers)


class Progress:
    """A rich progress bar on stderr that counts verdicts (silent with --json), and, when a
    backend is attached, a second bar for the completions of its current `generate` call."""

    def __init__(self, total: int | None, label: str, quiet: bool = False, llm=None):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.bar = (
            None
            if quiet or (total is None and llm is None)  # nothing to count: no bar at all
            else Progress(
                TextColumn("[bold]{task.description}[/]"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[last]}"),
                TimeElapsedColumn(),
                console=err,
                transient=True,
            )
        )
        self.total, self.label, self.llm = total, label, llm
        self.task = self.gen_task = None

    def __enter__(self):
        if self.bar:
            self.bar.__enter__()
            if self.total is not None:
                self.task = self.bar.add_task(self.label, total=self.total, last="")
            if self.llm is not None:
                self.llm.progress = self.generation
        return self

    def __exit__(self, *exc):
        if self.llm is not None:
            self.llm.progress = None
        if self.bar:
            self.bar.__exit__(*exc)

    def advance(self, verdict) -> None:
        if self.bar and self.task is not None:
            mark = "[green]admitted[/]" if verdict.admitted else f"[red]{escape(verdict.stage)}[/]"
            self.bar.update(self.task, advance=1, last=f"{escape(verdict.file)}: {mark}")

    def generation(self, done: int, total: int) -> None:
        """The backend's progress callback: completions done of this generate call."""
        if not self.bar:
            return
        if self.gen_task is None:
            self.gen_task = self.bar.add_task(f"{self.label}: model", total=total, last="completions")
        self.bar.update(self.gen_task, completed=done, total=total)


def show_funnel(summary: dict, out_dir: Path) -> None:
    from evoenv_cli.report import terminal

    err.print(terminal.funnel(summary))
    uncalibrated = summary.get("admitted_uncalibrated")
    if uncalibrated:
        err.print(
            f"[yellow]{uncalibrated} of {summary['admitted']} admitted uncalibrated[/]: the solver gave no "
            "extractable answer, so no difficulty was measured (calibrate.on_no_answers: admit)"
        )
    err.print(f"results in {escape(str(out_dir))}")


def say(message: str) -> None:
    err.print(message, markup=False, soft_wrap=True)


def run_stage(name: str, recipe, out, *, as_json: bool = False, **given) -> object:
    """A stage's record run from a command: the recipe (flags already over it), OUT, the
    Context's other fields; progress on stderr unless --json. Returns what its `run` returned
    (the command shows it)."""
    ctx = Context(
        recipe,
        Path(out),
        progress=functools.partial(Progress, quiet=as_json),
        say=say,
        note=None if as_json else say,
        **given,
    )
    return execute(stages.get(name), ctx).value
