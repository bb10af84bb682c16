"""`evoenv train`: GRPO (TRL's GRPOTrainer) on rows written by `evoenv sample`, rewarded by
the environments' own `score` through the sandboxed runtime, batched per step.

Inputs are checked before anything heavy loads: every row has the fields the reward needs,
every env_id is in the library, the model exists. The run writes the checkpoint (full, or a
LoRA adapter plus an optional merged copy), `train-manifest.json`, and `metrics.jsonl`: per
logged step TRL's numbers (reward mean/std, zero-variance-group share of the weighted sum, KL,
lengths), per environment reward mean/std and pass rate, and the task's own signal
(`train/score_mean`, `train/zero_variance_share` on the environment's score alone,
`train/format_share`, and the zero-variance share per reward function). The console gets one
line per step (`train_progress`); TRL's raw dicts go to OUT/log.txt.

Why one module: the train stage is one TRL run: inputs, reward, trainer arguments, callbacks and
the save are one sequence whose order matters (rank 0 writes, the marker last).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import sys
import threading
import time
import warnings
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from evoenv_cli import artifacts
from evoenv_cli.config import (
    AnswerConfig,
    RewardConfig,
    RuntimeConfig,
    TrainConfig,
    check_values,
    field_problem,
    override,
    to_dict,
)
from evoenv_cli.conversations import without_demonstrations
from evoenv_cli.errors import InputError
from evoenv_cli.integrations.reward_audit import QUARANTINE_FILE
from evoenv_cli.integrations.rewards import EnvReward, FormatReward, row_instance
from evoenv_cli.stage import Context, Input, Result, Round, Stage, register, result_in
from evoenv_cli.training import precision, progress
from evoenv_cli.training.cpu_head import compact_lm_head_on_cpu
from evoenv_cli.training.progress import TRAIN_LOG

MARKER = "train-manifest.json"  # written last, by rank 0, once every rank has finished
METRICS_FILE = "metrics.jsonl"  # a line per logged step (TRL's numbers and evoenv's)

ROW_FIELDS = ("prompt", "env_id", "instance")


@dataclass(frozen=True)
class RowsChecked:
    """A rows file read once and found good: what the stage needs of it besides the rows
    themselves (which the trainer's dataset reads from the file)."""

    path: Path
    count: int
    answer_tags: frozenset[str]  # the tags the rows' prompts asked for


def check_rows(data: Path, library: artifacts.EnvLibrary) -> RowsChecked:
    """The rows file checked row by row as it is read (memory flat in its length), or an
    InputError naming the file, the row and the first problem."""
    known = {e.env_id for e in library.files}
    names = {e.name for e in library.files}
    count, tags = 0, set()
    for n, row in enumerate(artifacts.read_jsonl(data), 1):
        missing = [f for f in ROW_FIELDS if f not in row]
        if missing:
            raise InputError(f"{data}:{n}: row lacks {', '.join(missing)} (write rows with `evoenv sample`)")
        problem = row_problem(row)
        if problem:
            raise InputError(f"{data}:{n}: {problem}")
        if row["env_id"] not in known and row.get("env_name") not in names:
            raise InputError(
                f"{data}:{n}: environment {row['env_id']} ({row.get('env_name', '?')}) "
                f"is not in the library {library.root}"
            )
        count += 1
        if "answer_tag" in row:
            tags.add(row["answer_tag"])
    if not count:
        raise InputError(f"{data}: no rows")
    return RowsChecked(Path(data), count, frozenset(tags))


def checked_rows(ctx: Context, lib: artifacts.EnvLibrary, *names: str) -> None:
    """A stage's check of its rows files (`names`: its inputs that are one), each read once:
    kept as ctx.inputs["checked"] for its run, which reads none again."""
    ctx.inputs["checked"] = {
        name: check_rows(ctx.inputs[name], lib) for name in names if ctx.inputs.get(name) is not None
    }


CHECKED = Input("checked", "Its rows files as its check read them (RowsChecked, by input).", "object")


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
    for key in ("answer", "solution", "answer_tag"):
        if key in row and not isinstance(row[key], str):
            return f"{key} must be a string, not {type(row[key]).__name__}"
    weight = row.get("format_weight", 0.0)
    problem = field_problem(RewardConfig, "format_weight", weight)  # the recipe's own bound
    return f"format_weight {problem}, not {weight!r}" if problem else None


def check_settings(cfg: TrainConfig) -> None:
    """Settings that can be checked before anything loads: an adapter under a sharding that
    cannot merge it correctly (`precision.refusal`, as this process's launcher set it up), the
    arena's judge."""
    precision.check(cfg, *precision.launched_sharding())
    if cfg.zero_variance == "judge":
        from evoenv_cli.training.arena import check_judge

        check_judge(cfg.arena.judge)


def check_model(model: str) -> str:
    """The model as transformers should load it: a local folder (checked here, never looked up
    on the hub) or a hub id (see `llm.base.resolve_model`)."""
    from evoenv_cli.llm.base import resolve_model

    return resolve_model(model)


class StepRewards:
    """The reward function TRL calls, keeping per-environment rewards and the task's signal
    until the next log; with an arena (`train.zero_variance: judge`), zero-variance groups get
    the judge's rewards too.

    Zero variance is judged on the environment's score, not on TRL's weighted sum: with a
    format weight w, TRL's reward is (1 - w) x this column + w x the format column, and a
    group whose scores tie but whose formats differ has variance in that sum while it teaches
    nothing about the task. So the signal logged (`train/zero_variance_share`) and the groups
    the arena judges are those whose *scores* tie; the arena ranks inside the sum TRL forms
    (so its rewards never reorder what the format separates), and what it adds comes back in
    this column divided by 1 - w: TRL's weighted sum then gets exactly the arena's rewards."""

    __name__ = "evoenv_env_reward"

    def __init__(
        self,
        reward: EnvReward,
        arena=None,
        format_reward: FormatReward | None = None,
        format_weight: float = 0.0,
        group_size: int = 1,
    ):
        self.reward = reward
        self.arena = arena
        self.format_reward = format_reward if format_weight else None
        self.format_weight = format_weight if format_reward is not None else 0.0
        self.group_size = max(1, group_size)
        self._lock = threading.Lock()
        self.window: dict[str, list[tuple[float, float]]] = defaultdict(list)  # name -> (reward, score)
        self.signal = SignalWindow()
        # the last batch's completions and, per completion, whether its answer was extracted:
        # the format column of the same batch (TimedFormat, the arena) reads it, not the text again
        self.extracted: tuple[list, list[float]] | None = None

    def _same_rule(self) -> bool:
        """Whether the format column extracts answers as this column's reward does: the same
        tag, the same choice of the rows' rule or its own, the same thinking rule and end ids
        (`thinking_rule` gives both the trainer's)."""
        fmt = self.format_reward
        keys = ("answer_tag", "rows_rule", "opens_think", "end_ids")
        return fmt is not None and all(
            hasattr(self.reward, k) and getattr(self.reward, k) == getattr(fmt, k) for k in keys
        )

    def formats(self, completions: list) -> list[float] | None:
        """The format column of `completions` when they are the batch this column just scored
        (TRL hands every reward function the same list), from the answers it extracted with the
        same tag and thinking rule; None for another batch."""
        if self.extracted is None or self.extracted[0] is not completions:
            return None
        return list(self.extracted[1])

    def __call__(self, prompts=None, completions=None, env_id=None, instance=None, env_name=None, **kwargs):
        started = time.perf_counter()
        try:
            return self._rewards(prompts, completions, env_id, instance, env_name, kwargs)
        finally:
            self.spent(time.perf_counter() - started)

    def spent(self, seconds: float) -> None:
        """Seconds of the step spent in evoenv's reward path (this column, the format column, the
        metrics callback): `train/reward_seconds`, against TRL's `step_time`."""
        with self._lock:
            self.signal.seconds += seconds

    def _rewards(self, prompts, completions, env_id, instance, env_name, kwargs) -> list[float]:
        details = self.reward.details(completions, env_id, instance, env_name, kwargs.get("completion_ids"))
        self.extracted = None
        if self._same_rule() and not any(d.get("status") == "bad_row" for d in details):
            self.extracted = (completions, [0.0 if d["answer"] is None else 1.0 for d in details])
        with self._lock:
            for d, eid, name in zip(details, env_id, env_name or [None] * len(details)):
                self.window[name or eid].append((d["reward"], d["score"]))
            self.signal.add(details, self.group_size)
        rewards = [d["reward"] for d in details]
        if self.arena is None:
            return rewards
        if self.format_reward is None:
            return self.arena.rescore_columns(rewards, prompts, completions, env_id, instance, kwargs)
        w = self.format_weight
        formats = self.formats(completions) or self.format_reward(
            prompts, completions, completion_ids=kwargs.get("completion_ids")
        )
        totals = [(1.0 - w) * r + w * f for r, f in zip(rewards, formats)]
        judged = self.arena.rescore_columns(totals, prompts, completions, env_id, instance, kwargs, ties=rewards)
        return [r + (j - t) / (1.0 - w) for r, t, j in zip(rewards, totals, judged)]

    def drain(self, gather=None) -> tuple[dict[str, dict], dict[str, Any]]:
        """Per environment its window's numbers, and the window's signal (`SignalWindow.record`),
        since the last drain. `gather` (every rank calls it, as accelerate's `gather_object`)
        joins the windows of all ranks, each of which scored only its own share of the step."""
        with self._lock:
            window, self.window = dict(self.window), defaultdict(list)
            signal, self.signal = self.signal, SignalWindow()
        joined: dict[str, list[tuple[float, float]]] = defaultdict(list)
        total = SignalWindow()
        for part, part_signal in gather([(window, signal)]) if gather is not None else [(window, signal)]:
            for name, pairs in part.items():
                joined[name].extend(pairs)
            total.merge(part_signal)
        out = {}
        for name, pairs in sorted(joined.items()):
            rewards = [r for r, _ in pairs]
            out[name] = {
                "n": len(pairs),
                "reward_mean": round(statistics.fmean(rewards), 4),
                "reward_std": round(statistics.pstdev(rewards), 4),
                "pass_rate": round(sum(s >= 1.0 for _, s in pairs) / len(pairs), 4),
            }
        return out, total.record()


class TimedFormat:
    """The format column as TRL calls it, its seconds booked to the reward path: read from the
    answers the environment's column extracted from the same batch (`StepRewards.formats`),
    else extracted again."""

    __name__ = vars(FormatReward)["__name__"]

    def __init__(self, format_reward: FormatReward, step_rewards: StepRewards):
        self.format_reward, self.step_rewards = format_reward, step_rewards

    def __call__(self, prompts=None, completions=None, **kwargs):
        started = time.perf_counter()
        try:
            known = self.step_rewards.formats(completions) if completions is not None else None
            return known if known is not None else self.format_reward(prompts, completions, **kwargs)
        finally:
            self.step_rewards.spent(time.perf_counter() - started)


@dataclass
class SignalWindow:
    """What the task's reward taught over a logging window, per GRPO group of this process's
    completions (TRL's groups are `num_generations` consecutive completions of one prompt): how
    many groups tied on the environment's score, how many tied on the format (an answer in the
    tags or not), the score's mean and the share of completions with a well-formed answer."""

    groups: int = 0
    score_ties: int = 0
    format_ties: int = 0
    completions: int = 0
    score_sum: float = 0.0
    formatted: int = 0
    seconds: float = 0.0  # in the reward path (StepRewards.spent)

    def add(self, details: list[dict], group_size: int) -> None:
        self.completions += len(details)
        self.score_sum += sum(d["score"] for d in details)
        self.formatted += sum(d["answer"] is not None for d in details)
        for start in range(0, len(details) - group_size + 1, group_size):
            group = details[start : start + group_size]
            self.groups += 1
            self.score_ties += len({d["score"] for d in group}) == 1
            self.format_ties += len({d["answer"] is not None for d in group}) == 1

    def merge(self, other: SignalWindow) -> None:
        """Add another rank's window (every field is a count or a sum)."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def record(self) -> dict[str, Any]:
        if not self.completions:
            return {}
        groups = max(self.groups, 1)
        return {
            "train/reward_seconds": round(self.seconds, 4),
            "train/score_mean": round(self.score_sum / self.completions, 4),
            "train/zero_variance_share": round(self.score_ties / groups, 4),
            "train/format_share": round(self.formatted / self.completions, 4),
            # per reward function, under the name TRL logs it by (the class attribute, not the
            # class's own name): the share of groups that function alone left tied
            "zero_variance_by_reward": {
                vars(StepRewards)["__name__"]: round(self.score_ties / groups, 4),
                vars(FormatReward)["__name__"]: round(self.format_ties / groups, 4),
            },
        }


class DemonstrationFade:
    """Demonstration turns that fade once the format is learned: the training rows are read
    through `transform` (a `datasets` transform, applied as TRL draws each batch), which asks
    them without their demonstrations from the first logged step whose share of well-formed
    answers reached `threshold` (the metrics callback calls `observe`)."""

    def __init__(self, threshold: float):
        self.threshold = threshold
        self.faded_at: int | None = None

    def observe(self, step: int, format_share: float | None) -> None:
        if self.faded_at is None and format_share is not None and format_share >= self.threshold:
            self.faded_at = step

    def transform(self, batch: dict[str, list]) -> dict[str, list]:
        if self.faded_at is None:
            return batch
        prompts = [without_demonstrations(p) if isinstance(p, list) else p for p in batch["prompt"]]
        return {**batch, "prompt": prompts}


def grpo_args(
    cfg: TrainConfig,
    out: Path,
    evaluating: bool = False,
    format_weight: float = 0.0,
    vllm_max_model_length: int | None = None,
) -> dict[str, Any]:
    """GRPOConfig keyword arguments, as TRL 1.x names them. With a format weight w the
    environment reward and the format reward are two reward functions weighted 1 - w and w,
    so TRL logs each apart and their weighted sum is the reward. `vllm_max_model_length`: the
    colocated engine's context when the recipe leaves it unset (see `vllm_context`)."""
    import torch

    on_gpu = torch.cuda.is_available() and not cfg.use_cpu
    bf16 = precision.trains_in_bf16(cfg.bf16, on_gpu)
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
        bf16=bf16,
        log_completions=cfg.log_completions,
        use_vllm=cfg.use_vllm,
        mask_truncated_completions=cfg.mask_truncated_completions,
        ddp_timeout=cfg.ddp_timeout,
        model_init_kwargs=model_init_kwargs(on_gpu, bf16, cfg),
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
        length = cfg.vllm_max_model_length or vllm_max_model_length
        if cfg.vllm_mode == "colocate" and length:
            args["vllm_max_model_length"] = length
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


def world_size() -> int:
    """Processes in this training run, as the launcher (accelerate launch, torchrun) says."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def is_main_rank() -> bool:
    """Whether this process writes the run's files: rank 0, or the only process. Known before
    any process group exists (the launcher sets RANK), so output folders are prepared by it."""
    return int(os.environ.get("RANK", "0") or 0) == 0


def model_init_kwargs(on_gpu: bool, bf16: bool, cfg: TrainConfig) -> dict[str, Any]:
    """How TRL loads the policy from its path (GRPOTrainer passes these to
    `create_model_from_path`, whose dtype default is float32): the dtype `precision.weights_dtype`
    gives (bf16 compute comes from the trainer's autocast; the weights are float32 wherever bf16
    ones would be silently wrong: full fine-tuning's masters, and a base TRL merges the adapter
    into at every vLLM sync). One process on a GPU box keeps the whole model on its one device:
    TRL's default there is device_map="auto", which spreads a model over every visible card
    (naive pipelining, the other cards' memory taken). Under a launcher each rank's accelerator
    places it (TRL sets None itself for DDP and DeepSpeed; FSDP needs it too)."""
    sharding, _ = precision.launched_sharding()
    kwargs: dict[str, Any] = {"dtype": precision.weights_dtype(cfg, on_gpu, bf16, sharding)}
    kwargs["device_map"] = {"": 0} if on_gpu and world_size() == 1 else None
    return kwargs


def vllm_context(model: str, rows: Iterable[dict], cfg: TrainConfig) -> int | None:
    """The colocated vLLM engine's context when the recipe leaves `vllm_max_model_length`
    unset: the longest prompt of the rows (as the chat template renders it) plus
    max_completion_length. Unset, TRL passes None and vLLM takes the model's whole context,
    whose KV cache does not fit its memory share."""
    if not cfg.use_vllm or cfg.vllm_mode != "colocate" or cfg.vllm_max_model_length:
        return None
    from transformers import AutoTokenizer

    from evoenv_cli.llm.base import prompt_tokens

    tokenizer = AutoTokenizer.from_pretrained(model)
    longest = max(prompt_tokens(tokenizer, row["prompt"], cfg.chat_template_kwargs) for row in rows)
    return longest + cfg.max_completion_length


# TRL (and PEFT, loading an adapter) toggles checkpointing through the old method names, which
# transformers 5 deprecates: noise the user can do nothing about, so it is silenced while
# training and while `bound` loads an adapter (and only then).
_TRL_CHECKPOINTING_NOISE = r"`(is_)?gradient_checkpointing\w*` is deprecated"


@contextlib.contextmanager
def checkpointing_noise_silenced():
    """Inside: transformers' deprecation of the checkpointing names TRL and PEFT call, ignored."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_TRL_CHECKPOINTING_NOISE, category=FutureWarning)
        yield


def recipe_reward(
    library: artifacts.EnvLibrary,
    answer: AnswerConfig,
    reward_cfg: RewardConfig,
    runtime: RuntimeConfig,
    seed: int,
    out: Path,
    format_weight: float = 0.0,
) -> EnvReward:
    """The environments' reward as the recipe pays it: scored in `runtime`'s sandbox, rechecked
    at reward.recheck_share into OUT's quarantine log, every row by the recipe's answer rule
    (its tag; `format_weight` folded in, or 0 where the trainer pays the format column itself,
    as GRPO's reward_weights do in `train`)."""
    return EnvReward(
        library.files,
        answer_tag=answer.tag,
        format_weight=format_weight,
        sandbox=runtime.sandbox,
        workers=runtime.workers,
        limits=runtime.limits,
        recheck_share=reward_cfg.recheck_share,
        recheck_seed=seed,
        quarantine_log=out / QUARANTINE_FILE,
        rows_rule=False,
    )


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
    checked: dict[str, RowsChecked] | None = None,
) -> dict:
    """GRPO on `data`; with `eval_data` (rows from `sample --split heldout`) TRL evaluates on
    them every `eval_steps` and the eval numbers go to metrics.jsonl too. `judge` (a backend)
    overrides `train.arena.judge` when the arena is on. `answer`: the recipe's answer format,
    whose tag the reward extracts. `checked`: the rows files as the stage's check read them
    (`checked_rows`), so that they are not read and checked again."""
    answer = answer or AnswerConfig()
    checked = checked or {}
    rows = checked.get("data") or check_rows(data, library)
    model = check_model(model)
    eval_rows = (checked.get("eval_data") or check_rows(eval_data, library)) if eval_data is not None else None
    check_values(reward_cfg, "reward")  # a RewardConfig built in code, not read from a recipe
    check_settings(cfg)
    started = artifacts.now_iso()
    main = is_main_rank()  # under a launcher every rank runs this; rank 0 alone writes
    if main:
        out.mkdir(parents=True, exist_ok=True)

    import datasets
    import transformers
    from trl import GRPOConfig, GRPOTrainer

    compact_lm_head_on_cpu()  # on a CPU, the LM head projects the completion's positions alone
    transformers.set_seed(cfg.seed)
    # their bars (reading the rows, loading the weights) are noise in a log; the steps get lines
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    dataset = datasets.load_dataset("json", data_files=str(data), split="train")
    fade = None
    if cfg.fade_demonstrations_at is not None:
        fade = DemonstrationFade(cfg.fade_demonstrations_at)
        dataset.set_transform(fade.transform)
    eval_dataset = (
        datasets.load_dataset("json", data_files=str(eval_data), split="train") if eval_data is not None else None
    )
    reward = recipe_reward(library, answer, reward_cfg, runtime, cfg.seed, out)
    format_reward = FormatReward(answer.tag, rows_rule=False) if reward_cfg.format_weight else None
    made_with = sorted(rows.answer_tags - {answer.tag})
    if made_with:  # loud: the rows' prompts asked for another tag than the one the reward extracts
        print(
            f"warning: {data}: rows were made with answer tag {', '.join(map(repr, made_with))}; "
            f"training extracts {answer.tag!r} (the recipe's answer.tag)",
            file=sys.stderr,
        )
    step_rewards = StepRewards(
        reward, format_reward=format_reward, format_weight=reward_cfg.format_weight, group_size=cfg.num_generations
    )
    reward_funcs: list = [step_rewards, *([TimedFormat(format_reward, step_rewards)] if format_reward else [])]
    peft_config = adapter_config(cfg)
    metrics_path = out / METRICS_FILE
    if not resume and main:
        metrics_path.unlink(missing_ok=True)
    args = grpo_args(
        cfg,
        out,
        evaluating=eval_dataset is not None,
        format_weight=reward_cfg.format_weight,
        vllm_max_model_length=vllm_context(model, artifacts.read_jsonl(data), cfg),
    )
    loading = time.perf_counter()  # the trainer loads the policy (and its reference) here
    with checkpointing_noise_silenced():
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward_funcs,
            args=GRPOConfig(**args),
            train_dataset=dataset,
            eval_dataset=eval_dataset,
            peft_config=peft_config,
            callbacks=[_metrics_callback(metrics_path, step_rewards, fade), progress.callback(out / TRAIN_LOG)],
        )
        progress.quiet_trl(trainer)
        load_s = time.perf_counter() - loading
        thinking_rule(trainer, cfg, [reward, format_reward])
        checkpoint = resume and any((out / "checkpoints").glob("checkpoint-*"))
        arena = None
        if cfg.zero_variance == "judge":
            from evoenv_cli.training import arena as arena_stage

            arena = step_rewards.arena = arena_stage.build(trainer, cfg, out, resume=bool(checkpoint), judge=judge)
        try:
            result = trainer.train(resume_from_checkpoint=True if checkpoint else None)
        finally:
            reward.close()
            if arena is not None:
                arena.close()
    merged = save(trainer, out, cfg)
    if not main:
        return {"stage": "train", "rank": int(os.environ.get("RANK", "0")), "steps": trainer.state.global_step}
    summary = {
        "stage": "train",
        "steps": trainer.state.global_step,
        "rows": rows.count,
        "eval_rows": eval_rows.count if eval_rows is not None else 0,
        "eval_reward": _last_eval_reward(metrics_path),
        "train_loss": result.training_loss,
        "checkpoint": str(out),
        "merged": str(merged) if merged else None,
        "adapter": peft_config is not None,
        "adapter_kind": precision.adapter_kind(cfg),
        "bf16": args["bf16"],  # train.bf16 resolved: null or auto as this machine ran it
        "trained_parameters": trained_parameters(trainer.model),
        "mean_reward": _mean_reward(metrics_path),
        "all_groups_zero_variance": all_groups_zero_variance(metrics_path),
        "score_zero_variance_share": _mean_of(metrics_path, "train/zero_variance_share"),
        "signal": signal_of(metrics_path),
        "reward_share": reward_share(metrics_path),
        "demonstrations_faded_at": fade.faded_at if fade is not None else None,
        "rewards_rechecked": reward.audit.checked,
        "quarantined": sorted(reward.audit.quarantined),
        "arena": arena.summary() if arena is not None else None,
    }
    artifacts.write_json_atomic(
        out / MARKER,
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
                {"rows": rows.count, "steps": summary["steps"]},
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


def save(trainer, out: Path, cfg: TrainConfig) -> Path | None:
    """The trained model in `out` (and a merged copy of a LoRA policy in out/merged), written
    by the main process only; every rank calls this. `save_model` runs on all ranks (DeepSpeed
    ZeRO-3 and FSDP gather the sharded weights there, and transformers writes on the main one
    only); the tokenizer, the merge and the permissions are the main process's. The barrier
    after it means that when the main process writes train-manifest.json, the finished
    marker, every rank has finished: a rank killed before it stops the run with no marker."""
    accelerator = trainer.accelerator
    trainer.save_model(str(out))
    # transformers cannot load a TinyLoRA adapter folder (its shared vector lives on the tuner),
    # so a TinyLoRA run always writes the merged copy the loop's next round and the backends load
    adapted = precision.adapter_kind(cfg) != "full"
    merged = out / "merged" if adapted and (cfg.merge_lora or cfg.adapter == "tinylora") else None
    if accelerator.is_main_process:
        if trainer.processing_class is not None:
            trainer.processing_class.save_pretrained(str(out))
        if merged is not None:
            model = accelerator.unwrap_model(trainer.model)
            model.merge_and_unload().save_pretrained(str(merged))
            if trainer.processing_class is not None:
                trainer.processing_class.save_pretrained(str(merged))
        artifacts.follow_umask(out)
    accelerator.wait_for_everyone()
    return merged


def thinking_rule(trainer, cfg: TrainConfig, rewards: list) -> None:
    """Give the rewards what the thinking rule needs from the trainer's tokenizer: whether its
    chat template opens <think> in the prompt, and the ids that end a completion (TRL's own
    EOS ids and the pad token, what `mask_truncated_completions` tests), so a completion cut at
    max_completion_length is known as cut."""
    from evoenv_cli.thinking import template_opens_think

    tokenizer = trainer.processing_class
    tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor wraps its tokenizer
    end_ids = {*trainer.eos_token_ids, tokenizer.pad_token_id} - {None}
    opens = template_opens_think(tokenizer, cfg.chat_template_kwargs)
    for r in rewards:
        if r is not None:
            r.end_ids, r.opens_think = end_ids, opens


def adapter_config(cfg: TrainConfig):
    """The PEFT config of the adapter `cfg` asks for, or None to train all weights."""
    kind = precision.adapter_kind(cfg)
    if kind == "tinylora":
        from peft import TinyLoraConfig

        return TinyLoraConfig(
            r=cfg.tinylora_r,
            u=cfg.tinylora_u,
            weight_tying=cfg.tinylora_weight_tying,
            projection_seed=cfg.tinylora_projection_seed,
            target_modules=cfg.lora_target_modules,
            task_type="CAUSAL_LM",
        )
    if kind == "lora":
        from peft import LoraConfig

        return LoraConfig(
            r=cfg.lora_r,
            lora_alpha=cfg.lora_alpha,
            lora_dropout=cfg.lora_dropout,
            target_modules=cfg.lora_target_modules,
            task_type="CAUSAL_LM",
        )
    return None


def trained_parameters(model) -> int:
    """The exact number of values the optimizer updates (requires_grad), shared ones counted
    once; under DeepSpeed ZeRO-3 a parameter's local tensor is an empty placeholder and its
    whole size is `ds_numel`."""
    return sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters() if p.requires_grad)


def all_groups_zero_variance(metrics_path: Path) -> bool:
    """Whether every GRPO group of the run scored all its completions the same: then every
    advantage is 0, nothing is learned and the weights did not change. (Each logged record
    averages its logging window, so 1.0 everywhere means every group, not just logged ones.)"""
    shares = [r.get("frac_reward_zero_std") for r in artifacts.read_jsonl_tolerant(metrics_path)]
    return bool(shares) and all(s == 1 for s in shares)


def signal_of(metrics_path: Path) -> str:
    """What the run's rewards carried: "score" when some group's environment scores differed,
    "format only" when every score tied but the format bonus (or the arena) still moved the
    weights, "none" when every group of the weighted sum tied (the weights did not change)."""
    records = [r for r in artifacts.read_jsonl_tolerant(metrics_path) if "frac_reward_zero_std" in r]
    if not records or all(r["frac_reward_zero_std"] == 1 for r in records):
        return "none"
    shares = [r.get("train/zero_variance_share", r["frac_reward_zero_std"]) for r in records]
    return "format only" if all(s == 1 for s in shares) else "score"


def reward_share(metrics_path: Path) -> float | None:
    """The share of the steps' time (TRL's `step_time`: generation, reward, backward) spent in
    evoenv's reward path (sandbox calls, re-checks, the format reward, the arena, callbacks)."""
    total = spent = 0.0
    last = 0
    for r in artifacts.read_jsonl_tolerant(metrics_path):
        if not isinstance(r.get("step_time"), (int, float)) or not isinstance(r.get("step"), int):
            continue
        # a record's step_time is its window's mean; its reward seconds are the window's sum
        total += r["step_time"] * max(1, r["step"] - last)
        spent += r.get("train/reward_seconds", 0.0)
        last = r["step"]
    return round(spent / total, 4) if total > 0 else None


def _mean_of(metrics_path: Path, key: str) -> float | None:
    values = [r[key] for r in artifacts.read_jsonl_tolerant(metrics_path) if isinstance(r.get(key), (int, float))]
    return round(statistics.fmean(values), 4) if values else None


def _mean_reward(metrics_path: Path) -> float | None:
    return _mean_of(metrics_path, "reward")


def _last_eval_reward(metrics_path: Path) -> float | None:
    values = [
        r["eval_reward"]
        for r in artifacts.read_jsonl_tolerant(metrics_path)
        if isinstance(r.get("eval_reward"), (int, float))
    ]
    return round(values[-1], 4) if values else None


def _metrics_callback(path: Path, step_rewards: StepRewards, fade: DemonstrationFade | None = None):
    from accelerate.utils import gather_object
    from transformers import TrainerCallback

    class MetricsLog(TrainerCallback):
        """One JSON line per logged step: TRL's numbers plus per-environment rewards; and one
        per evaluation (its `eval_*` numbers; the per-environment window is training's)."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs:
                return
            training, evaluation = "reward" in logs, "eval_reward" in logs
            if not (training or evaluation):
                return
            # every rank logs the same (gathered) numbers, so every rank joins this gather: the
            # per-environment window covers all ranks' completions, not rank 0's share
            started = time.perf_counter()
            per_env, signal = step_rewards.drain(gather_object) if training else (None, {})
            if fade is not None:  # on every rank: each one reads its own batches through the fade
                fade.observe(state.global_step, signal.get("train/format_share"))
            # this callback's own work is the reward path's too (booked to the next window)
            step_rewards.spent(time.perf_counter() - started)
            if not state.is_world_process_zero:
                return
            record = {
                "step": state.global_step,
                **{k: v for k, v in logs.items() if isinstance(v, (int, float)) and v == v},
            }
            if training:
                record["per_env"] = per_env
                record.update(signal)
                if fade is not None:
                    record["demonstrations"] = fade.faded_at is None
            with path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
                f.flush()
                os.fsync(f.fileno())

        def on_save(self, args, state, control, **kwargs):
            if state.is_world_process_zero:  # checkpoints as readable as every other output
                artifacts.follow_umask(args.output_dir)

    return MetricsLog()


# -- the stage's record (evoenv_cli/stage.py) ------------------------------------------------------
def _check(ctx: Context, lib: artifacts.EnvLibrary) -> None:
    artifacts.check_output_folder(ctx.out)
    checked_rows(ctx, lib, "data", "eval_data")  # before any folder is made
    check_model(ctx.inputs["model"])
    try:  # the judge's settings come from the recipe: its file leads the error
        check_settings(ctx.recipe.train)
    except InputError as exc:
        recipe = ctx.inputs.get("recipe_path")
        raise InputError(f"{recipe}: {exc}" if recipe is not None else str(exc)) from None


def checkpoint_complete(folder: Path) -> bool:
    """Whether a trainer checkpoint was saved whole: transformers writes its trainer_state.json
    last (`Trainer._save_checkpoint`, after the weights, optimizer, scheduler and RNG state), so
    a folder without it, or with it cut short, is a save a kill interrupted."""
    try:
        json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return True


def resume_from(out: Path) -> None:
    """A resumed train goes on from its last checkpoint (the one TRL's `resume_from_checkpoint`
    picks), or from the start when the kill came before the first. The steps after that point
    are trained and logged again, so the killed attempt's records of them (metrics.jsonl, the
    arena's log) are dropped; from the start, the reward audit's quarantine is made again too."""
    from evoenv_cli.training.arena import ARENA_FILE

    folder = out / "checkpoints"
    if folder.is_dir():  # a kill in the middle of a save leaves a checkpoint that cannot be resumed
        for partial in [c for c in folder.glob("checkpoint-*") if c.is_dir() and not checkpoint_complete(c)]:
            shutil.rmtree(partial)
    last = None
    if folder.is_dir() and any(c.is_dir() for c in folder.glob("checkpoint-*")):
        # transformers.trainer_utils imports torch, transformers and PEFT (5 CPU-s): only when
        # there is a checkpoint to find, not on every resumed stage
        from transformers.trainer_utils import get_last_checkpoint

        last = get_last_checkpoint(str(folder))
    step = int(Path(last).name.rsplit("-", 1)[1]) if last else 0
    for name in (METRICS_FILE, ARENA_FILE):
        path = out / name
        records = artifacts.read_jsonl_tolerant(path)
        kept = [r for r in records if isinstance(r.get("step"), int) and r["step"] <= step]
        if len(kept) != len(records):
            artifacts.write_jsonl_atomic(path, kept)
    if step == 0:
        (out / QUARANTINE_FILE).unlink(missing_ok=True)


def _settings(ctx: Context) -> dict:
    r = ctx.recipe  # --resume may raise max_steps to train on: not in the settings
    return dict(
        train={k: v for k, v in to_dict(r.train).items() if k != "max_steps"},
        reward=r.reward,
        answer=r.answer,
        limits=r.runtime.limits,
        model=ctx.inputs["model"],
        data=ctx.inputs["data"],
    )


def next_policy(out: Path, summary: dict) -> str:
    """The model after a train step: the policy a round with nothing to train carried over (its
    summary names it), else the merged copy when there is one, else OUT (the adapter or model)."""
    if summary.get("skipped"):
        return summary["policy"]
    merged = out / "merged"
    return str(merged if (merged / "config.json").exists() else out)


def _run(ctx: Context, lib, out: Path, llm, bar) -> dict:
    r = ctx.recipe
    data, model = ctx.inputs["data"], ctx.inputs["model"]
    return run(
        data,
        lib,
        model,
        out,
        r.train,
        r.reward,
        r.runtime,
        resume=ctx.resume,
        eval_data=ctx.inputs.get("eval_data"),
        answer=r.answer,
        checked=ctx.inputs.get("checked"),
    )


def skip_training(train_dir: Path, policy: str) -> None:
    """A round whose sample drew nothing (no pool environment in band and above chance for this
    policy) trains nothing: its marker says so and names the policy that carries over, so the
    evaluation, the next round and a resumed run all use it. Training on levels where the policy
    answers no better than guessing would teach noise (calibrate's chance test)."""
    train_dir.mkdir(parents=True, exist_ok=True)
    summary = {
        "stage": "train",
        "steps": 0,
        "skipped": "no environment drawable",
        "policy": policy,
        "signal": "skipped",
    }
    artifacts.write_json_atomic(train_dir / STAGE.marker, {"summary": summary})


def drop_checkpoints(train_dir: Path) -> None:
    """A finished round's trainer checkpoints (weights again, plus optimizer and scheduler
    state, several times the model's size) go once its final model is written: they serve
    only to resume that round's training, and the next round starts from the final model."""
    checkpoints = train_dir / "checkpoints"
    if (train_dir / STAGE.marker).exists() and checkpoints.is_dir():
        shutil.rmtree(checkpoints)


def _in_round(rnd: Round, got: dict) -> dict | Result:
    """In the loop: the round's policy trained on sample's rows from the pool (a process of its
    own, under the training launcher); nothing trained when sample drew no row. With LoRA the
    adapter is merged, so that the next round's policy is a model vLLM and transformers load."""
    rows, out = got["rows"], STAGE.out_in(rnd.folder)
    if rows.summary.get("rows") == 0 and not (out / STAGE.marker).exists():
        skip_training(out, rnd.policy)
        rnd.say(f"train: skipped, no environment to train on; the policy carries over ({rnd.policy})")
        return result_in(STAGE, out)
    recipe = rnd.recipe
    if recipe.train.lora:
        recipe = replace(recipe, train=override(recipe.train, merge_lora=True))
    inputs = {"data": rows.marker, "model": rnd.policy, "eval_data": None, "recipe_path": rnd.recipe_file}
    return dict(recipe=recipe, library=rnd.pool.root, inputs=inputs)


STAGE = register(
    Stage(
        "train",
        sections=("train", "reward", "answer", "runtime.limits"),
        marker=MARKER,
        settings=_settings,
        run=_run,
        place=10,
        partial=("checkpoints", "checkpoint-*"),
        envs=False,
        resumable=True,
        allow_empty=False,
        check=_check,
        prepares=lambda ctx: is_main_rank(),  # under accelerate launch every rank runs it; one prepares OUT
        resume_from=resume_from,
        in_round=_in_round,
        takes=("rows",),
        gives="checkpoint",
        summary_field="summary",
        next_policy=next_policy,
        finish=lambda rnd, done: drop_checkpoints(done.out),
        child=True,
        inputs=(
            Input("data", "Rows written by `evoenv sample` (JSONL).", "path", required=True),
            Input("model", "Policy to train: a checkpoint folder or hub name.", required=True),
            Input(
                "eval_data",
                "Held-out rows (`evoenv sample --split heldout`) TRL evaluates on every train.eval_steps "
                "(its eval_dataset).",
                "path",
            ),
            Input("recipe_path", "The recipe file the settings came from (an error in them names it).", "path"),
            CHECKED,
        ),
    )
)
