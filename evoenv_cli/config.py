"""Recipes: one YAML file with a section per stage, mapped onto one dataclass per stage.
Flags given on the command line override the recipe; the resolved config goes in manifests.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from evoenv_cli.artifacts import InputError
from evoenv_cli.runtime.pool import Limits

T = TypeVar("T")

DEFAULT_ANSWER_INSTRUCTION = (
    "Reason step by step, then give your final answer, in exactly the form asked above, "
    "between <answer> and </answer> at the very end of your response."
)


@dataclass
class RuntimeConfig:
    """Where and how environment code runs."""

    sandbox: str = "auto"  # auto | bwrap | process
    workers: int = 2
    limits: Limits = field(default_factory=Limits)


@dataclass
class SampleConfig:
    per_env: int = 16
    seed: int = 0
    difficulty: int | None = None  # fixed level; None spreads rows over 1..10
    difficulty_from: str | None = None  # "index": calibrated levels from the library's index
    format: str = "trl"  # trl | verl | openrlhf
    system_prompt: str | None = None
    answer_instruction: str = DEFAULT_ANSWER_INSTRUCTION
    # Demonstration turns before the task: another instance of the same environment and level,
    # answered by the oracle in the answer tags (how a weak policy learns the format).
    demonstrations: int = 0


@dataclass
class ValidateConfig:
    """The execution contract: how much evidence each check gathers and what it tolerates."""

    seeds_per_level: int = 3  # run/reference/probes use seeds 0..n-1 at every level
    levels: list[int] = field(default_factory=lambda: list(range(1, 11)))
    determinism_pairs: int = 10
    diversity_seeds: int = 8
    diversity_levels: list[int] = field(default_factory=lambda: [1, 5, 10])
    min_distinct_share: float = 0.5
    max_probe_accept_share: float = 0.1  # fixed probes: empty, garbage, "0", "true", ...
    max_near_miss_accept_share: float = 0.25  # near misses and other instances' answers
    max_constant_share: float = 0.5
    max_leak_share: float = 0.5
    min_leak_excess: float = 0.25  # over how often other instances' answers appear in a prompt
    huge_probe_chars: int = 1_000_000
    huge_probe_instances: int = 2
    budget_generate_s: float = 0.5
    budget_prompt_s: float = 0.5
    budget_solve_s: float = 1.0
    budget_score_s: float = 0.5
    budget_instance_bytes: int = 32768
    budget_output_chars: int = 10_000
    max_source_bytes: int = 100_000


@dataclass
class DedupeConfig:
    """The novelty contract: near-duplicates by MinHash (estimated Jaccard) over two signatures,
    the normalized code and the text of sampled prompts; either over its threshold rejects."""

    code_threshold: float = 0.5  # estimated Jaccard of code shingle sets that makes a duplicate
    behaviour_threshold: float = 0.5  # the same for prompt shingle sets
    code_shingle: int = 5  # normalized tokens per code shingle
    behaviour_shingle: int = 3  # words per prompt shingle
    behaviour_seeds: int = 3  # prompts at seeds 0..n-1 ...
    behaviour_levels: list[int] = field(default_factory=lambda: [1, 4, 7, 10])  # ... at these levels
    num_perm: int = 128  # MinHash permutations: the estimate's error is about 0.5/sqrt(num_perm)
    lsh_weights: list[float] = field(default_factory=lambda: [0.2, 0.8])  # false positive, negative
    save_index: bool = False  # write OUT/dedupe-index.pkl for the next round's --against


@dataclass
class ComposeConfig:
    """RACES: which operators, how many composites, how deep."""

    ops: list[str] = field(default_factory=lambda: ["sequential", "parallel", "sort", "select"])
    n: int = 20
    max_depth: int = 1
    seed: int = 0
    partial_credit: bool = False  # PARALLEL: mean of the parts instead of all-or-nothing


@dataclass
class BackendConfig:
    """The policy model and how to reach it; one section shared by every LLM stage (synthesize,
    review, calibrate, evaluate), so one policy plays every role unless a flag says otherwise."""

    kind: str = "hf"  # hf (transformers, in-process) | openai (an OpenAI-compatible server) | vllm
    model: str | None = None  # a checkpoint folder or hub name; for openai, the served name
    base_url: str | None = None  # openai: e.g. http://127.0.0.1:8000/v1
    api_key_env: str = "OPENAI_API_KEY"  # openai: the variable holding the key (may be unset)
    concurrency: int = 8  # openai: requests in flight
    timeout_s: float = 120.0  # openai: per request
    max_retries: int = 4  # openai: on 429/5xx/timeouts/connection errors, with backoff
    tensor_parallel_size: int = 1  # vllm
    device: str = "auto"  # hf: auto | cpu | cuda | cuda:1 ...
    dtype: str = "auto"  # hf, vllm: auto | float32 | bfloat16 | float16
    chat_template_kwargs: dict[str, Any] | None = None  # e.g. {enable_thinking: false}
    options: dict[str, Any] = field(default_factory=dict)  # more keyword arguments for the backend


@dataclass
class SynthesizeConfig:
    """The policy as generator: how many candidates, what each request shows it."""

    n: int = 32  # candidates wanted (responses with usable code)
    max_requests: int = 0  # give up after this many requests (0: 4 x n)
    batch: int = 64  # requests sent to the backend at once
    examples: int = 2  # example environments shown per request, drawn from seeds and pool
    max_avoid: int = 60  # pool names listed to steer away from
    topics: list[str] = field(default_factory=list)  # empty: prompts/topics.txt
    topics_file: str | None = None
    temperature: float = 1.0
    top_p: float = 0.95
    max_tokens: int = 4096
    seed: int = 0


@dataclass
class ReviewConfig:
    """The semantic contract: the policy judges its own candidates by majority vote."""

    votes: int = 3
    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 1024
    instances: int = 3  # sampled instances shown per candidate
    levels: list[int] = field(default_factory=lambda: [1, 5, 10])
    max_source_chars: int = 12_000
    chunk: int = 32  # candidates per backend call (a verdict is final after its chunk)
    seed: int = 0


@dataclass
class CalibrateConfig:
    """The difficulty contract. The band keeps GRPO groups informative: at a pass rate p and
    K samples a group is all-solved or all-failed with probability p**K + (1-p)**K, which in
    [0.15, 0.85] with K = 8 stays under 0.28, so most groups carry a learning signal."""

    band: list[float] = field(default_factory=lambda: [0.15, 0.85])
    coarse_levels: list[int] = field(default_factory=lambda: [1, 4, 7, 10])
    instances: int = 8  # M fresh instances per level
    samples: int = 8  # K answers per instance
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 2048
    flat_tolerance: float = 0.15  # a curve whose range is under this does not respond to difficulty
    margin: float = 0.05  # pool rotation: the band widened by this before a miss counts
    retire_after: int = 2  # pool rotation: consecutive misses that retire an environment
    answer_tag: str = "answer"
    chunk: int = 512  # environments per sweep (each sweep is one backend batch)
    on_no_answers: str = "reject"  # reject | admit (uncalibrated, all levels: a solver that never answers, e.g. the CPU demo's tiny model)
    seed: int = 0


@dataclass
class TrainConfig:
    """GRPO with TRL. Defaults are TRL 1.x's (beta 0: no reference model; loss 'dapo')."""

    learning_rate: float = 1e-6
    beta: float = 0.0  # KL coefficient
    num_generations: int = 8
    per_device_train_batch_size: int = 8  # completions per device per step; a multiple of num_generations
    gradient_accumulation_steps: int = 1
    max_completion_length: int = 2048
    temperature: float = 1.0
    epochs: float = 1.0
    max_steps: int = -1  # > 0 overrides epochs
    seed: int = 0
    loss_type: str = "dapo"
    scale_rewards: str = "group"
    logging_steps: int = 1
    save_steps: int = 50
    save_total_limit: int = 2
    gradient_checkpointing: bool = True
    max_grad_norm: float = 1.0
    warmup_steps: float = 0.0  # a count, or a fraction of the run below 1 (transformers 5)
    bf16: bool | None = None  # None: on GPUs only
    use_cpu: bool = False
    report_to: str = "none"
    log_completions: bool = False
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_target_modules: str = "all-linear"
    merge_lora: bool = False  # also write a merged full model to OUT/merged
    use_vllm: bool = False
    vllm_mode: str = "colocate"  # colocate | server (`trl vllm-serve` on other GPUs)
    vllm_server_base_url: str | None = None
    vllm_gpu_memory_utilization: float = 0.3
    vllm_tensor_parallel_size: int = 1
    chat_template_kwargs: dict | None = None


DEFAULT_BENCH_INSTRUCTION = (
    "Reason step by step, then give your final answer between <answer> and </answer> at the "
    "very end of your response."
)


@dataclass
class EvaluateConfig:
    """Held-out evaluation: environment instances at held-out seeds (bit 31 set, so never a
    training seed) and benchmark files of {question, answer} rows; pass@1 over `samples`."""

    instances: int = 16  # held-out instances per environment, spread over its levels
    samples: int = 4  # n: responses per item; pass@1 is their mean correctness
    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 2048
    seed: int = 0  # base of the held-out instance seeds and of the sampling seeds
    answer_tag: str = "answer"  # the last <answer>...</answer> block is the final answer
    bench_instruction: str = DEFAULT_BENCH_INSTRUCTION  # appended to each benchmark question
    verify_timeout_s: int = 5  # math-verify: seconds per comparison before it counts as wrong


@dataclass
class IterateConfig:
    """`make iterate`: what each round asks of its stages (each stage's own section still applies)."""

    synthesize_n: int = 64  # candidates requested from the policy per round
    compose_n: int = 16  # composites of the pool per round
    sample_per_env: int = 64  # training rows per pool environment per round
    bench: list[str] = field(default_factory=list)  # benchmark JSONL files or rg:TASK[:N] specs for evaluate
    baseline: bool = True  # evaluate the round's policy beside the starting model
    # Build the policy at backend.model / --model when that folder is missing: "starter" (the
    # SmolLM2-135M-Instruct checkpoint, offline; the CPU demo), "tiny" (random weights, tests).
    build_model: str = ""
    train_launch: str = ""  # prefix for the train stage, e.g. "accelerate launch --num_processes 8"


@dataclass
class RewardConfig:
    """How a completion becomes a reward: answer extraction, then the environment's score."""

    answer_tag: str = "answer"  # the last <answer>...</answer> block is the final answer
    format_weight: float = 0.0


@dataclass
class Recipe:
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    sample: SampleConfig = field(default_factory=SampleConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    validate: ValidateConfig = field(default_factory=ValidateConfig)
    compose: ComposeConfig = field(default_factory=ComposeConfig)
    synthesize: SynthesizeConfig = field(default_factory=SynthesizeConfig)
    review: ReviewConfig = field(default_factory=ReviewConfig)
    calibrate: CalibrateConfig = field(default_factory=CalibrateConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    iterate: IterateConfig = field(default_factory=IterateConfig)
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig)
    dedupe: DedupeConfig = field(default_factory=DedupeConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)


def _build(cls: type[T], data: dict, where: str) -> T:
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a mapping")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        if key not in fields:
            hint = difflib.get_close_matches(key, list(fields), n=1)
            more = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise InputError(f"{where}: unknown key {key!r}{more}")
        default = fields[key].default_factory() if fields[key].default_factory is not dataclasses.MISSING else None
        if dataclasses.is_dataclass(default) and isinstance(value, dict):
            value = _build(type(default), value, f"{where}.{key}")
        kwargs[key] = value
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise InputError(f"{where}: {exc}") from None


SECTIONS = {f.name: type(f.default_factory()) for f in dataclasses.fields(Recipe)}


def load_recipe(path: str | Path | None) -> Recipe:
    """A recipe from YAML (None gives the defaults); unknown keys are an InputError."""
    if path is None:
        return Recipe()
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such recipe file")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise InputError(f"{p}{where}: not valid YAML") from None
    if not isinstance(data, dict):
        raise InputError(f"{p}: expected a mapping of stage sections")
    recipe = Recipe()
    for section, body in data.items():
        if section in SECTIONS:
            setattr(recipe, section, _build(SECTIONS[section], body or {}, f"{p}: {section}"))
        else:
            hint = difflib.get_close_matches(str(section), list(SECTIONS), n=1)
            more = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise InputError(f"{p}: unknown section {section!r}{more}")
    return recipe


def override(obj: T, **flags: Any) -> T:
    """A copy of a config dataclass with the flags the user actually gave (not None)."""
    given = {k: v for k, v in flags.items() if v is not None}
    return dataclasses.replace(obj, **given)


def to_dict(obj: Any) -> Any:
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj
