"""`evoenv distill`: on-policy distillation of a trained teacher into a TinyLoRA student, with
TRL's DistillationTrainer. The student is the base model plus a TinyLoRA adapter (shaped by
train.tinylora_*); it samples completions of `evoenv sample` rows itself and learns the
teacher's next-token distribution on them under the generalized JSD (beta 1.0: reverse KL).

DistillationTrainer's loss has no reward term. With distill.reward_weight w > 0 the
environments' reward is mixed in by a subclass that scores TRL's own samples in the sandbox and
adds w times a REINFORCE term to TRL's divergence (training/mixed_reward.py); at 0 (the default)
TRL's trainer runs as it is. The adapter is then quantized to bound.bits (OUT/quantized) for
`evoenv bound`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

from evoenv_cli import artifacts
from evoenv_cli.config import (
    AnswerConfig,
    BoundConfig,
    DistillConfig,
    RewardConfig,
    RuntimeConfig,
    TrainConfig,
    to_dict,
)
from evoenv_cli.errors import InputError
from evoenv_cli.stage import Context, Input, Stage, register
from evoenv_cli.stages.train import (
    CHECKED,
    METRICS_FILE,
    RowsChecked,
    adapter_config,
    check_model,
    check_rows,
    checked_rows,
    checkpointing_noise_silenced,
    is_main_rank,
    recipe_reward,
    thinking_rule,
    trained_parameters,
    world_size,
)
from evoenv_cli.training import precision, quantize
from evoenv_cli.training.cpu_head import compact_lm_head_on_cpu

MANIFEST = "distill-manifest.json"
DIVERGENCE = {1.0: "reverse KL", 0.0: "forward KL"}  # by beta


def teacher_source(teacher: str, dtype: str = "float32"):
    """The teacher as DistillationTrainer takes it: a model folder, or (for a LoRA checkpoint
    with no merged copy) its base loaded in `dtype` with the adapter merged in (once: a single
    rounding in bf16)."""
    path = Path(check_model(teacher))
    if not (path / "adapter_config.json").is_file():
        return str(path)
    if (path / "merged" / "config.json").is_file():
        return str(path / "merged")
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = json.loads((path / "adapter_config.json").read_text()).get("base_model_name_or_path")
    if not base:
        raise InputError(f"{path}/adapter_config.json: names no base model")
    model = AutoModelForCausalLM.from_pretrained(check_model(base), dtype=getattr(torch, dtype))
    return PeftModel.from_pretrained(model, str(path)).merge_and_unload()


def check_mixable(model: str) -> None:
    """distill.reward_weight projects the student's hidden states through its LM head alone:
    refuse a model whose logits are scaled or capped after it (one line, exit 2)."""
    from transformers import AutoConfig

    from evoenv_cli.training.mixed_reward import logit_transforms

    found = logit_transforms(AutoConfig.from_pretrained(model))
    if found:
        raise InputError(
            f"{model}: distill.reward_weight needs logits straight from the LM head; this model's config sets "
            f"{', '.join(found)}"
        )


def distill_args(cfg: DistillConfig, out: Path, student: TrainConfig) -> dict:
    """DistillationConfig keyword arguments. On a GPU: bf16, checkpointing, the student's base in
    the dtype `precision.weights_dtype` gives a TinyLoRA adapter (bf16: the base is never
    written) and the frozen teacher in bf16, each kept whole on its one GPU by one process (TRL's
    default there is device_map="auto", every visible card) and placed by each rank's
    accelerator under a launcher. On the CPU: float32 throughout."""
    import torch
    from trl import DistillationConfig

    on_gpu = torch.cuda.is_available() and not cfg.use_cpu
    bf16 = precision.trains_in_bf16(cfg.bf16, on_gpu)
    device_map = {"": 0} if on_gpu and world_size() == 1 else None
    sharding, _ = precision.launched_sharding()
    args = dict(
        output_dir=str(out / "checkpoints"),
        beta=cfg.beta,
        learning_rate=cfg.learning_rate,
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature,
        seed=cfg.seed,
        logging_steps=cfg.logging_steps,
        save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit,
        report_to="none",
        use_cpu=not on_gpu,
        bf16=bf16,
        model_init_kwargs={"dtype": precision.weights_dtype(student, on_gpu, bf16, sharding), "device_map": device_map},
        teacher_model_init_kwargs={"dtype": "bfloat16" if on_gpu and bf16 else "float32", "device_map": device_map},
    )
    checkpointing = on_gpu if cfg.gradient_checkpointing is None else cfg.gradient_checkpointing
    fields = getattr(DistillationConfig, "__dataclass_fields__", {})
    args["activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"] = (
        checkpointing
    )
    return args


def run(
    data: Path,
    library: artifacts.EnvLibrary,
    teacher: str,
    model: str,
    out: Path,
    cfg: DistillConfig,
    train_cfg: TrainConfig,
    bound_cfg: BoundConfig,
    answer: AnswerConfig,
    resume: bool = False,
    runtime: RuntimeConfig | None = None,
    reward_cfg: RewardConfig | None = None,
    checked: RowsChecked | None = None,
) -> dict:
    """Distil `teacher` into base `model` + TinyLoRA on the rows' prompts; write the adapter,
    OUT/quantized (bound.bits) and distill-manifest.json. With cfg.reward_weight > 0 the rows'
    environments score the student's samples (in `runtime`'s sandbox, paid as `reward_cfg`)."""
    rows = checked or check_rows(data, library)
    model = check_model(model)
    check_model(teacher)
    runtime, reward_cfg = runtime or RuntimeConfig(), reward_cfg or RewardConfig()
    mixed = cfg.reward_weight > 0
    if mixed:
        check_mixable(model)
    student = dataclasses.replace(train_cfg, adapter="tinylora", use_vllm=False)
    precision.check(student, *precision.launched_sharding())  # TinyLoRA's SVD needs whole weights
    started = artifacts.now_iso()
    if is_main_rank():
        out.mkdir(parents=True, exist_ok=True)

    import datasets
    import transformers
    from transformers import AutoTokenizer
    from trl import DistillationConfig, DistillationTrainer

    compact_lm_head_on_cpu()  # on a CPU, the divergence projects the completion's positions alone
    transformers.set_seed(cfg.seed)
    # with the reward mixed in, the rows' environment columns travel with the prompts to the reward
    columns = ["prompt", *(("env_id", "instance", "env_name") if mixed else ())]
    dataset = datasets.load_dataset("json", data_files=str(data), split="train")
    dataset = dataset.select_columns([c for c in columns if c in dataset.column_names])
    tokenizer = AutoTokenizer.from_pretrained(model, padding_side="left")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    args = distill_args(cfg, out, student)
    source = teacher_source(teacher, args["teacher_model_init_kwargs"]["dtype"])
    if not isinstance(source, str):  # TRL refuses load settings for a teacher already in memory
        del args["teacher_model_init_kwargs"]
    reward = None
    extra: dict = {}
    trainer_cls = DistillationTrainer
    if mixed:
        from evoenv_cli.training import mixed_reward

        # one column: TRL's distillation has no reward_weights to pay the format bonus apart
        reward = recipe_reward(library, answer, reward_cfg, runtime, cfg.seed, out, reward_cfg.format_weight)
        trainer_cls, extra = mixed_reward.trainer_class(), {"env_reward": reward, "reward_weight": cfg.reward_weight}
    loading = time.perf_counter()
    try:
        with checkpointing_noise_silenced():
            trainer = trainer_cls(
                model=model,
                teacher_model=source,
                args=DistillationConfig(**args),
                train_dataset=dataset,
                processing_class=tokenizer,
                peft_config=adapter_config(student),
                **extra,
            )
            load_s = time.perf_counter() - loading
            if reward is not None:
                thinking_rule(trainer, student, [reward])
            checkpoint = resume and any((out / "checkpoints").glob("checkpoint-*"))
            result = trainer.train(resume_from_checkpoint=True if checkpoint else None)
    finally:
        if reward is not None:
            reward.close()
    trainer.save_model(str(out))  # on every rank: a sharded run gathers there, transformers writes on rank 0
    if not is_main_rank():  # rank 0 alone writes the rest; every rank waits for it at the end
        trainer.accelerator.wait_for_everyone()
        return {"stage": "distill", "rank": int(os.environ.get("RANK", "0")), "steps": trainer.state.global_step}
    tokenizer.save_pretrained(str(out))
    with artifacts.atomic_file(out / METRICS_FILE) as f:
        for record in trainer.state.log_history:
            f.write(json.dumps(record) + "\n")
    hyper = {
        "u": student.tinylora_u,
        "bits": bound_cfg.bits,
        "learning_rate": cfg.learning_rate,
        "steps": cfg.max_steps,
        "reward_weight": cfg.reward_weight,
    }
    quantized = quantize.quantize_adapter(out, out / "quantized", bound_cfg.bits, bound_cfg.grid, hyper)
    params = trained_parameters(trainer.model)
    summary = {
        "stage": "distill",
        "steps": trainer.state.global_step,
        "rows": rows.count,
        "train_loss": result.training_loss,
        "teacher": teacher,
        "checkpoint": str(out),
        "quantized": str(out / "quantized"),
        "adapter_kind": "tinylora",
        "bf16": args["bf16"],  # distill.bf16 resolved: null or auto as this machine ran it
        "trained_parameters": params,
        "loss": f"generalized JSD, beta {cfg.beta:g} ({DIVERGENCE.get(cfg.beta, 'JSD')})"
        + (f" + {cfg.reward_weight:g} x REINFORCE on the environments' reward" if mixed else ""),
        "reward_mixed_in": mixed,
        "reward_weight": cfg.reward_weight,
        "quantized_bits": quantized["description_length"]["total"],
        "quantization_max_abs_error": quantized["max_abs_error"],
    }
    manifest = artifacts.manifest(
        "distill",
        {
            "distill": to_dict(cfg),
            "train": to_dict(student),
            "bound": to_dict(bound_cfg),
            "answer": to_dict(answer),
            **({"reward": to_dict(reward_cfg)} if mixed else {}),
        },
        library.files,
        started,
        {"rows": rows.count, "steps": summary["steps"]},
        {"data": str(data), "teacher": teacher, "model": model, "library": str(library.root)},
        out=out,
    )
    artifacts.write_json_atomic(
        out / MANIFEST, {**manifest, "summary": summary, "timings": {"load_s": round(load_s, 3)}}
    )
    artifacts.write_json_atomic(
        out / "quantized" / MANIFEST, {**manifest, "summary": {**summary, "trained_parameters": params}}
    )
    artifacts.follow_umask(out)
    trainer.accelerator.wait_for_everyone()
    return summary


# -- the stage's record (evoenv_cli/stage.py) ------------------------------------------------------
def _check(ctx: Context, lib: artifacts.EnvLibrary) -> None:
    artifacts.check_output_folder(ctx.out)
    checked_rows(ctx, lib, "data")
    check_model(ctx.inputs["teacher"])


def _settings(ctx: Context) -> dict:
    r = ctx.recipe  # --resume may raise max_steps: not in the settings
    return dict(
        distill={k: v for k, v in to_dict(r.distill).items() if k != "max_steps"},
        train=r.train,
        bound=r.bound,
        **({"reward": r.reward} if r.distill.reward_weight else {}),
        teacher=ctx.inputs["teacher"],
        model=ctx.inputs["model"],
        data=ctx.inputs["data"],
    )


def _run(ctx: Context, lib, out: Path, llm, bar) -> dict:
    r, given = ctx.recipe, ctx.inputs
    return run(
        given["data"],
        lib,
        given["teacher"],
        given["model"],
        out,
        r.distill,
        r.train,
        r.bound,
        r.answer,
        ctx.resume,
        runtime=r.runtime,
        reward_cfg=r.reward,
        checked=(given.get("checked") or {}).get("data"),
    )


STAGE = register(
    Stage(
        "distill",
        sections=("distill", "train", "bound", "answer", "reward", "runtime"),
        marker=MANIFEST,
        settings=_settings,
        run=_run,
        partial=("checkpoints", "checkpoint-*"),
        envs=False,
        allow_empty=False,
        check=_check,
        prepares=lambda ctx: is_main_rank(),  # under accelerate launch every rank runs it; one prepares OUT
        inputs=(
            Input("data", "Rows written by `evoenv sample` (JSONL): their prompts.", "path", required=True),
            Input("teacher", "The trained teacher: a checkpoint (LoRA or full).", required=True),
            Input("model", "The base model the TinyLoRA student adapts.", required=True),
            CHECKED,
        ),
    )
)
