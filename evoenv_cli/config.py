"""Recipes: one YAML file with a section per stage, mapped onto one dataclass per stage.
Flags given on the command line override the recipe; the resolved config goes in manifests.

Every value is checked when the recipe loads, before any work: against its field's type
annotation, and against the rules in the field's metadata (`min`, `max`, `gt`, `lt`,
`choices`, `len`, `min_len`, `ascending` and `sum` for a list, and `items` for each element of a list;
`names_tag` for a text that must ask for the answer in the tag another field of its section
holds). A bad value is an InputError naming `file: section.key` and the problem (exit 2). One
mechanism: a field states its own rules, `check_values` reads them, for a recipe's values and
(through `override`) for the flags given over them.

Why one module: the recipe reference. Every section's dataclass with its fields' help and
bounds, read by the commands, the loop and `evoenv plan`; one file is the recipe's one home.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from evoenv_cli import operators, row_formats
from evoenv_cli.errors import InputError
from evoenv_cli.llm.base import BACKEND_KINDS
from evoenv_cli.runtime import contract
from evoenv_cli.runtime.workers import Limits

T = TypeVar("T")

DEFAULT_ANSWER_INSTRUCTION = (
    "Reason step by step, then give your final answer, in exactly the form asked above, "
    "between <{tag}> and </{tag}> at the very end of your response."
)
DEFAULT_BENCH_INSTRUCTION = (
    "Reason step by step, then give your final answer between <{tag}> and </{tag}> at the very end of your response."
)

# the trainers `sample` writes rows for: the names of row_formats' records (a live view)
ROW_FORMATS = row_formats.FORMATS.keys()
# compose's operators, in the order candidates are proposed: the names of operators.py's records
# (a live view; operators.py imports nothing of evoenv, so config may read it)
OPERATOR_NAMES = operators.REGISTRY.keys()
SPLITS = ("train", "heldout")  # training seeds below 2**31, held-out seeds with bit 31 set


@dataclass
class AnswerConfig:
    """The answer format, one section for every stage: the instructions that ask for the answer
    in the tag (training, calibration and evaluation prompts, and their demonstration turns) and
    the extraction that reads it back (the reward, calibration, evaluation). `{tag}` in an
    instruction is the tag, so a new tag changes every instruction with it; an instruction
    written out in full must name the tag (`<tag>` and `</tag>`), so the two cannot disagree."""

    # the last <tag>...</tag> block after the reasoning is the final answer ("": the whole response)
    tag: str = "answer"
    # after each environment task ("": none)
    instruction: str = field(default=DEFAULT_ANSWER_INSTRUCTION, metadata={"names_tag": "tag"})
    # after each benchmark question
    bench_instruction: str = field(default=DEFAULT_BENCH_INSTRUCTION, metadata={"names_tag": "tag"})

    @property
    def task_text(self) -> str:
        """The instruction after an environment task, with the tag filled in."""
        return self.instruction.replace("{tag}", self.tag)

    @property
    def bench_text(self) -> str:
        """The instruction after a benchmark question, with the tag filled in."""
        return self.bench_instruction.replace("{tag}", self.tag)

    def tagged(self, answer: str) -> str:
        """An answer as a demonstration turn gives it: in the tags."""
        return f"<{self.tag}>{answer}</{self.tag}>" if self.tag else answer


@dataclass
class RuntimeConfig:
    """Where and how environment code runs."""

    sandbox: str = field(
        default="auto",
        metadata={
            "help": "Where environment code runs: auto (bwrap when it works), bwrap, or process (weaker fallback).",
            "choices": ("auto", "bwrap", "process"),
        },
    )  # auto | bwrap | process
    workers: int = field(default=2, metadata={"help": "Sandboxed worker processes.", "min": 1})
    limits: Limits = field(default_factory=Limits)


@dataclass
class SampleConfig:
    per_env: int = field(default=16, metadata={"help": "Rows (tasks) per environment.", "min": 1})
    seed: int = field(default=0, metadata={"help": "Base seed for instance seeds."})
    # fixed level; None spreads rows over 1..10
    difficulty: int | None = field(default=None, metadata={"min": 1, "max": 10})
    # "index": calibrated levels from the library's index
    difficulty_from: str | None = field(default=None, metadata={"choices": ("index",)})
    format: str = field(default="trl", metadata={"choices": ROW_FORMATS})  # a row_formats record
    # train (seeds below 2**31) | heldout (bit 31 set: val/eval rows)
    split: str = field(default="train", metadata={"choices": SPLITS})
    system_prompt: str | None = None
    # Demonstration turns before the task: another instance of the same environment and level,
    # answered by the oracle in the answer tags (how a weak policy learns the format).
    demonstrations: int = 0
    # A conversation longer than this many characters is asked without its demonstration turns,
    # and an instance whose task alone is longer is skipped: long prompts (a composite's reach
    # ~1300 tokens with a demonstration) must not dominate a step. None: no cap.
    max_prompt_chars: int | None = field(default=None, metadata={"min": 1})


@dataclass
class ValidateConfig:
    """The execution contract: how much evidence each check gathers and what it tolerates."""

    # run/reference/probes: this many seeds per level, drawn from the training range
    seeds_per_level: int = field(default=3, metadata={"min": 1})
    levels: list[int] = field(
        default_factory=lambda: list(range(1, 11)), metadata={"min_len": 1, "items": {"min": 1, "max": 10}}
    )
    determinism_pairs: int = field(default=10, metadata={"min": 1})
    diversity_seeds: int = field(default=8, metadata={"min": 2})  # also drawn from the whole training range
    diversity_levels: list[int] = field(
        default_factory=lambda: [1, 5, 10], metadata={"min_len": 1, "items": {"min": 1, "max": 10}}
    )
    min_distinct_share: float = field(default=0.5, metadata={"min": 0, "max": 1})
    # fixed probes: empty, garbage, "0", "true", ...
    max_probe_accept_share: float = field(default=0.1, metadata={"min": 0, "max": 1})
    # near misses, other instances' answers, random answers of the shape
    max_near_miss_accept_share: float = field(default=0.25, metadata={"min": 0, "max": 1})
    # mean score of answers no valid one can be (partial credit for junk)
    max_probe_mean_score: float = field(default=0.3, metadata={"min": 0, "max": 1})
    # pay measured against chance (checks/pay.py): a wrong answer is paid when its score is this
    # much over the most any answer of the reference's shape earned by chance (or in full); 1:
    # full pay alone (the rule before)
    min_paid_excess: float = field(default=0.25, metadata={"gt": 0, "max": 1})
    # ... and a probe kind of answers no valid one can be may be paid on average at most this
    # much over the chance rate of being right (one-sided 95%); 1: off
    max_mean_excess: float = field(default=0.1, metadata={"min": 0, "max": 1})
    # instances each constant score compares against is tried on
    magic_probe_instances: int = field(default=8, metadata={"min": 1})
    # accepting reordered items this often makes the answer order-free
    order_free_share: float = field(default=0.5, metadata={"min": 0, "max": 1})
    # instances whose 4 (instance, answer) pairs are scored again (8: one batch)
    score_determinism_pairs: int = field(default=8, metadata={"min": 1})
    max_constant_share: float = field(default=0.5, metadata={"min": 0, "max": 1})
    # a constant answer that is one of the prompt's listed options (a positional prior) right
    # this much more often than a uniformly drawn option is (its measured chance rate, 1/k for k
    # options), one-sided 95%, is a constant answer however far under max_constant_share; 1: off
    min_constant_excess: float = field(default=0.1, metadata={"gt": 0, "max": 1})
    # scorer fuzzer (checks/fuzz.py): instances mutated, score calls at most, and on how many
    # instances one kind of mutant must be accepted to be more than noise
    fuzz_instances: int = field(default=10, metadata={"min": 0})
    # room for every kind on every fuzzed instance, the literals after them (about 750 calls)
    fuzz_max_calls: int = field(default=1000, metadata={"min": 0})
    fuzz_min_accepts: int = field(default=2, metadata={"min": 1})
    # seeds whose generate is compared between two workers with different PYTHONHASHSEED
    hash_seed_samples: int = field(default=128, metadata={"min": 0})
    # instances at exactly the seeds `evoenv sample` derives (its default base seed; half its
    # first rows, half rows drawn per file), judged by every check like the others
    sample_seed_instances: int = field(default=6, metadata={"min": 0})
    # every scored pair also sent this many times in a row (a collapsed GRPO group); 1: once
    collapsed_group: int = field(default=4, metadata={"min": 1})
    # distinct instances a worker scores in the training-shaped burst (GRPO groups first)
    burst_distinct_instances: int = field(default=120, metadata={"min": 0})
    max_leak_share: float = field(default=0.5, metadata={"min": 0, "max": 1})
    # over how often other instances' answers appear in a prompt
    min_leak_excess: float = field(default=0.25, metadata={"min": 0, "max": 1})
    # a prompt-only learner (checks/leak_learners.py) right this much more often than its chance
    # rate, with 95% confidence on held-out instances, is a leak; 1 switches the learners off
    min_learner_excess: float = field(default=0.2, metadata={"gt": 0, "max": 1})
    huge_probe_chars: int = field(default=1_000_000, metadata={"min": 0})
    huge_probe_instances: int = field(default=2, metadata={"min": 0})
    budget_generate_s: float = field(default=0.5, metadata={"gt": 0})
    budget_prompt_s: float = field(default=0.5, metadata={"gt": 0})
    budget_solve_s: float = field(default=1.0, metadata={"gt": 0})
    budget_score_s: float = field(default=0.5, metadata={"gt": 0})
    # the file's own import (timed from just before it, granted packages already imported): a
    # worker imports the file again every time it is started, a re-check's fresh one included
    max_import_seconds: float = field(default=contract.MAX_IMPORT_SECONDS, metadata={"gt": 0})
    budget_instance_bytes: int = field(default=32768, metadata={"min": 1})
    budget_output_chars: int = field(default=10_000, metadata={"min": 0})
    max_source_bytes: int = field(default=contract.MAX_SOURCE_BYTES, metadata={"min": 1})
    # the whole judgement of one environment, wall seconds: past it the environment is rejected
    # at `budget`, naming the check that ran out, and the batch goes on (a seed takes ~5 s)
    max_judge_seconds: float = field(default=300.0, metadata={"gt": 0, "max": 86400})


@dataclass
class DedupeConfig:
    """The novelty contract: near-duplicates by MinHash (estimated Jaccard) over two signatures,
    the normalized code and the text of sampled prompts; either over its threshold rejects."""

    # estimated Jaccard of code shingle sets (scaffold left out) that makes a duplicate
    code_threshold: float = field(
        default=0.4,
        metadata={
            "help": "Estimated Jaccard at or above which two environments are duplicates, for both signatures (code and behaviour).",
            "flag": "--threshold",
            "gt": 0,
            "max": 1,
        },
    )
    # ... which alone only rejects from this one up; below it, code this near must be
    # corroborated by behaviour (the prompts, or the solve signature), since shared
    # scaffolding can make unrelated programs look alike
    code_sure_threshold: float = field(default=0.85, metadata={"gt": 0, "max": 1})
    # estimated Jaccard of the prompts of the code-nearest pair that corroborates a code match
    code_corroboration: float = field(default=0.2, metadata={"gt": 0, "max": 1})
    behaviour_threshold: float = field(
        default=0.5, metadata={"flag": "--threshold", "gt": 0, "max": 1}
    )  # the same for prompt shingle sets
    code_shingle: int = field(default=5, metadata={"min": 1, "max": 4096})  # normalized tokens per code shingle
    behaviour_shingle: int = field(default=3, metadata={"min": 1, "max": 4096})  # words per prompt shingle
    behaviour_seeds: int = field(default=3, metadata={"min": 1, "max": 4096})  # prompts at seeds 0..n-1 ...
    behaviour_levels: list[int] = field(
        default_factory=lambda: [1, 4, 7, 10], metadata={"min_len": 1, "items": {"min": 1, "max": 10}}
    )  # ... at these levels
    # MinHash permutations: the estimate's error is about 0.5/sqrt(num_perm)
    num_perm: int = field(default=128, metadata={"min": 16, "max": 4096})
    # false positive, negative
    lsh_weights: list[float] = field(
        default_factory=lambda: [0.2, 0.8], metadata={"len": 2, "sum": 1.0, "items": {"min": 0}}
    )
    discount_scaffold: bool = True  # leave out of the code the shingles distinct environments share
    # ... those in at least this share of a pool's files (and of the seeds)
    scaffold_share: float = field(default=0.25, metadata={"gt": 0, "max": 1})
    scaffold_min_files: int = field(default=3, metadata={"min": 2})  # ... and in at least this many of them
    solve_signature: bool = True  # also compare by running solve on other environments' instances
    # ... agreeing on this share of them makes a duplicate
    solve_match_share: float = field(default=0.9, metadata={"gt": 0, "max": 1})
    # ... compared against at most this many members of the same instance shape
    solve_members: int = field(default=64, metadata={"min": 1})
    save_index: bool = False  # write OUT/dedupe-index.bin for the next round's --against


@dataclass
class ComposeConfig:
    """RACES: which operators, how many composites, how deep."""

    ops: list[str] = field(
        default_factory=lambda: list(OPERATOR_NAMES),
        metadata={
            "help": "Comma-separated operators",
            "min_len": 1,
            "items": {"choices": OPERATOR_NAMES},
        },
    )
    n: int = field(
        default=20, metadata={"help": "Composites to admit (over all depths).", "min": 0}
    )  # composites wanted; 0: none (a loop round without composites)
    max_depth: int = field(default=1, metadata={"help": "Composites of composites up to this depth.", "min": 1})
    seed: int = field(default=0, metadata={"help": "Which composites are sampled."})
    partial_credit: bool = False  # PARALLEL: mean of the parts instead of all-or-nothing
    # every part a composite exposes judged again by validate's leak and fuzz checks at the
    # levels the composite runs it at (checks/composite_parts.py), once per part and levels
    probe_parts: bool = True


@dataclass
class BackendConfig:
    """The policy model and how to reach it; one section shared by every LLM stage (synthesize,
    review, calibrate, evaluate), so one policy plays every role unless a flag says otherwise."""

    # hf (transformers, in-process) | openai (an OpenAI-compatible server) | vllm | vllm_server (a
    # server the loop starts on each policy and stops before training): llm/base.py's records
    kind: str = field(
        default="hf", metadata={"help": "How to generate", "flag": "--backend", "choices": BACKEND_KINDS.keys()}
    )
    model: str | None = None  # a checkpoint folder or hub name; for openai, the served name
    base_url: str | None = None  # openai: e.g. http://127.0.0.1:8000/v1
    api_key_env: str = "OPENAI_API_KEY"  # openai: the variable holding the key (may be unset)
    concurrency: int = field(default=8, metadata={"min": 1})  # openai: requests in flight
    timeout_s: float = field(default=120.0, metadata={"gt": 0})  # openai: per request
    # openai: on 429/5xx/timeouts/connection errors, with backoff
    max_retries: int = field(default=4, metadata={"min": 0})
    tensor_parallel_size: int = field(default=1, metadata={"min": 1})  # vllm
    # vllm: the share of each GPU's memory the engine may take (weights, then KV cache)
    gpu_memory_utilization: float = field(default=0.9, metadata={"gt": 0, "max": 1})
    # vllm: the engine's context; None: room for each call's longest prompt + max_tokens
    max_model_len: int | None = field(default=None, metadata={"min": 1})
    device: str = "auto"  # hf: auto | cpu | cuda | cuda:1 ...
    dtype: str = "auto"  # hf, vllm: auto | float32 | bfloat16 | float16
    chat_template_kwargs: dict[str, Any] | None = None  # e.g. {enable_thinking: false}
    options: dict[str, Any] = field(default_factory=dict)  # more keyword arguments for the backend
    # vllm_server: the start command, a template ("": vllm serve with these settings; see llm/served.py)
    serve_command: str = ""
    # vllm_server: the GPUs it serves on (CUDA_VISIBLE_DEVICES), data-parallel over them ([]: as visible, one engine)
    gpus: list[int] = field(default_factory=list, metadata={"items": {"min": 0}})
    # vllm_server: data-parallel engines in all; 0: one per tensor_parallel_size GPUs of `gpus`. More
    # than this node's GPUs hold: the rest placed on the Ray cluster's nodes by vLLM (docs/cluster.md)
    data_parallel_size: int = field(default=0, metadata={"min": 0})
    port: int = field(default=0, metadata={"min": 0, "max": 65535})  # vllm_server: 0 picks a free one
    startup_timeout_s: float = field(default=1800.0, metadata={"gt": 0})  # vllm_server: until /health answers


@dataclass
class SynthesizeConfig:
    """The policy as generator: how many candidates, what each request shows it."""

    # candidates wanted (responses with usable code); 0: none (a loop round without synthesis)
    n: int = field(default=32, metadata={"help": "Candidates wanted (responses with usable code).", "min": 0})
    max_requests: int = field(default=0, metadata={"min": 0})  # give up after this many requests (0: 4 x n)
    batch: int = field(default=64, metadata={"min": 1})  # requests sent to the backend at once
    # example environments shown per request, drawn from seeds and pool
    examples: int = field(default=2, metadata={"min": 0})
    max_avoid: int = field(default=60, metadata={"min": 0})  # pool names listed to steer away from
    topics: list[str] = field(default_factory=list)  # empty: prompts/topics.txt
    topics_file: str | None = None
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature.", "min": 0})
    top_p: float = field(default=0.95, metadata={"gt": 0, "max": 1})
    max_tokens: int = field(default=4096, metadata={"help": "Tokens per response.", "min": 1})
    seed: int = field(
        default=0, metadata={"help": "Which examples and topics each request shows, and the sampling seeds."}
    )


@dataclass
class ReviewConfig:
    """The semantic contract: the policy judges its own candidates by majority vote."""

    votes: int = field(default=3, metadata={"help": "Votes per candidate; a majority admits.", "min": 1})
    temperature: float = field(default=0.7, metadata={"min": 0})
    top_p: float = field(default=0.95, metadata={"gt": 0, "max": 1})
    max_tokens: int = field(default=1024, metadata={"min": 1})
    instances: int = field(default=3, metadata={"min": 1})  # sampled instances shown per candidate
    levels: list[int] = field(
        default_factory=lambda: [1, 5, 10], metadata={"min_len": 1, "items": {"min": 1, "max": 10}}
    )
    max_source_chars: int = field(default=12_000, metadata={"min": 1})
    # candidates per backend call (a verdict is final after its chunk)
    chunk: int = field(default=32, metadata={"min": 1})
    seed: int = 0


@dataclass
class CalibrateConfig:
    """The difficulty contract. The band keeps GRPO groups informative: at a pass rate p and
    K samples a group is all-solved or all-failed with probability p**K + (1-p)**K, which in
    [0.15, 0.85] with K = 8 stays under 0.28, so most groups carry a learning signal."""

    band: list[float] = field(
        default_factory=lambda: [0.15, 0.85],
        metadata={
            "help": "LO,HI: the pass rates to keep, e.g. 0.15,0.85.",
            "len": 2,
            "ascending": True,
            "items": {"min": 0, "max": 1},
        },
    )  # [low, high]
    coarse_levels: list[int] = field(
        default_factory=lambda: [1, 4, 7, 10], metadata={"min_len": 1, "items": {"min": 1, "max": 10}}
    )
    instances: int = field(
        default=8, metadata={"help": "Fresh instances per level.", "min": 1}
    )  # M fresh instances per level
    samples: int = field(default=8, metadata={"help": "Answers per instance.", "min": 1})  # K answers per instance
    # a level is in band only when its pass rate beats the measured guess rate (one-sided exact
    # binomial test at this level)
    alpha: float = field(default=0.05, metadata={"gt": 0, "lt": 1})
    # the most responses a level is measured on: while its 95% interval straddles a band edge,
    # the level's instances are doubled
    max_samples: int = field(default=64, metadata={"min": 1})
    # fresh instances per level whose reference answers are the guesses the guess rate is measured by
    guess_instances: int = field(default=12, metadata={"min": 2})
    temperature: float = field(default=1.0, metadata={"min": 0})
    top_p: float = field(default=1.0, metadata={"gt": 0, "max": 1})
    max_tokens: int = field(default=2048, metadata={"min": 1})
    # a curve whose range is under this does not respond to difficulty
    flat_tolerance: float = field(default=0.15, metadata={"min": 0, "max": 1})
    # pool rotation: the band widened by this before a miss counts
    margin: float = field(default=0.05, metadata={"min": 0, "max": 1})
    # pool rotation: consecutive misses that retire an environment
    retire_after: int = field(default=2, metadata={"min": 1})
    chunk: int = field(default=512, metadata={"min": 1})  # environments per sweep (each sweep is one backend batch)
    # reject | admit (uncalibrated, all levels: a solver that never answers, e.g. the CPU demo's tiny model)
    on_no_answers: str = field(default="reject", metadata={"choices": ("reject", "admit")})
    seed: int = 0


@dataclass
class ArenaConfig:
    """Reasoning Arena (`train.zero_variance: judge`): a GRPO group whose completions all scored
    the same is ranked by a judge, head to head against earlier traces of the same prompt
    (anchors) and its own members, and a Bradley-Terry fit of those comparisons becomes small
    within-group rewards that never reorder what the verifier separates."""

    # The judge. model null: the policy itself, the model being trained, with its current weights,
    # in-process (kind hf); otherwise any backend: a checkpoint (e.g. the starting one), a server.
    judge: BackendConfig = field(default_factory=BackendConfig)
    # k: games each new trace starts (a step costs at most groups x size x k games)
    comparisons: int = field(default=2, metadata={"min": 1})
    # ask each game twice, the traces swapped; a winner must win both (else a tie): position bias cancels
    both_orders: bool = True
    anchors: int = field(default=4, metadata={"min": 0})  # earlier traces kept per prompt (env_id, seed, difficulty)
    # prompts whose anchors are kept (least recently judged dropped)
    max_prompts: int = field(default=4096, metadata={"min": 1})
    # the largest judge reward (shrunk below half the smallest gap between the verifier's rewards)
    weight: float = field(default=0.01, metadata={"gt": 0, "lt": 0.5})
    # Bradley-Terry prior: virtual games of each trace against an average one
    prior: float = field(default=1.0, metadata={"gt": 0})
    max_iterations: int = field(default=500, metadata={"min": 1})  # of the Bradley-Terry MM fit
    tolerance: float = field(default=1e-6, metadata={"gt": 0})  # the fit stops when no score moves more than this
    temperature: float = field(default=0.0, metadata={"min": 0})  # the judge's sampling (0: greedy)
    max_tokens: int = field(default=512, metadata={"min": 1})  # the judge's response
    max_trace_chars: int = field(default=6000, metadata={"min": 200})  # of each trace shown (head and tail kept)
    seed: int = 0  # anchor choice and the order traces are shown in
    # the judge's rewards are used while its agreement with the verifier, on groups the verifier
    # separates, beats chance (1/2) in a one-sided sign test at this level (1: used unmeasured)
    trust_alpha: float = field(default=0.05, metadata={"gt": 0, "max": 1})
    probe_groups: int = field(default=8, metadata={"min": 0})  # separated groups probed a step (2 calls each)
    retest_every: int = field(default=4, metadata={"min": 1})  # steps a judge found at chance sits out


@dataclass
class TrainConfig:
    """GRPO with TRL. Defaults are TRL 1.x's (beta 0: no reference model; loss 'dapo')."""

    learning_rate: float = field(default=1e-6, metadata={"help": "Learning rate.", "flag": "--lr", "min": 0})
    beta: float = field(
        default=0.0, metadata={"help": "KL coefficient (0: no reference model).", "min": 0}
    )  # KL coefficient
    num_generations: int = field(default=8, metadata={"help": "Completions per prompt (the GRPO group).", "min": 2})
    # completions per device per step; a multiple of num_generations
    per_device_train_batch_size: int = field(
        default=8,
        metadata={
            "help": "Completions per device per step (a multiple of --num-generations).",
            "flag": "--batch-size",
            "min": 1,
        },
    )
    gradient_accumulation_steps: int = field(default=1, metadata={"min": 1})
    max_completion_length: int = field(default=2048, metadata={"help": "Tokens per completion.", "min": 1})
    temperature: float = field(default=1.0, metadata={"gt": 0})
    epochs: float = field(default=1.0, metadata={"gt": 0})
    max_steps: int = field(
        default=-1, metadata={"help": "Stop after this many optimizer steps."}
    )  # > 0 overrides epochs
    # Demonstrations fade: once a logged step's share of completions with a well-formed answer
    # (train/format_share) reaches this, the steps after it are asked without the rows'
    # demonstration turns (half the prompt tokens). None: kept throughout.
    fade_demonstrations_at: float | None = field(default=None, metadata={"gt": 0, "max": 1})
    seed: int = field(default=0, metadata={"help": "Training seed."})
    loss_type: str = "dapo"
    scale_rewards: str = "group"
    logging_steps: int = field(default=1, metadata={"min": 1})
    save_steps: int = field(default=50, metadata={"min": 1})
    # checkpoints kept (each with optimizer state); resuming needs only the latest
    save_total_limit: int = field(default=1, metadata={"min": 1})
    # with --eval-data: evaluate every N steps (None: save_steps)
    eval_steps: int | None = field(default=None, metadata={"min": 1})
    # None: per_device_train_batch_size
    per_device_eval_batch_size: int | None = field(default=None, metadata={"min": 1})
    num_generations_eval: int | None = field(default=None, metadata={"min": 1})  # None: num_generations
    gradient_checkpointing: bool = True
    max_grad_norm: float = field(default=1.0, metadata={"min": 0})
    # a count, or a fraction of the run below 1 (transformers 5)
    warmup_steps: float = field(default=0.0, metadata={"min": 0})
    # None: on GPUs only; "auto": where the device computes in bfloat16 faster than in float32
    # (a GPU that supports it, a CPU with AMX: precision.native_bf16)
    bf16: bool | str | None = field(default=None, metadata={"choices": (True, False, "auto")})
    use_cpu: bool = False
    report_to: str = "none"
    log_completions: bool = False
    lora: bool = False
    lora_r: int = field(default=16, metadata={"min": 1})
    lora_alpha: int = field(default=32, metadata={"min": 1})
    lora_dropout: float = field(default=0.0, metadata={"min": 0, "lt": 1})
    lora_target_modules: str = "all-linear"
    merge_lora: bool = False  # also write a merged full model to OUT/merged
    # lora: a LoRA adapter when `lora` is on, else all weights (the behaviour before TinyLoRA);
    # tinylora: PEFT's TinyLoraConfig (W + U S R(v) V^T over a frozen rank-r SVD, R a fixed random
    # projection of a trained vector v of tinylora_u values), whatever `lora` says
    adapter: str = field(default="lora", metadata={"choices": ("lora", "tinylora")})
    tinylora_r: int = field(default=2, metadata={"min": 1})  # frozen SVD rank (the paper's 2)
    tinylora_u: int = field(default=13, metadata={"min": 1})  # values in each trained vector
    # 1.0: one vector shared by every module (exactly tinylora_u trained values); 0.0: one per module
    tinylora_weight_tying: float = field(default=1.0, metadata={"min": 0, "max": 1})
    tinylora_projection_seed: int = 42  # fixes R; fixed before the bound's sample, it costs no bits
    use_vllm: bool = False
    # colocate | server (`trl vllm-serve` on other GPUs)
    vllm_mode: str = field(default="colocate", metadata={"choices": ("colocate", "server")})
    vllm_server_base_url: str | None = None
    vllm_gpu_memory_utilization: float = field(default=0.3, metadata={"gt": 0, "max": 1})
    vllm_tensor_parallel_size: int = field(default=1, metadata={"min": 1})
    # colocated vLLM's context (TRL's vllm_max_model_length); None: the longest prompt of the
    # rows + max_completion_length (left to vLLM, it would take the model's whole context)
    vllm_max_model_length: int | None = field(default=None, metadata={"min": 1})
    # leave completions cut at max_completion_length out of the loss (TRL's flag)
    mask_truncated_completions: bool = True
    # `accelerate launch --config_file` for iterate's train_launch: zero2 | zero3 | fsdp (shipped
    # in evoenv_cli/accelerate_configs/) or a YAML file; "": accelerate's default (plain DDP).
    # Under iterate.cluster: ray, each Ray Train worker gets the environment it stands for (docs/cluster.md)
    accelerate_config: str = ""
    # under iterate.cluster: ray, the Ray Train workers (processes, one GPU each where the cluster
    # has GPUs) on a placement group that may span nodes; ignored on one machine
    workers: int = field(default=1, metadata={"min": 1})
    # seconds a rank waits at a collective (transformers' ddp_timeout, 1800 by default): after
    # generation every rank gathers while the slowest still decodes its num_generations
    # completions of max_completion_length (8 x 32,768 tokens on the paper recipe can pass 30
    # minutes); at most a day, so a hung rank still ends the run
    ddp_timeout: int = field(default=7200, metadata={"min": 60, "max": 86400})
    chat_template_kwargs: dict | None = None
    # Groups whose completions all got the same reward: "skip" (GRPO's zero advantage, no gradient)
    # or "judge" (Reasoning Arena: ranked by a judge, see the arena section).
    zero_variance: str = field(
        default="skip",
        metadata={
            "help": "Groups whose completions all scored the same: skip (no gradient) or judge (Reasoning Arena: ranked by a judge, the policy unless train.arena.judge names a model; see README).",
            "choices": ("skip", "judge"),
        },
    )
    arena: ArenaConfig = field(default_factory=ArenaConfig)


@dataclass
class DistillConfig:
    """`evoenv distill`: on-policy distillation (TRL's DistillationTrainer). The student, the base
    model plus a TinyLoRA adapter shaped by train.tinylora_*, samples its own completions and
    learns the teacher's next-token distribution on them. With reward_weight w > 0 the
    environments' reward is mixed in: w times a REINFORCE term on the same samples, their
    advantage the reward (as `train` pays it) less the batch's mean (training/mixed_reward.py)."""

    beta: float = field(default=1.0, metadata={"min": 0, "max": 1})  # 1.0 reverse KL, 0.0 forward KL, 0.5 JSD
    learning_rate: float = field(default=1e-3, metadata={"help": "Learning rate.", "flag": "--lr", "min": 0})
    max_steps: int = field(default=20, metadata={"help": "Optimizer steps.", "min": 1})
    per_device_train_batch_size: int = field(default=8, metadata={"min": 1})
    gradient_accumulation_steps: int = field(default=1, metadata={"min": 1})
    max_completion_length: int = field(default=256, metadata={"min": 1})
    temperature: float = field(default=1.0, metadata={"gt": 0})  # of the student's samples and of the loss
    reward_weight: float = field(
        default=0.0,
        metadata={
            "help": "Mix the environments' reward in at this weight (a REINFORCE term; 0: distillation alone).",
            "min": 0,
        },
    )
    seed: int = 0
    logging_steps: int = field(default=1, metadata={"min": 1})
    save_steps: int = field(default=50, metadata={"min": 1})
    save_total_limit: int = field(default=2, metadata={"min": 1})
    # None: on GPUs only; "auto": where the device computes in bfloat16 faster (precision.native_bf16)
    bf16: bool | str | None = field(default=None, metadata={"choices": (True, False, "auto")})
    gradient_checkpointing: bool | None = None  # None: on GPUs only (a CPU's short completions need none)
    use_cpu: bool = False


@dataclass
class BoundConfig:
    """`evoenv bound`: a compression (Occam, kl-inverse) bound on a policy's error over fresh
    instances. Everything here is written into the bound code before the sample S is drawn."""

    n: int = field(
        default=200,
        metadata={"help": "Instances in the bound's sample S, spread evenly over the environments.", "min": 1},
    )
    delta: float = field(
        default=0.05, metadata={"help": "The bound holds with probability 1 - delta.", "gt": 0, "lt": 1}
    )
    temperature: float = field(default=1.0, metadata={"help": "Gumbel-max sampling temperature.", "gt": 0})
    max_tokens: int = field(default=32, metadata={"min": 1})
    seed: int = 7  # base of S's instance seeds (held-out split) and of its noise seeds
    threshold: float = 1.0  # an answer is correct when the environment's score is at least this
    bits: int = field(default=4, metadata={"min": 1, "max": 16})  # k: bits per quantized value
    # every hyperparameter choice made with data, each over a grid fixed in advance; bits must be
    # among "bits", u among "u"; the bound pays log2 of the grid's size
    grid: dict[str, list] = field(
        default_factory=lambda: {"u": [13], "bits": [2, 4, 8], "learning_rate": [1e-3, 1e-2], "steps": [20, 40]}
    )
    tolerance: float = field(default=0.05, metadata={"min": 0, "max": 1})  # quantized vs unquantized accuracy
    batch_size: int = field(default=16, metadata={"min": 1})
    # the policy's weights and arithmetic when it answers S (bfloat16: about 2.7x faster on a CPU
    # with AMX, and what GPUs run; 5-7x slower on an AVX2 CPU, which converts around every
    # product); "auto": bfloat16 on a GPU that supports it or a CPU with AMX
    # (precision.native_bf16), float32 elsewhere, resolved when the code is written. Recorded
    # in the code with batch_size, because both change the answers (padding and rounding), so
    # both are fixed before S
    dtype: str = field(default="float32", metadata={"choices": ("float32", "bfloat16", "auto")})
    # where the policy answers S: a GPU box's "cuda" (the first device) or "cpu"; recorded in the
    # code too, since another device may round a near-tie token the other way
    device: str = field(default="cpu", metadata={"choices": ("cpu", "cuda")})
    # how prompts share a forward pass: "shared-context" reads each distinct context (system
    # turn and demonstrations) once and batches prompts of equal lengths, no padding, every
    # batch batch_size rows, so an answer does not depend on what else is in its batch;
    # "padded" (HF generate, left padding) is how codes written before it answered
    batching: str = field(default="shared-context", metadata={"choices": ("shared-context", "padded")})


@dataclass
class EvaluateConfig:
    """Held-out evaluation: environment instances at held-out seeds (bit 31 set, so never a
    training seed) and benchmark files of {question, answer} rows; pass@1 over `samples`."""

    # held-out instances per environment, spread over its levels
    instances: int = field(default=16, metadata={"help": "Held-out instances per environment.", "min": 1})
    samples: int = field(
        default=4, metadata={"help": "Samples per item; pass@1 is their mean correctness.", "flag": "--n", "min": 1}
    )  # n: responses per item; pass@1 is their mean correctness
    temperature: float = field(default=0.6, metadata={"help": "Sampling temperature (0: greedy).", "min": 0})
    top_p: float = field(default=0.95, metadata={"gt": 0, "max": 1})
    max_tokens: int = field(default=2048, metadata={"min": 1})
    seed: int = field(
        default=0, metadata={"help": "Base of the held-out instance seeds and the sampling seeds."}
    )  # base of the held-out instance seeds and of the sampling seeds
    # math-verify: seconds per comparison before it counts as wrong
    verify_timeout_s: int = field(default=5, metadata={"min": 1})


@dataclass
class IterateConfig:
    """`make iterate`: the loop's own settings. What each round asks of a stage is that stage's
    section (synthesize.n, compose.n, sample.per_env, ...), as the stage's command reads it."""

    bench: list[str] = field(default_factory=list)  # benchmark JSONL files or rg:TASK[:N] specs for evaluate
    baseline: bool = True  # evaluate the round's policy beside the starting model
    # Build the policy at backend.model / --model when that folder is missing: "starter" (the
    # SmolLM2-135M-Instruct checkpoint, offline; the CPU demo), "tiny" (random weights, tests).
    build_model: str = ""
    train_launch: str = ""  # prefix for the train stage, e.g. "accelerate launch --num_processes 8"
    rotate_every: int = field(default=1, metadata={"min": 1})  # rounds between two re-measurements of a pool member
    # where the loop's work runs: "" (this machine) or "ray" (the Ray cluster at cluster_address:
    # sandboxed work on every node, train on Ray Train workers; docs/cluster.md)
    cluster: str = field(default="", metadata={"choices": ("", "ray")})
    cluster_address: str = "auto"  # ray.init's address: "auto" (the cluster `ray start` made here) or host:port


@dataclass
class RewardConfig:
    """How a completion becomes a reward: the answer extracted (the `answer:` section's tag),
    then the environment's score."""

    # the format bonus's share of the reward; below 1, or the environment's score would weigh nothing
    format_weight: float = field(default=0.0, metadata={"min": 0, "lt": 1})
    # rewards scored again in a fresh worker; a disagreement quarantines the environment
    recheck_share: float = field(default=0.02, metadata={"min": 0, "max": 1})


@dataclass
class Recipe:
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    answer: AnswerConfig = field(default_factory=AnswerConfig)
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
    distill: DistillConfig = field(default_factory=DistillConfig)
    bound: BoundConfig = field(default_factory=BoundConfig)
    dedupe: DedupeConfig = field(default_factory=DedupeConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_problem(value: Any, hint: Any) -> str | None:
    """Why `value` does not fit the annotation `hint`, or None."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return None
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        problems = [_type_problem(value, o) for o in options if o is not type(None)]
        if any(p is None for p in problems):
            return None
        return problems[0] + (" or null" if type(None) in options else "")
    if hint is bool:
        return None if isinstance(value, bool) else "expected true or false"
    if hint is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else "expected an integer"
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return None if ok else "expected a number"
    if hint is str:
        return None if isinstance(value, str) else "expected a string"
    if hint is list or origin is list:
        if not isinstance(value, list):
            return "expected a list"
        (item,) = typing.get_args(hint) or (Any,)
        for k, v in enumerate(value):
            problem = _type_problem(v, item)
            if problem:
                return f"item {k}: {problem}"
        return None
    if hint is dict or origin is dict:
        return None if isinstance(value, dict) else "expected a mapping"
    if dataclasses.is_dataclass(hint):
        return None if isinstance(value, hint) else "expected a mapping (a section of settings)"
    return None


def _as_written(choice: Any) -> str:
    """A choice as a recipe writes it: YAML's true and false, not Python's True and False."""
    return str(choice).lower() if isinstance(choice, bool) else str(choice)


def _rule_problem(value: Any, rules: dict, section: Any = None) -> str | None:
    """Why `value` breaks the field's rules (its metadata), or None. `section`: the config
    object the field belongs to, for a rule that reads another of its fields."""
    if value is None:
        return None
    if "names_tag" in rules and isinstance(value, str):
        tag = getattr(section, rules["names_tag"], "")
        text = value.replace("{tag}", tag)
        missing = [t for t in (f"<{tag}>", f"</{tag}>") if t not in text]
        if tag and text and missing:
            return (
                f"must ask for the answer in the {rules['names_tag']} ({' and '.join(missing)} "
                f"missing; write {{tag}} for it, e.g. <{{tag}}>)"
            )
    if "choices" in rules and value not in rules["choices"]:
        shown = [_as_written(c) for c in rules["choices"]]
        hint = difflib.get_close_matches(str(value), shown, n=1)
        more = f" (did you mean {hint[0]!r}?)" if hint else ""
        return f"must be one of {', '.join(shown)}{more}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "min" in rules and value < rules["min"]:
            return f"must be at least {rules['min']}"
        if "max" in rules and value > rules["max"]:
            return f"must be at most {rules['max']}"
        if "gt" in rules and not value > rules["gt"]:
            return f"must be greater than {rules['gt']}"
        if "lt" in rules and not value < rules["lt"]:
            return f"must be less than {rules['lt']}"
    if isinstance(value, list):
        if "len" in rules and len(value) != rules["len"]:
            return f"must hold exactly {rules['len']} values"
        if "min_len" in rules and len(value) < rules["min_len"]:
            return f"must hold at least {rules['min_len']} value{'s' if rules['min_len'] > 1 else ''}"
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        if rules.get("ascending") and numbers and any(b < a for a, b in zip(value, value[1:])):
            return "must be in ascending order (low first, then high)"
        if "sum" in rules and numbers and abs(sum(value) - rules["sum"]) > 1e-9:
            return f"must sum to {rules['sum']}"
        for k, v in enumerate(value):
            problem = _rule_problem(v, rules.get("items", {}))
            if problem:
                return f"item {k} ({_shown(v)}) {problem}"
    return None


def _field_problem(obj: Any, f: dataclasses.Field, hint: Any) -> str | None:
    value = getattr(obj, f.name)
    return _type_problem(value, hint) or _rule_problem(value, dict(f.metadata), obj)


def field_problem(cls: type, name: str, value: Any) -> str | None:
    """What is wrong with `value` as the field `name` of the config dataclass `cls` (its type
    and its bounds), or None: for a setting that arrives another way than in a recipe (a row
    carries reward.format_weight)."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    return _type_problem(value, typing.get_type_hints(cls)[name]) or _rule_problem(value, dict(f.metadata))


def check_values(obj: Any, where: str) -> None:
    """Every field of the config dataclass `obj` against its annotation and its rules; nested
    sections are checked where they are built. Raises InputError naming `where.key`."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(hints[f.name]) and isinstance(value, hints[f.name]):
            continue
        problem = _field_problem(obj, f, hints[f.name])
        if problem:
            raise InputError(f"{where}.{f.name}: {problem} (got {_shown(value)})")


def _coerce(value: Any, hint: Any) -> Any:
    """A number YAML left as a string (`1e-6`, which YAML 1.1 does not read as a float) for
    a float field; everything else as it is."""
    if isinstance(value, str) and hint in (float, float | None):
        try:
            return float(value)
        except ValueError:
            return value
    return value


# Settings that moved to another section: a recipe still naming them is told where they live.
MOVED = {
    IterateConfig: {"synthesize_n": "synthesize.n", "compose_n": "compose.n", "sample_per_env": "sample.per_env"},
    SampleConfig: {"answer_instruction": "answer.instruction"},
    RewardConfig: {"answer_tag": "answer.tag"},
    CalibrateConfig: {"answer_tag": "answer.tag"},
    EvaluateConfig: {"answer_tag": "answer.tag", "bench_instruction": "answer.bench_instruction"},
}


def _build(cls: type[T], data: dict, where: str) -> T:
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a mapping")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in data.items():
        if key not in fields:
            moved = MOVED.get(cls, {}).get(key)
            hint = difflib.get_close_matches(str(key), list(fields), n=1)
            more = f" (it is {moved} now)" if moved else f" (did you mean {hint[0]!r}?)" if hint else ""
            raise InputError(f"{where}: unknown key {key!r}{more}")
        if dataclasses.is_dataclass(hints[key]) and isinstance(value, dict):
            value = _build(hints[key], value, f"{where}.{key}")
        kwargs[key] = _coerce(value, hints[key])
    try:
        built = cls(**kwargs)
    except TypeError as exc:
        raise InputError(f"{where}: {exc}") from None
    check_values(built, where)
    return built


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
    return recipe_from_dict(data, str(p))


def recipe_from_dict(data: dict, where: str) -> Recipe:
    """A recipe from its sections as a mapping (a YAML file's, or `to_dict` of a resolved
    recipe), every value checked by its field's rules; `where` leads each error."""
    recipe = Recipe()
    for section, body in data.items():
        if section in SECTIONS:
            setattr(recipe, section, _build(SECTIONS[section], body or {}, f"{where}: {section}"))
        else:
            hint = difflib.get_close_matches(str(section), list(SECTIONS), n=1)
            more = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise InputError(f"{where}: unknown section {section!r}{more}")
    return recipe


def flag_of(f: dataclasses.Field) -> str:
    """The command-line flag that sets a recipe field: its metadata's `flag`, else --field-name."""
    return f.metadata.get("flag", "--" + f.name.replace("_", "-"))


def override(obj: T, /, **values: Any) -> T:
    """A copy of a config dataclass with the values of the flags the user actually gave (not
    None), each checked by its field's rules as a recipe value is; a bad one is an InputError
    naming the flag (`flag_of` the field)."""
    given = {k: v for k, v in values.items() if v is not None}
    built = dataclasses.replace(obj, **given)
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(built):
        cause = f.name if f.name in given else f.metadata.get("names_tag")  # a rule reading a flag's field
        problem = _field_problem(built, f, hints[f.name]) if cause in given else None
        if problem:
            flag = flag_of(next(g for g in dataclasses.fields(built) if g.name == cause))
            raise InputError(f"{flag}: {problem} (got {_shown(given[cause])})")
    return built


def to_dict(obj: Any) -> Any:
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj


def stage_settings(**parts) -> dict:
    """The resolved settings a stage's results depend on: hashed into OUT/run-config.json and
    the manifest, and what `--resume` refuses to change (worker counts and sandbox mode do not
    change results, so they are not in it)."""

    def plain(v):
        v = to_dict(v)
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return str(v) if isinstance(v, Path) else v

    return {k: plain(v) for k, v in parts.items()}


def llm_settings(recipe, backend: str | None, model: str | None) -> dict:
    """The policy's part of the settings."""
    return {
        "kind": backend or recipe.backend.kind,
        "model": model or recipe.backend.model,
        "chat_template_kwargs": recipe.backend.chat_template_kwargs,
    }


def prompt_settings(recipe) -> dict:
    """The parts of the recipe that shape every prompt and read every answer: the `sample:`
    section's system prompt and the `answer:` section."""
    return {"system_prompt": recipe.sample.system_prompt, "answer": to_dict(recipe.answer)}
