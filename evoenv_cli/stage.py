"""A stage of the loop is one record, declared once in its own module under `stages/`.

The record holds every fact about a stage that the command line, the loop and the report
share: its name and the recipe sections it reads, the settings `--resume` fingerprints, its
marker file and its place in the round, the file a Ctrl-C leaves its partial results in, the
words the round's line uses for what it admitted, and its `run` over one small `Context`
(the resolved recipe, OUT, the input library, the policy, the sandbox runtime, the progress
display). A stage module registers its record when it is imported (the idea of reasoning-gym's
`register_dataset`); `evoenv_cli.stages.all()` imports every module in `stages/`, so a new
stage is one new file there plus its tests.

`execute(stage, ctx)` is the one skeleton every caller runs a stage through: the stage's own
checks, OUT prepared (refusing a resume whose settings changed) before any model loads, the
policy opened, `run` under the progress display, and Ctrl-C turned into `StageInterrupted`
saying where the partial results are; it returns the step's `Result` (its folder, its marker,
the marker's summary, the policy after it). `evoenv <stage>` builds a Context from its flags;
the loop builds one per step of the round, from what the record's `in_round` takes from the
`Round` (the policy, the pool) and the latest `Result` of each kind the record `takes`, so a
new step is its module alone. A finished round read back from disk (a resumed run, `evoenv
report`) is `round_results`: the same Results, from the records' markers.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evoenv_cli import artifacts
from evoenv_cli import config as cfgmod
from evoenv_cli.admission import VERDICTS

if TYPE_CHECKING:  # the session's class is the runtime's; stages open it only when it is None
    from evoenv_cli.pool import EnvPool
    from evoenv_cli.runtime.session import Runtime
from evoenv_cli.errors import InputError


class StageInterrupted(KeyboardInterrupt):
    """Ctrl-C inside a stage: `message` says where its partial results are and how to go on."""

    def __init__(self, message: str, out: Path):
        super().__init__(message)
        self.message, self.out = message, out


class Quiet:
    """No progress display (the loop as a library, a test, `--json`)."""

    def __init__(self, total: int | None = None, label: str = "", llm=None):
        pass

    def __enter__(self) -> Quiet:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def advance(self, verdict) -> None:
        pass


@dataclass
class Model:
    """The policy a stage asks: its name, its part of the settings, and how to get it open.
    A command's model is `owned`: opened for the stage and closed after it; the loop's stays
    loaded for the next stage that asks for the same one."""

    name: str
    settings: dict
    get: Callable[[], Any]
    owned: bool = True
    check: Callable[[], None] | None = None  # what can be known before it loads (the loop checked its own)


@dataclass
class Context:
    """What a stage's `run` gets: the recipe with the caller's flags already over it."""

    recipe: cfgmod.Recipe
    out: Path
    library: Path | None = None
    model: Model | None = None
    session: Runtime | None = None  # the loop's Runtime (its sandbox workers), or None: the stage opens its own
    resume: bool = False
    clean: bool = False
    progress: Callable[..., Any] = Quiet  # (total, label, llm=None) -> a context with advance(verdict)
    say: Callable[[str], None] = lambda message: None  # a line for the reader (stderr, the loop's log)
    note: Callable[[str], None] | None = None  # a progress note (the loop: its log file only)
    label: str = ""  # the progress label; default: the stage's name ("rotate" runs calibrate)
    inputs: dict[str, Any] = field(default_factory=dict)  # the stage's other inputs (seeds, pools, benches, ...)


# What a step's Result is, for the steps that take it (a record's `gives` and `takes`): admitted
# candidates, compose's composites, the pool's members re-measured (rotate), the pool update,
# the starting model's evaluation (measured once a run), training rows, a trained checkpoint,
# evaluation metrics.
KINDS = ("library", "composites", "measured", "pool", "baseline", "rows", "checkpoint", "metrics")


@dataclass(frozen=True)
class Result:
    """What one step left, as every reader after it takes it: the steps that take its kind,
    `loop.round_summary` and the report. Nothing after it works out a path of its own."""

    stage: str
    kind: str | None  # its record's `gives` (KINDS), or None
    out: Path  # its folder
    marker: Path  # the file whose presence says it finished
    summary: dict  # read from the marker ({} when the marker is not a file: stdout, a rank that writes none)
    policy: str | None = None  # the model the steps after it ask (train's checkpoint); None: unchanged
    value: Any = field(default=None, compare=False, repr=False)  # what `run` returned; None when read back


# What an input is, for a Context written as JSON (a stage run in a child process): a file or
# folder, a list of them, a JSON value, or an object of this process (a loaded benchmark, an
# open policy) that never crosses to another.
INPUT_KINDS = ("path", "paths", "value", "object")


@dataclass(frozen=True)
class Input:
    """One of a stage's inputs besides the recipe, OUT, the library and the policy: what its
    `run` reads as `ctx.inputs[name]`. A command's option for it takes this help
    (`commands.common.input_option`); `execute` refuses a Context that gives an input its record
    does not declare, or lacks a required one."""

    name: str
    help: str
    kind: str = "value"  # one of INPUT_KINDS
    required: bool = False


def round_name(r: int) -> str:
    """Round r's folder in the run: RUN/round-NN (the one place the name is written)."""
    return f"round-{r:02d}"


def round_number(name: str) -> int | None:
    """The round a folder's name is (`round_name`'s inverse), or None for another name."""
    digits = name.removeprefix("round-")
    return int(digits) if digits.isdigit() and name == round_name(int(digits)) else None


def round_folders(run_dir: Path) -> list[Path]:
    """The run's round folders that exist, by round number (round-100 after round-99)."""
    found = [(round_number(p.name), p) for p in run_dir.iterdir()] if run_dir.is_dir() else []
    return [p for r, p in sorted((r, p) for r, p in found if r is not None and p.is_dir())]


@dataclass
class Round:
    """One round of the loop as a step's `in_round` sees it: what the loop holds for the run,
    and the Results of the steps before it (a step that did not run this round left none)."""

    number: int
    folder: Path  # RUN/round-NN
    policy: str  # the model this round's steps ask (the last round's checkpoint)
    recipe: cfgmod.Recipe
    iterate: cfgmod.IterateConfig  # the loop's own settings (the recipe's `iterate`, flags over it)
    seeds: Path
    pool: EnvPool  # RUN/pool/ and RUN/eval-set/
    say: Callable[[str], None]  # a line in the loop's log
    results: list[Result] = field(default_factory=list)
    # environment files a person offers as candidates this round (`iterate --offered`; None: none)
    offered: Path | None = None
    start: str = ""  # the run's starting model (the baseline's)
    recipe_file: Path | None = None  # the recipe the run was started with (errors name it)

    def latest(self, kind: str) -> Result | None:
        """The last Result of `kind` this round (None: no step before gave one)."""
        return next((r for r in reversed(self.results) if r.kind == kind), None)

    def add(self, result: Result | None) -> None:
        """A step's Result kept for the steps after it; the policy becomes the one it names."""
        if result is not None:
            self.results.append(result)
            self.policy = result.policy or self.policy

    def seeded(self, section: str, **more: Any) -> cfgmod.Recipe:
        """The recipe with `section`'s seed set to the round's number (each round draws
        differently, a rerun the same), and `more` of that section's settings."""
        changed = cfgmod.override(getattr(self.recipe, section), seed=self.number, **more)
        return replace(self.recipe, **{section: changed})


@dataclass(frozen=True)
class Stage:
    name: str
    sections: tuple[str, ...]  # the recipe sections it reads (documentation and `evoenv --help`)
    marker: str  # OUT/<marker> exists: the stage finished
    # (ctx) -> the settings its results depend on: fingerprinted into OUT, refused on --resume if changed
    settings: Callable[[Context], dict] | None
    # (ctx, library or None, OUT, open policy or None, progress) -> the stage's result
    run: Callable[..., Any] | None
    place: float | None = None  # its place in the loop's round (None: not a step of the round)
    folder: str | None = None  # its folder in round-NN/ (default: its name; "" for a file in round-NN/)
    partial: tuple[str, str] = ("verdicts", VERDICTS)  # what a stopped run leaves, and where
    rerun: str = "rerun with --resume to finish"
    funnel: str = ""  # the round's line: what the candidates it admitted are
    uses_model: bool = False
    envs: bool = True  # OUT holds envs/ (an admission stage's admitted files)
    resumable: bool = True  # False: a rerun starts over (--clean), it never resumes
    library_optional: bool = False  # it runs with no input library (synthesize; evaluate on benchmarks alone)
    allow_empty: bool = True  # an empty input library is judged (nothing admitted), not refused
    check: Callable[[Context, Any], None] | None = None  # (ctx, library or None): before OUT is touched
    prepares: Callable[[Context], bool] | None = None  # whether this process prepares OUT (default: yes)
    total: Callable[[Context, Any], int | None] | None = None  # progress total; default: the library's files
    # (OUT) on a resumed folder, before `run`: cut the records a killed attempt left back to the
    # point the run goes on from (train: its last checkpoint), so a rerun never appends to them
    resume_from: Callable[[Path], None] | None = None
    # (round, {kind: the round's latest Result of it or None, for each kind in `takes`}) -> this
    # step's Context fields (recipe, library, model, inputs); None: it does not run this round (it
    # says why); a Result: it is finished without running (measured once a run, nothing to train on)
    in_round: Callable[[Round, dict[str, Result | None]], dict | Result | None] | None = None
    takes: tuple[str, ...] = ()  # the kinds (KINDS) of earlier steps' Results it takes in the round
    gives: str | None = None  # the kind of its Result
    summary_field: str | None = None  # the marker's field that holds its summary (None: the whole marker)
    next_policy: Callable[[Path, dict], str] | None = None  # (its folder, its summary) -> the model after it
    # (label, its Result, its Context) -> its line in the loop's log; default: an admission
    # stage's funnel line (`funnel_line`), none for another
    line: Callable[[str, Result, Context], str | None] | None = None
    # (round, its Result) after the step, whether it ran now or before a kill: what the round
    # needs done with its output every time (the pool update applies the next pool)
    finish: Callable[[Round, Result], None] | None = None
    # the loop runs it in a process of its own, under the training launcher
    # (iterate.train_launch, or Ray Train's workers on a cluster), from its Context as JSON
    child: bool = False
    per_run: bool = False  # its folder is in RUN/, not round-NN/: it runs once a run, and later rounds read it
    inputs: tuple[Input, ...] = ()  # what its Context's `inputs` may hold (Input)

    @property
    def where(self) -> str:
        """round-NN/<where> (RUN/<where> for a step run once a run): the marker's path."""
        folder = self.name if self.folder is None else self.folder
        return f"{folder}/{self.marker}" if folder else self.marker

    def out_in(self, round_folder: Path) -> Path:
        """Its folder for a round folder (the round folder itself for a file there; a folder of
        the run's for a step run once a run)."""
        folder = self.name if self.folder is None else self.folder
        base = round_folder.parent if self.per_run else round_folder
        return base / folder if folder else base


_REGISTRY: dict[str, Stage] = {}


def register(stage: Stage) -> Stage:
    """Add a stage's record (at its module's import); a name registered twice, or a kind of
    Result that is not one of KINDS, is a bug."""
    if stage.name in _REGISTRY and _REGISTRY[stage.name] is not stage:
        raise ValueError(f"stage {stage.name!r} is registered twice")
    unknown = [k for k in (*stage.takes, stage.gives) if k is not None and k not in KINDS]
    if unknown:
        raise ValueError(f"stage {stage.name!r}: {', '.join(unknown)} is not a kind of Result ({', '.join(KINDS)})")
    odd = [i.name for i in stage.inputs if i.kind not in INPUT_KINDS]
    if odd:
        raise ValueError(f"stage {stage.name!r}: input {', '.join(odd)} has a kind not in {', '.join(INPUT_KINDS)}")
    _REGISTRY[stage.name] = stage
    return stage


def registered() -> dict[str, Stage]:
    """The records registered so far (`evoenv_cli.stages.all()` imports every stage first)."""
    return dict(_REGISTRY)


def policy(recipe, backend: str | None, model: str | None, base_url: str | None = None, stage: str = "") -> Model:
    """A command's policy: the recipe's backend with the flags over it. `execute` checks it
    after the stage's own checks and before OUT is touched (a model that cannot load fails at
    once and leaves no folder)."""
    from evoenv_cli.llm import backend_from_config, check_backend

    settings = cfgmod.llm_settings(recipe, backend, model)

    def check() -> None:
        if not settings["model"]:
            raise InputError("no model: pass --model or set backend.model in the recipe")
        check_backend(settings["kind"], settings["model"])

    def get():
        llm = backend_from_config(recipe.backend, kind=backend, model=model, base_url=base_url)
        llm.stage = stage
        return llm

    return Model(settings["model"], settings, get, check=check)


def execute(stage: Stage, ctx: Context) -> Result:
    """Run one stage: its checks, OUT prepared with its settings, the policy opened, `run`
    under the progress display; its Result. Ctrl-C raises StageInterrupted (saying where the
    results are)."""
    check_inputs(stage, ctx.inputs)
    lib = None
    if ctx.library is not None:
        lib = artifacts.EnvLibrary.open(ctx.library, allow_empty=stage.allow_empty)
    elif not stage.library_optional:
        raise InputError(f"{stage.name}: no library given")
    if stage.check is not None:
        stage.check(ctx, lib)
    if ctx.model is not None and ctx.model.check is not None:
        ctx.model.check()
    out = ctx.out
    if stage.settings is not None and (stage.prepares is None or stage.prepares(ctx)):
        out = prepare(stage, ctx)
    llm = ctx.model.get() if stage.uses_model and ctx.model is not None else None
    total = stage.total(ctx, lib) if stage.total is not None else (len(lib.files) if lib is not None else None)
    owned = llm if llm is not None and ctx.model.owned else contextlib.nullcontext()
    try:
        with owned, ctx.progress(total, ctx.label or stage.name, llm=llm) as bar:
            value = stage.run(ctx, lib, out, llm, bar)
    except KeyboardInterrupt:
        words, file = stage.partial
        raise StageInterrupted(f"{words} so far are in {out / file}; {stage.rerun}", out) from None
    if stage.settings is None:  # OUT is the marker itself (sample's rows)
        return result(stage, out.parent, out, summary_of(stage, out), value)
    return result(stage, out, out / stage.marker, summary_of(stage, out / stage.marker), value)


def check_inputs(stage: Stage, given: dict[str, Any]) -> None:
    """The inputs a caller gives are the ones the stage's record declares, the required ones
    among them: a misspelt or forgotten input is a bug in the caller, said at once rather than
    read as None later."""
    declared = {i.name for i in stage.inputs}
    unknown = sorted(set(given) - declared)
    missing = [i.name for i in stage.inputs if i.required and given.get(i.name) is None]
    if unknown or missing:
        said = [
            f"{', '.join(unknown)} not declared by its record" if unknown else "",
            f"{', '.join(missing)} missing" if missing else "",
        ]
        raise TypeError(f"stage {stage.name}: inputs {'; '.join(w for w in said if w)}")


def read_marker(path: Path) -> dict | None:
    """A JSON marker's object (None when there is no file)."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def summary_of(stage: Stage, marker: Path, read: Callable[[Path], dict | None] = read_marker) -> dict | None:
    """A step's summary from its marker: a JSON marker's object (or its `summary_field`), a
    JSONL marker's row count, {} for another file (`evoenv sample -o rows.parquet`); None when
    there is no marker, or `read` could not read it (the report's reader names an unreadable
    file instead of raising)."""
    if not marker.is_file():
        return None
    if marker.suffix == ".jsonl":
        with marker.open("rb") as f:
            return {"rows": sum(1 for line in f if line.strip())}
    if marker.suffix != ".json":
        return {}
    data = read(marker)
    if data is None:
        return None
    picked = data.get(stage.summary_field) if stage.summary_field else data
    return picked if isinstance(picked, dict) else {}


def result(stage: Stage, out: Path, marker: Path, summary: dict | None, value: Any = None) -> Result:
    """The Result of `stage` in its folder `out` (summary None: it left no marker)."""
    policy = stage.next_policy(out, summary) if stage.next_policy is not None and summary is not None else None
    return Result(stage.name, stage.gives, out, marker, summary or {}, policy, value)


def result_in(stage: Stage, out: Path, read: Callable[[Path], dict | None] = read_marker) -> Result | None:
    """The Result a finished step left in its folder `out`, from its marker (None: not finished)."""
    summary = summary_of(stage, out / stage.marker, read)
    return result(stage, out, out / stage.marker, summary) if summary is not None else None


def round_results(
    folder: Path, steps: list[Stage], read: Callable[[Path], dict | None] = read_marker
) -> dict[str, Result]:
    """A round on disk read back as the Results its finished steps left, by name in round order:
    the one reader of a finished round (a resumed run's policy, `evoenv report`). A step run once
    a run (the baseline) is the run's, not the round's: not among them."""
    found = (result_in(st, st.out_in(folder), read) for st in steps if not st.per_run)
    return {r.stage: r for r in found if r is not None}


def prepare(stage: Stage, ctx: Context) -> Path:
    """OUT made ready the same way for every stage: refused if it holds results and neither
    --resume nor --clean says what to do, emptied on --clean (and on any rerun of a stage that
    cannot resume), and on --resume its records cut back to what the run goes on from: each
    JSONL file's torn last line (a kill mid-write) dropped, then the stage's own `resume_from`."""
    resume = ctx.resume and stage.resumable
    used = artifacts.holds_results(ctx.out)
    out = artifacts.prepare_out_dir(
        ctx.out,
        resume,
        ctx.clean,
        envs=stage.envs,
        settings=cfgmod.stage_settings(**stage.settings(ctx)),
        resumable=stage.resumable,
    )
    if used and resume:
        for records in sorted(out.glob("*.jsonl")):
            artifacts.read_jsonl_tolerant(records)  # truncates a torn last line
        if stage.resume_from is not None:
            stage.resume_from(out)
    return out


def context_record(stage: Stage, ctx: Context) -> dict:
    """A Context as JSON, for a stage run in a process of its own (train under `accelerate
    launch`): the resolved recipe, OUT, the library, resume/clean and the named inputs, each as
    its record declares it (a path kept as {"path": ...}, a list of paths as a list of them). The
    model, session and displays stay with the caller; an input that is an object of this process
    cannot go."""
    inputs = {}
    for i in stage.inputs:
        if i.name not in ctx.inputs:
            continue
        v = ctx.inputs[i.name]
        if v is None or i.kind == "value":
            inputs[i.name] = v
        elif i.kind == "path":
            inputs[i.name] = {"path": str(v)}
        elif i.kind == "paths":
            inputs[i.name] = [{"path": str(x)} for x in v]
        else:
            raise TypeError(f"stage {stage.name}: input {i.name} is an object of this process and cannot be written")
    return {
        "stage": stage.name,
        "recipe": cfgmod.to_dict(ctx.recipe),
        "out": str(ctx.out),
        "library": str(ctx.library) if ctx.library is not None else None,
        "resume": ctx.resume,
        "clean": ctx.clean,
        "inputs": inputs,
    }


def context_from_record(record: dict, where: str, get: Callable[[str], Stage]) -> tuple[Stage, Context]:
    """The stage (`get` looks its record up by name) and the Context `context_record` wrote (its
    recipe rebuilt and checked by the fields' rules, not read from the recipe file again), each
    input read back by the kind its record declares, as it was written."""
    st = get(record["stage"])
    kinds = {i.name: i.kind for i in st.inputs}

    def read(name: str, v: Any) -> Any:
        if name not in kinds:
            raise InputError(f"{where}: input {name!r} is not one stage {st.name} declares")
        if v is None or kinds[name] == "value":
            return v
        return Path(v["path"]) if kinds[name] == "path" else [Path(x["path"]) for x in v]

    inputs = {k: read(k, v) for k, v in record["inputs"].items()}
    ctx = Context(
        cfgmod.recipe_from_dict(record["recipe"], where),
        Path(record["out"]),
        library=Path(record["library"]) if record["library"] is not None else None,
        resume=record["resume"],
        clean=record["clean"],
        inputs=inputs,
    )
    return st, ctx


def step_line(stage: Stage, label: str, result: Result, ctx: Context) -> str | None:
    """A step's line in the loop's log: its record's `line`, else an admission stage's funnel."""
    if stage.line is not None:
        return stage.line(label, result, ctx)
    if hasattr(result.value, "record"):
        return funnel_line(label, result.value.record(), result.out)
    return None


def funnel_line(label: str, record: dict, out: Path) -> str:
    """An admission stage's result in one line: entered, admitted, what rejected the rest."""
    rejected = ", ".join(f"{k}={v}" for k, v in record.get("rejected_by_stage", {}).items() if v)
    unc = record.get("admitted_uncalibrated")
    return (
        f"{label}: {record['entered']} entered, {record['admitted']} admitted"
        + (f" ({unc} uncalibrated)" if unc else "")
        + (f"; rejected {rejected}" if rejected else "")
        + f" -> {out}"
    )
