"""`evoenv train`: GRPO (TRL's GRPOTrainer) on rows written by `evoenv sample`, rewarded by
the environments' own `score` through the sandboxed runtime, batched per step.

Inputs are checked before anything heavy loads: every row has the fields the reward needs,
every env_id is in the library, the model exists. The run writes the checkpoint (full, or a
LoRA adapter plus an optional merged copy), `train-manifest.json`, and `metrics.jsonl`: per
logged step TRL's numbers (reward mean/std, zero-variance-group share, KL, lengths) and per
environment reward mean/std and pass rate. The console gets one line per step
(`train_progress`); TRL's raw dicts go to OUT/log.txt.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

from evoenv_cli import artifacts
from evoenv_cli.config import AnswerConfig, RewardConfig, RuntimeConfig, TrainConfig, to_dict
from evoenv_cli.reward_audit import QUARANTINE_FILE
from evoenv_cli.rewards import EnvReward, FormatReward, row_instance
from evoenv_cli.stages import train_progress
from evoenv_cli.stages.train_progress import TRAIN_LOG

ROW_FIELDS = ("prompt", "env_id", "instance")


def check_inputs(data: Path, library: artifacts.EnvLibrary, model: str) -> list[dict]:
    """The rows, or an InputError naming the file and the first problem."""
    rows = list(artifacts.read_jsonl(data))
    if not rows:
        raise artifacts.InputError(f"{data}: no rows")
    known = {e.env_id for e in library.files}
    names = {e.name for e in library.files}
    for n, row in enumerate(rows, 1):
        missing = [f for f in ROW_FIELDS if f not in row]
        if missing:
            raise artifacts.InputError(f"{data}:{n}: row lacks {', '.join(missing)} (write rows with `evoenv sample`)")
        problem = row_problem(row)
        if problem:
            raise artifacts.InputError(f"{data}:{n}: {problem}")
        if row["env_id"] not in known and row.get("env_name") not in names:
            raise artifacts.InputError(
                f"{data}:{n}: environment {row['env_id']} ({row.get('env_name', '?')}) "
                f"is not in the library {library.root}"
            )
    return rows


def row_problem(row: dict) -> str | None:
    """What is wrong with the types of a row's fields, or None (rows are data: a list where a
    string belongs is an input error, not a TypeError later)."""
    prompt = row["prompt"]
    chat = isinstance(prompt, list) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in prompt
    )
    if not prompt or not (isinstance(prompt, str) or chat):
        return "prompt must be chat messages ({role, content} strings) or text"
    if not isinstance(row["env_id"], str):
        return f"env_id must be a string, not {type(row['env_id']).__name__}"
    if row.get("env_name") is not None and not isinstance(row["env_name"], str):
        return f"env_name must be a string, not {type(row['env_name']).__name__}"
    if row_instance(row["instance"]) is None:
        return "instance must be a JSON object (or its JSON text)"
    for key in ("answer", "solution"):
        if key in row and not isinstance(row[key], str):
            return f"{key} must be a string, not {type(row[key]).__name__}"
    return None


def check_settings(cfg: TrainConfig) -> None:
    """Settings that can be checked before anything loads: the arena's judge."""
    if cfg.zero_variance == "judge":
        from evoenv_cli.stages.arena import check_judge

        check_judge(cfg.arena.judge)


def check_model(model: str) -> str:
    """The model as transformers should load it: a local folder (checked here, never looked up
    on the hub) or a hub id (see `llm.base.resolve_model`)."""
    from evoenv_cli.llm.base import resolve_model

    return resolve_model(model)


class StepRewards:
    """The reward function TRL calls, keeping per-environment rewards until the next log; with
    an arena (`train.zero_variance: judge`), zero-variance groups get the judge's rewards too.

    With a format weight w, TRL's reward is (1 - w) x this column + w x the format column. The
    arena must see that sum (a group whose scores tie but whose formats differ is not zero
    variance, and the judge's rewards must not reorder it), so it is given the sum, and what it
    adds comes back in this column divided by 1 - w: TRL's weighted sum then gets exactly the
    arena's rewards."""

    __name__ = "evoenv_env_reward"

    def __init__(
        self, reward: EnvReward, arena=None, format_reward: FormatReward | None = None, format_weight: float = 0.0
    ):
        self.reward = reward
        self.arena = arena
        self.format_reward = format_reward if format_weight else None
        self.format_weight = format_weight if format_reward is not None else 0.0
        self._lock = threading.Lock()
        self.window: dict[str, list[tuple[float, float]]] = defaultdict(list)  # name -> (reward, score)

    def __call__(self, prompts=None, completions=None, env_id=None, instance=None, env_name=None, **kwargs):
        details = self.reward.details(completions, env_id, instance, env_name)
        with self._lock:
            for d, eid, name in zip(details, env_id, env_name or [None] * len(details)):
                self.window[name or eid].append((d["reward"], d["score"]))
        rewards = [d["reward"] for d in details]
        if self.arena is None:
            return rewards
        if self.format_reward is None:
            return self.arena.rescore_columns(rewards, prompts, completions, env_id, instance, kwargs)
        w = self.format_weight
        formats = self.format_reward(prompts, completions)
        totals = [(1.0 - w) * r + w * f for r, f in zip(rewards, formats)]
        judged = self.arena.rescore_columns(totals, prompts, completions, env_id, instance, kwargs)
        return [r + (j - t) / (1.0 - w) for r, t, j in zip(rewards, totals, judged)]

    def drain(self) -> dict[str, dict]:
        with self._lock:
            window, self.window = self.window, defaultdict(list)
        out = {}
        for name, pairs in sorted(window.items()):
            rewards = [r for r, _ in pairs]
            out[name] = {
                "n": len(pairs),
                "reward_mean": round(statistics.fmean(rewards), 4),
                "reward_std": round(statistics.pstdev(rewards), 4),
                "pass_rate": round(sum(s >= 1.0 for _, s in pairs) / len(pairs), 4),
            }
        return out


def grpo_args(cfg: TrainConfig, out: Path, evaluating: bool = False, format_weight: float = 0.0) -> dict[str, Any]:
    """GRPOConfig keyword arguments, as TRL 1.x names them. With a format weight w the
    environment reward and the format reward are two reward functions weighted 1 - w and w,
    so TRL logs each apart and their weighted sum is the reward."""
    import torch

    on_gpu = torch.cuda.is_available() and not cfg.use_cpu
    args = dict(
        output_dir=str(out / "checkpoints"),
        learning_rate=cfg.learning_rate,
        beta=cfg.beta,
        num_generations=cfg.num_generations,
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature,
        num_train_epochs=cfg.epochs,
        max_steps=cfg.max_steps,
        seed=cfg.seed,
        loss_type=cfg.loss_type,
        scale_rewards=cfg.scale_rewards,
        logging_steps=cfg.logging_steps,
        save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit,
        max_grad_norm=cfg.max_grad_norm,
        warmup_steps=cfg.warmup_steps,
        report_to=cfg.report_to,
        use_cpu=not on_gpu,
        bf16=on_gpu if cfg.bf16 is None else cfg.bf16,
        log_completions=cfg.log_completions,
        use_vllm=cfg.use_vllm,
        disable_tqdm=True,  # train_progress prints a line per step with an ETA from measured steps
    )
    if format_weight:
        args["reward_weights"] = [1.0 - format_weight, format_weight]
    if evaluating:
        args.update(
            eval_strategy="steps",
            eval_steps=cfg.eval_steps or cfg.save_steps,
            per_device_eval_batch_size=cfg.per_device_eval_batch_size or cfg.per_device_train_batch_size,
        )
        if cfg.num_generations_eval:
            args["num_generations_eval"] = cfg.num_generations_eval
    if cfg.use_vllm:
        args.update(
            vllm_mode=cfg.vllm_mode,
            vllm_gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
            vllm_tensor_parallel_size=cfg.vllm_tensor_parallel_size,
        )
        if cfg.vllm_mode == "server" and cfg.vllm_server_base_url:
            args["vllm_server_base_url"] = cfg.vllm_server_base_url
    if cfg.chat_template_kwargs:
        args["chat_template_kwargs"] = cfg.chat_template_kwargs
    # transformers 5 renamed gradient_checkpointing to activation_checkpointing and warns on
    # the old name, which TRL's config always sets: pass the new one where it exists.
    from trl import GRPOConfig

    fields = getattr(GRPOConfig, "__dataclass_fields__", {})
    args["activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"] = (
        cfg.gradient_checkpointing
    )
    return args


# TRL toggles checkpointing through the old method names, which transformers 5 deprecates:
# noise the user can do nothing about, so it is silenced while training (and only that).
_TRL_CHECKPOINTING_NOISE = r"`(is_)?gradient_checkpointing\w*` is deprecated"


def run(
    data: Path,
    library: artifacts.EnvLibrary,
    model: str,
    out: Path,
    cfg: TrainConfig,
    reward_cfg: RewardConfig,
    runtime: RuntimeConfig,
    resume: bool = False,
    eval_data: Path | None = None,
    judge=None,
    answer: AnswerConfig | None = None,
) -> dict:
    """GRPO on `data`; with `eval_data` (rows from `sample --split heldout`) TRL evaluates on
    them every `eval_steps` and the eval numbers go to metrics.jsonl too. `judge` (a backend)
    overrides `train.arena.judge` when the arena is on. `answer`: the recipe's answer format,
    whose tag the reward extracts."""
    answer = answer or AnswerConfig()
    rows = check_inputs(data, library, model)
    model = check_model(model)
    eval_rows = check_inputs(eval_data, library, model) if eval_data is not None else []
    if not 0.0 <= reward_cfg.format_weight < 1.0:
        raise artifacts.InputError(f"reward.format_weight must be in [0, 1) (got {reward_cfg.format_weight!r})")
    check_settings(cfg)
    started = artifacts.now_iso()
    out.mkdir(parents=True, exist_ok=True)

    import datasets
    import transformers
    from trl import GRPOConfig, GRPOTrainer

    transformers.set_seed(cfg.seed)
    # their bars (reading the rows, loading the weights) are noise in a log; the steps get lines
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    dataset = datasets.load_dataset("json", data_files=str(data), split="train")
    eval_dataset = (
        datasets.load_dataset("json", data_files=str(eval_data), split="train") if eval_data is not None else None
    )
    reward = EnvReward(
        library.files,
        answer_tag=answer.tag,
        sandbox=runtime.sandbox,
        workers=runtime.workers,
        limits=runtime.limits,
        recheck_share=reward_cfg.recheck_share,
        recheck_seed=cfg.seed,
        quarantine_log=out / QUARANTINE_FILE,
    )
    format_reward = FormatReward(answer.tag) if reward_cfg.format_weight else None
    step_rewards = StepRewards(reward, format_reward=format_reward, format_weight=reward_cfg.format_weight)
    reward_funcs: list = [step_rewards, *([format_reward] if format_reward else [])]
    peft_config = None
    if cfg.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=cfg.lora_r,
            lora_alpha=cfg.lora_alpha,
            lora_dropout=cfg.lora_dropout,
            target_modules=cfg.lora_target_modules,
            task_type="CAUSAL_LM",
        )
    metrics_path = out / "metrics.jsonl"
    if not resume:
        metrics_path.unlink(missing_ok=True)
    args = grpo_args(cfg, out, evaluating=eval_dataset is not None, format_weight=reward_cfg.format_weight)
    loading = time.perf_counter()  # the trainer loads the policy (and its reference) here
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_TRL_CHECKPOINTING_NOISE, category=FutureWarning)
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward_funcs,
            args=GRPOConfig(**args),
            train_dataset=dataset,
            eval_dataset=eval_dataset,
            peft_config=peft_config,
            callbacks=[_metrics_callback(metrics_path, step_rewards), train_progress.callback(out / TRAIN_LOG)],
        )
        train_progress.quiet_trl(trainer)
        load_s = time.perf_counter() - loading
        checkpoint = resume and any((out / "checkpoints").glob("checkpoint-*"))
        arena = None
        if cfg.zero_variance == "judge":
            from evoenv_cli.stages import arena as arena_stage

            arena = step_rewards.arena = arena_stage.build(trainer, cfg, out, resume=bool(checkpoint), judge=judge)
        try:
            result = trainer.train(resume_from_checkpoint=True if checkpoint else None)
        finally:
            reward.close()
            if arena is not None:
                arena.close()
    trainer.save_model(str(out))
    if trainer.processing_class is not None:
        trainer.processing_class.save_pretrained(str(out))
    merged = None
    if cfg.lora and cfg.merge_lora:
        merged = out / "merged"
        trainer.model.merge_and_unload().save_pretrained(str(merged))
        if trainer.processing_class is not None:
            trainer.processing_class.save_pretrained(str(merged))
    artifacts.follow_umask(out)
    summary = {
        "stage": "train",
        "steps": trainer.state.global_step,
        "rows": len(rows),
        "eval_rows": len(eval_rows),
        "eval_reward": _last_eval_reward(metrics_path),
        "train_loss": result.training_loss,
        "checkpoint": str(out),
        "merged": str(merged) if merged else None,
        "adapter": bool(cfg.lora),
        "mean_reward": _mean_reward(metrics_path),
        "all_groups_zero_variance": all_groups_zero_variance(metrics_path),
        "rewards_rechecked": reward.audit.checked,
        "quarantined": sorted(reward.audit.quarantined),
        "arena": arena.summary() if arena is not None else None,
    }
    artifacts.write_json_atomic(
        out / "train-manifest.json",
        {
            **artifacts.manifest(
                "train",
                {
                    "train": to_dict(cfg),
                    "reward": to_dict(reward_cfg),
                    "answer": to_dict(answer),
                    "runtime": to_dict(runtime),
                },
                library.files,
                started,
                {"rows": len(rows), "steps": summary["steps"]},
                {
                    "data": str(data),
                    "eval_data": str(eval_data) if eval_data else None,
                    "model": model,
                    "library": str(library.root),
                },
                out=out,
            ),
            "summary": summary,
            "timings": {"load_s": round(load_s, 3), "sandbox_calls": reward.sandbox_calls},
        },
    )
    return summary


def all_groups_zero_variance(metrics_path: Path) -> bool:
    """Whether every GRPO group of the run scored all its completions the same: then every
    advantage is 0, nothing is learned and the weights did not change. (Each logged record
    averages its logging window, so 1.0 everywhere means every group, not just logged ones.)"""
    shares = [r.get("frac_reward_zero_std") for r in artifacts.read_jsonl_tolerant(metrics_path)]
    return bool(shares) and all(s == 1 for s in shares)


def _mean_reward(metrics_path: Path) -> float | None:
    values = [
        r["reward"] for r in artifacts.read_jsonl_tolerant(metrics_path) if isinstance(r.get("reward"), (int, float))
    ]
    return round(statistics.fmean(values), 4) if values else None


def _last_eval_reward(metrics_path: Path) -> float | None:
    values = [
        r["eval_reward"]
        for r in artifacts.read_jsonl_tolerant(metrics_path)
        if isinstance(r.get("eval_reward"), (int, float))
    ]
    return round(values[-1], 4) if values else None


def _metrics_callback(path: Path, step_rewards: StepRewards):
    from transformers import TrainerCallback

    class MetricsLog(TrainerCallback):
        """One JSON line per logged step: TRL's numbers plus per-environment rewards; and one
        per evaluation (its `eval_*` numbers; the per-environment window is training's)."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return
            training, evaluation = "reward" in logs, "eval_reward" in logs
            if not (training or evaluation):
                return
            record = {
                "step": state.global_step,
                **{k: v for k, v in logs.items() if isinstance(v, (int, float)) and v == v},
            }
            if training:
                record["per_env"] = step_rewards.drain()
            with path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
                f.flush()
                os.fsync(f.fileno())

        def on_save(self, args, state, control, **kwargs):
            if state.is_world_process_zero:  # checkpoints as readable as every other output
                artifacts.follow_umask(args.output_dir)

    return MetricsLog()
