"""Progressive RLVR's commands: `distill` (a TinyLoRA student of a trained teacher), `bound-code`
(the bound's code, fixed before training) and `bound` (the compression bound on a checkpoint)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoenv_cli.commands.common import (
    CleanOpt,
    ConfigOpt,
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
    sandbox_pool,
    stage_command,
)
from evoenv_cli.errors import InputError


@app.command()
@stage_command
def distill(
    data: Annotated[Path, input_argument("distill.data")],
    library: Annotated[Path, typer.Option("--library", "-l", help="The environments the rows name by env_id.")],
    teacher: Annotated[str, input_option("distill.teacher", "--teacher")],
    model: Annotated[str, input_option("distill.model", "--model", "-m")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Adapter folder (OUT/quantized: its k-bit copy).")],
    config: ConfigOpt = None,
    max_steps: Annotated[int | None, recipe_option("distill.max_steps")] = None,
    learning_rate: Annotated[float | None, recipe_option("distill.learning_rate")] = None,
    reward_weight: Annotated[float | None, recipe_option("distill.reward_weight")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from the last checkpoint in OUT.")] = False,
    clean: CleanOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout.")] = False,
) -> None:
    """On-policy distillation (TRL's DistillationTrainer, reverse KL) of a teacher into the base
    model plus a TinyLoRA adapter, the environments' reward mixed in at distill.reward_weight;
    then quantized to bound.bits for `evoenv bound`.

    Example: [bold]evoenv distill rows.jsonl --library runs/pool --teacher runs/r1/train --model runs/starter-model --out runs/r1/distill[/]
    """
    import json

    from evoenv_cli import config as cfgmod

    recipe = cfgmod.load_recipe(config)
    recipe.distill = cfgmod.override(
        recipe.distill,
        max_steps=max_steps,
        learning_rate=learning_rate,
        reward_weight=reward_weight,
    )
    inputs = {"data": data, "teacher": teacher, "model": model}
    summary = run_stage(
        "distill", recipe, out, as_json=True, library=library, resume=resume, clean=clean, inputs=inputs
    )
    from evoenv_cli.stages.train import is_main_rank

    if not is_main_rank():  # the other ranks of a launch: rank 0 reports for all
        return
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
    n: Annotated[int | None, recipe_option("bound.n")] = None,
    delta: Annotated[float | None, recipe_option("bound.delta")] = None,
    temperature: Annotated[float | None, recipe_option("bound.temperature")] = None,
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
        f"answered in {code.dtype} on {code.device} in batches of {code.batch_size} ({code.batching}), "
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
    samples: Annotated[
        Path | None,
        typer.Option(
            "--samples",
            help="Also write each item of S as a JSON line (question, noise seed, answer, score, correct) to this file, or - for stdout.",
        ),
    ] = None,
    first: Annotated[
        int | None,
        typer.Option(
            "--first",
            help="Answer only the first K instances of each environment in S (fix K before looking: the bound is at that n).",
            min=1,
        ),
    ] = None,
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

    recipe = runtime_recipe(config, sandbox, workers)
    code_path = code or stage.find_code(checkpoint)
    recorded = stage.read_code(code_path)
    for flag, given, value in (
        ("--n", n, recorded.n),
        ("--delta", delta, recorded.delta),
        ("--temperature", temperature, recorded.temperature),
    ):
        if given is not None and given != value:
            raise InputError(f"{code_path}: {flag} {given:g} differs from the {value:g} recorded before S")
    if samples is not None and str(samples) == "-" and as_json:
        raise InputError("--samples - with --json: stdout carries one of them; give --samples a file")
    if samples is not None and str(samples) != "-":
        artifacts.check_output_file(samples)  # before minutes of answering, not after
    lib = artifacts.EnvLibrary.open(library)
    with sandbox_pool(recipe) as pool:
        report = stage.run(checkpoint, lib, code_path, recipe.runtime, recipe.bound.batch_size, pool, samples, first)
    recorded_in = stage.record(report, code_path)
    if as_json:
        emit(json.dumps(asdict(report)))
        return
    lo, hi = report.accuracy_interval
    blo, bhi = report.base_accuracy_interval
    for line in (
        f"bound: {report.checkpoint} ({report.kind}, {report.trained_parameters} trained values)",
        *([f"  the first {first} instances of each environment: {report.n} of S's {report.sample_n}"] if first else []),
        f"  n={report.n} errors={report.errors} empirical error={report.empirical_error:.4f} "
        f"(accuracy {report.accuracy:.3f}, 95% {lo:.3f}-{hi:.3f})",
        f"  L={report.description_length_bits:.1f} bits = {report.bits['value_bits']:.0f} values "
        f"+ {report.bits['codebook_bits']:.1f} codebook + {report.bits['grid_bits']:.2f} grid (union bound); "
        f"{report.bits['free']}",
        f"  delta={report.delta:g}  {report.form}: error <= {report.risk_bound:.4f}, "
        f"accuracy >= {report.accuracy_lower_bound:.4f}",
        f"  base model on the same S: accuracy {report.base_accuracy:.3f} (95% {blo:.3f}-{bhi:.3f})",
        f"  {report.statement}",
        f"  recorded in {recorded_in} (`evoenv report` shows it)",
        *([f"  each item of S, answered and scored -> {samples}"] if samples is not None else []),
    ):
        err.print(line, markup=False, soft_wrap=True)
