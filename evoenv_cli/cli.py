"""The `evoenv` command: one thin command per stage of the loop, and the loop itself.

Each stage command parses its flags, puts them over the recipe, and runs the stage's record
through `stage.execute`, the same call each step of `evoenv iterate` makes; then it shows the
result. Failures map to exit codes in `commands.common.stage_command`: 2 for bad input (one
line, no traceback), 1 for a run error, 130 on Ctrl-C (saying where the partial results are),
0 when the reader of a pipe goes away. Data goes to stdout or files, and nothing else goes to
stdout; progress and messages go to stderr, with rich markup escaped in every value shown.
The other commands are in `commands/` (tools.py, progressive.py).

Why one module: typer registers a command where it is declared, so the stage commands'
signatures (made from the recipe fields, listed by hand) sit together; their logic is in the
stages.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from evoenv_cli import artifacts, row_formats, stage
from evoenv_cli import config as cfgmod
from evoenv_cli.admission import VERDICTS
from evoenv_cli.commands import progressive, tools  # noqa: F401 (their commands register on the app)
from evoenv_cli.commands.common import (
    AdmissionOutOpt,
    BackendOpt,
    BaseUrlOpt,
    CandidatesArg,
    CleanOpt,
    ConfigOpt,
    JsonOpt,
    ModelOpt,
    Progress,
    ResumeOpt,
    SandboxOpt,
    WorkersOpt,
    app,
    emit,
    err,
    input_argument,
    input_option,
    recipe_option,
    run_stage,
    runtime_recipe,
    say,
    show_funnel,
    stage_command,
)
from evoenv_cli.errors import InputError
from evoenv_cli.llm.base import BACKEND_KINDS


def admit(name: str, recipe, out: Path, as_json: bool, **given) -> dict:
    """An admission stage (validate, review, compose, dedupe, calibrate): its funnel on stderr,
    or its summary as JSON on stdout."""
    record = run_stage(name, recipe, out, as_json=as_json, **given).record()
    if as_json:
        emit(json.dumps(record))
    else:
        show_funnel(record, out)
    return record


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
    per_env: Annotated[int | None, recipe_option("sample.per_env", "-n")] = None,
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
    seed: Annotated[int | None, recipe_option("sample.seed")] = None,
    fmt: Annotated[
        str | None, typer.Option("--format", help=f"{', '.join(row_formats.FORMATS)} (default trl).")
    ] = None,
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
    recipe = runtime_recipe(config, sandbox, workers)
    recipe.sample = cfgmod.override(
        recipe.sample,
        per_env=per_env,
        difficulty=difficulty,
        difficulty_from=difficulty_from,
        seed=seed,
        format=fmt,
        split=split,
    )
    report = run_stage("sample", recipe, out, library=library)
    for s in report.skipped[:5]:  # names and reasons come from environments: never markup
        err.print(
            f"[yellow]skipped[/] {escape(str(s['env']))} seed={s['seed']} d={s['difficulty']}: "
            f"{escape(str(s['reason']))}",
            soft_wrap=True,
        )
    if len(report.skipped) > 5:
        err.print(f"[yellow]... and {len(report.skipped) - 5} more skipped[/]")
    say(
        f"sampled {report.written} rows from {len(report.per_env)} environments ({len(report.skipped)} skipped) -> {out}"
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
    """The execution contract: admit only environment files that pass every staged check, in
    order (from the static one to the budget; docs/stages.md lists them with what each guards);
    the first failing check is the verdict's stage.

    Example: [bold]evoenv validate runs/r1/synthesize --out runs/r1/validate --workers 2[/]
    """
    admit(
        "validate", runtime_recipe(config, sandbox, workers), out, as_json, library=library, resume=resume, clean=clean
    )


@app.command()
@stage_command
def compose(
    library: Annotated[
        Path, typer.Argument(help="Environments to compose: a folder of .py files or a stage's output folder.")
    ],
    out: AdmissionOutOpt,
    ops: Annotated[str | None, recipe_option("compose.ops")] = None,
    n: Annotated[int | None, recipe_option("compose.n", "-n")] = None,
    max_depth: Annotated[int | None, recipe_option("compose.max_depth")] = None,
    seed: Annotated[int | None, recipe_option("compose.seed")] = None,
    measured: Annotated[list[Path] | None, input_option("compose.measured", "--measured")] = None,
    config: ConfigOpt = None,
    resume: ResumeOpt = False,
    clean: CleanOpt = False,
    workers: WorkersOpt = None,
    sandbox: SandboxOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """RACES: fuse environments into new verifiable ones (SEQUENTIAL, PARALLEL, SORT, SELECT),
    each a standalone file judged by the execution contract before it is written. Candidates
    whose pass rate, predicted from the parts' measured ones, is in the calibration band come
    first.

    Example: [bold]evoenv compose seeds/ --out runs/r1/compose --n 20 --measured runs/r1/rotate --seed 1[/]
    """
    recipe = runtime_recipe(config, sandbox, workers)
    op_list = None if ops is None else [o.strip() for o in ops.split(",") if o.strip()]
    recipe.compose = cfgmod.override(recipe.compose, ops=op_list, n=n, max_depth=max_depth, seed=seed)
    for folder in measured or []:
        if not (folder / VERDICTS).is_file():
            raise InputError(f"{folder}: not a calibrate or compose output folder (no verdicts.jsonl)")
    inputs = {"measured": list(measured or [])}
    admit("compose", recipe, out, as_json, library=library, resume=resume, clean=clean, inputs=inputs)


@app.command()
@stage_command
def dedupe(
    library: CandidatesArg,
    out: AdmissionOutOpt,
    against: Annotated[list[Path] | None, input_option("dedupe.against", "--against", "-a")] = None,
    threshold: Annotated[float | None, recipe_option("dedupe.code_threshold", "-t")] = None,
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
    recipe = runtime_recipe(config, sandbox, workers)
    recipe.dedupe = cfgmod.override(
        recipe.dedupe,
        code_threshold=threshold,
        behaviour_threshold=threshold,
        save_index=save_index,
    )
    against = list(against or [])
    for p in against:  # a pool that cannot be read fails before OUT is touched
        artifacts.EnvLibrary.open(p, allow_empty=True)
    admit("dedupe", recipe, out, as_json, library=library, resume=resume, clean=clean, inputs={"against": against})


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
    seeds: Annotated[Path, input_option("synthesize.seeds", "--seeds")] = Path("seeds"),
    pool: Annotated[list[Path] | None, input_option("synthesize.pools", "--pool")] = None,
    offered: Annotated[Path | None, input_option("synthesize.offered", "--offered")] = None,
    n: Annotated[int | None, recipe_option("synthesize.n", "-n")] = None,
    model: ModelOpt = None,
    backend: BackendOpt = None,
    base_url: BaseUrlOpt = None,
    seed: Annotated[int | None, recipe_option("synthesize.seed")] = None,
    temperature: Annotated[float | None, recipe_option("synthesize.temperature")] = None,
    max_tokens: Annotated[int | None, recipe_option("synthesize.max_tokens")] = None,
    config: ConfigOpt = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue until N candidates exist.")] = False,
    clean: CleanOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout.")] = False,
) -> None:
    """The policy writes candidate environments from the contract, examples and a topic.

    Example: [bold]evoenv synthesize --seeds seeds/ --pool runs/pool --out runs/r1/synthesize --n 64 --model Qwen/Qwen3-4B-Thinking-2507 --backend vllm[/]
    """
    recipe = runtime_recipe(config, None, None)
    recipe.synthesize = cfgmod.override(
        recipe.synthesize, n=n, seed=seed, temperature=temperature, max_tokens=max_tokens
    )
    policy = stage.policy(recipe, backend, model, base_url, "synthesize")
    inputs = {"seeds": seeds, "pools": list(pool or [])}
    if offered is not None:
        inputs["offered"] = offered
    summary = run_stage(
        "synthesize", recipe, out, as_json=as_json, model=policy, resume=resume, clean=clean, inputs=inputs
    )
    if as_json:
        emit(json.dumps(summary))
        return
    outcomes = ", ".join(f"{k}={v}" for k, v in sorted(summary["outcomes"].items()))
    more = f" and {summary['offered']} offered" if summary.get("offered") else ""
    say(
        f"synthesize: {summary['candidates']} candidates from {summary['requests']} requests ({outcomes}){more} -> {out}"
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
    votes: Annotated[int | None, recipe_option("review.votes", "-k")] = None,
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
    recipe = runtime_recipe(config, sandbox, workers)
    recipe.review = cfgmod.override(recipe.review, votes=votes)
    policy = stage.policy(recipe, backend, model, base_url, "review")
    record = admit("review", recipe, out, as_json, library=library, model=policy, resume=resume, clean=clean)
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
    band: Annotated[str | None, recipe_option("calibrate.band")] = None,
    instances: Annotated[int | None, recipe_option("calibrate.instances")] = None,
    samples: Annotated[int | None, recipe_option("calibrate.samples", "-k")] = None,
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
    recipe = runtime_recipe(config, sandbox, workers)
    band_values = None
    if band is not None:  # the values are checked by calibrate.band's own rules, in override
        try:
            band_values = [float(x) for x in band.split(",")]
        except ValueError:
            raise InputError(f"--band: expected LO,HI, two numbers (got {band!r})") from None
    recipe.calibrate = cfgmod.override(recipe.calibrate, band=band_values, instances=instances, samples=samples)
    policy = stage.policy(recipe, backend, model, base_url, "calibrate")
    admit("calibrate", recipe, out, as_json, library=library, model=policy, resume=resume, clean=clean)


@app.command()
@stage_command
def train(
    data: Annotated[Path, input_argument("train.data")],
    library: Annotated[Path, typer.Option("--library", "-l", help="The environments the rows name by env_id.")],
    model: Annotated[str, input_option("train.model", "--model", "-m")],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Checkpoint folder (model or adapter, metrics.jsonl, train-manifest.json)."),
    ],
    config: ConfigOpt = None,
    eval_data: Annotated[Path | None, input_option("train.eval_data", "--eval-data")] = None,
    max_steps: Annotated[int | None, recipe_option("train.max_steps")] = None,
    learning_rate: Annotated[float | None, recipe_option("train.learning_rate")] = None,
    beta: Annotated[float | None, recipe_option("train.beta")] = None,
    num_generations: Annotated[int | None, recipe_option("train.num_generations")] = None,
    batch_size: Annotated[int | None, recipe_option("train.per_device_train_batch_size")] = None,
    max_completion_length: Annotated[int | None, recipe_option("train.max_completion_length")] = None,
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
    zero_variance: Annotated[str | None, recipe_option("train.zero_variance")] = None,
    seed: Annotated[int | None, recipe_option("train.seed")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from the last checkpoint in OUT.")] = False,
    clean: CleanOpt = False,
    workers: WorkersOpt = None,
    sandbox: SandboxOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout.")] = False,
) -> None:
    """GRPO (TRL) on sampled rows; the reward is each environment's score in the sandbox.

    Example: [bold]evoenv train data.jsonl --library runs/pool --model Qwen/Qwen3-4B-Thinking-2507 --out runs/r1/train --config recipes/single-gpu.yaml[/]
    """
    from evoenv_cli.stages.train import is_main_rank

    recipe = runtime_recipe(config, sandbox, workers)
    recipe.train = cfgmod.override(
        recipe.train,
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
    inputs = {"data": data, "model": model, "eval_data": eval_data, "recipe_path": config}
    summary = run_stage("train", recipe, out, as_json=True, library=library, resume=resume, clean=clean, inputs=inputs)
    if not is_main_rank():  # the other ranks of a launch: rank 0 reports for all
        return
    if as_json:
        emit(json.dumps(summary))
        return
    train_lines(summary, out)


@app.command("run-context", hidden=True)
@stage_command
def run_context(
    path: Annotated[Path, typer.Argument(help="A stage's Context as JSON (stage.context_record).")],
) -> None:
    """Run a stage from the Context a caller wrote: the loop's train, in the process `iterate.train_launch` starts.

    Example: [bold]accelerate launch -m evoenv_cli run-context runs/demo/round-01/train-context.json[/]
    """
    from evoenv_cli import stages
    from evoenv_cli.stages.train import is_main_rank

    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a Context record ({exc})") from None
    st, ctx = stage.context_from_record(record, str(path), stages.get)
    summary = run_stage(
        st.name,
        ctx.recipe,
        ctx.out,
        as_json=True,
        library=ctx.library,
        resume=ctx.resume,
        clean=ctx.clean,
        inputs=ctx.inputs,
    )
    if st.name == "train" and is_main_rank():
        train_lines(summary, ctx.out)


def train_lines(summary: dict, out: Path) -> None:
    """A finished train's lines for the reader: its steps and reward, the arena's work, and a
    warning when no weight changed."""
    say(f"train: {summary['steps']} steps, mean reward {summary['mean_reward']} -> {out}")
    if summary.get("arena"):
        from evoenv_cli.training.arena import ARENA_FILE

        a = summary["arena"]
        say(
            f"arena: the judge ranked {a['rescued']} of {a['zero_variance']} zero-variance groups "
            f"({a['judge_calls']} judge calls, {a['judge_errors']} failed, {a['unparseable']} unparseable, "
            f"{a['judge_seconds']:.1f} s) -> {out / ARENA_FILE}"
        )
    if summary.get("all_groups_zero_variance"):
        err.print(
            "[yellow]the weights did not change[/]: in every GRPO group all completions scored the "
            "same (zero variance), so no completion was better than another to learn from"
        )


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
    bench: Annotated[list[str] | None, input_option("evaluate.bench", "--bench", "-b")] = None,
    baseline: Annotated[str | None, input_option("evaluate.baseline", "--baseline")] = None,
    backend: BackendOpt = None,
    base_url: BaseUrlOpt = None,
    baseline_base_url: Annotated[
        str | None,
        typer.Option("--baseline-base-url", help="For --backend openai: the baseline's server (default: --base-url)."),
    ] = None,
    n: Annotated[int | None, recipe_option("evaluate.samples", "-n")] = None,
    temperature: Annotated[float | None, recipe_option("evaluate.temperature")] = None,
    instances: Annotated[int | None, recipe_option("evaluate.instances")] = None,
    seed: Annotated[int | None, recipe_option("evaluate.seed")] = None,
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
    from evoenv_cli.report import terminal
    from evoenv_cli.stages.evaluate import table_rows

    recipe = runtime_recipe(config, sandbox, workers)
    recipe.evaluate = cfgmod.override(
        recipe.evaluate, samples=n, temperature=temperature, instances=instances, seed=seed
    )
    inputs = {"bench": list(bench or []), "baseline": baseline}
    policy = stage.policy(recipe, backend, model, base_url, "evaluate")
    if baseline:
        inputs["baseline_model"] = stage.policy(recipe, backend, baseline, baseline_base_url or base_url, "evaluate")
    metrics = run_stage(
        "evaluate", recipe, out, as_json=as_json, library=library, model=policy, clean=clean, inputs=inputs
    )
    if as_json:
        emit(json.dumps(metrics))
        return
    err.print(terminal.evaluation(table_rows(metrics), policy.name, baseline))
    if metrics.get("skipped"):
        err.print(f"[yellow]{len(metrics['skipped'])} environment instances skipped[/] (see metrics.json)")
    err.print(f"results in {escape(str(out))}")


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
    offered: Annotated[
        Path | None,
        typer.Option(
            "--offered",
            help="Environment files a person offers as candidates: they enter the first round not "
            "finished when first offered to this run, once (validated, deduplicated and calibrated "
            "as the policy's; review admits them unvoted), and join the pool if admitted.",
        ),
    ] = None,
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
    from evoenv_cli import loop as loop_
    from evoenv_cli.runtime import sandbox

    recipe_cfg = cfgmod.load_recipe(recipe)
    if offered is not None:
        artifacts.EnvLibrary.open(offered)  # a one-line error now, not at round 1's synthesize
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
    from evoenv_cli.plan import launch_dependencies

    missing = launch_dependencies(recipe_cfg)  # what round 1's train imports (DeepSpeed, vLLM), now
    if missing:
        raise InputError(f"{recipe}: {missing[0]}")
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
    loop = loop_.Loop(
        run_dir,
        recipe,
        policy,
        recipe_cfg.iterate,
        seeds,
        log=lambda m: err.print(m, markup=False, soft_wrap=True),
        progress=Progress,
        echo_notes=not err.is_terminal,
        offered=offered,
    )
    loop.check_train()  # the launcher and its accelerate config, checked before the first stage
    try:
        loop_.run(loop, rounds)
    except loop_.StageFailed as exc:
        err.print(
            f"[red]error:[/] {escape(str(exc))}; finished stages are kept in {escape(str(run_dir))}: "
            "fix the cause and run the same command again",
            soft_wrap=True,
        )
        raise typer.Exit(1) from None
    except loop_.Interrupted as exc:
        err.print(
            f"[yellow]interrupted[/] in {escape(exc.where)}; finished stages are kept in "
            f"{escape(str(run_dir))}: run the same command to resume",
            soft_wrap=True,
        )
        raise typer.Exit(130) from None
    err.print(f"rounds in {run_dir / loop_.ROUNDS_FILE}", markup=False)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
