"""`evoenv plan`: whether a recipe fits its GPUs, said in a second before a ten-hour run starts.

A GPU run fails late and expensively: vLLM refuses at start when one sequence of its context
does not fit its KV cache, training runs out of memory at the first long completion, TRL
refuses a batch that does not split into whole prompt groups. This module estimates, per GPU,
what each phase of a round holds (the LLM stages' vLLM engine; training with its colocated
engine), checks every stage's token budget against the model's context, checks TRL's batch
divisibility, and names the first term that does not fit. `iterate` runs it before anything
loads.

The formulas, with their sources (docs/gpu.md lists them with the published figures the tests
check them against):
- model states under mixed-precision AdamW: 16 bytes per parameter (2 weights + 2 gradients +
  12 optimizer: fp32 master, momentum, variance), partitioned by ZeRO stage 1/2/3 (Rajbhandari
  et al., "ZeRO", arXiv:1910.02054, section 3 and figure 1); for stage 3 (and FSDP full shard)
  DeepSpeed's own estimate, 18 bytes per parameter over the GPUs plus 4 bytes per parameter of
  the largest layer (`estimate_zero3_model_states_mem_needs`, deepspeed/runtime/zero/stage3.py);
- vLLM's KV cache: 2 (K and V) x layers x kv_heads x head_dim x bytes per token (vLLM's
  `AttentionSpec.page_size_bytes`, vllm/v1/kv_cache_interface.py), and vLLM's start-up rule that
  one sequence of `max_model_len` tokens must fit in what its `gpu_memory_utilization` share
  leaves after the weights;
- activations: with gradient checkpointing, each layer's input kept (tokens x hidden x bytes)
  plus one layer's working set recomputed in backward;
- the LM head: TRL 1.16's fused, tiled head (`add_fused_lm_head`), which never builds the
  logits: one 4,096 x 32,768 tile, the completion's hidden states and fp32 per-token
  statistics, and the fp32 gradient of the head's weight where it is trained. These are
  estimates; `make bench` compares them with torch's measured peak on a CPU and `make
  gpu-check` with `max_memory_reserved` on a GPU.
- the weights' dtype: `training/precision.py` (float32 masters where bf16 weights would be
  silently wrong), the same rule `train` loads them by.

Nothing is fetched: a local model folder's config.json is read; otherwise the model's shape
comes from KNOWN_MODELS, copied from the models' published config.json files.

Why one module: the memory model is one set of formulas, each with its source, and the phases
add them up; a reader checks a plan's figure against its formula in one file.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evoenv_cli.errors import InputError
from evoenv_cli.training import precision

GIB = 1024**3
# A CUDA context, cuBLAS workspaces and the caching allocator's fragmentation, per process: the
# memory nvidia-smi shows that no tensor accounts for.
CUDA_OVERHEAD_GIB = 1.5
# vLLM's own working memory inside its share beyond weights and KV cache (the profiling run's
# activation peak at its default batched-token budget, sampler buffers, CUDA graphs).
VLLM_RUNTIME_GIB = 2.0
PROMPT_TOKENS = 2048  # a rendered task prompt with its instruction (evoenv's prompts run 300-1500 tokens)
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class ModelShape:
    """What memory depends on, as a transformers config.json names it."""

    name: str
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int
    intermediate: int
    vocab: int
    max_position: int
    tied: bool
    source: str = ""

    @property
    def layer_params(self) -> int:
        attn = self.hidden * self.heads * self.head_dim * 2 + self.hidden * self.kv_heads * self.head_dim * 2
        return attn + 3 * self.hidden * self.intermediate + 2 * self.hidden

    @property
    def params(self) -> int:
        embed = self.vocab * self.hidden
        return embed * (1 if self.tied else 2) + self.layers * self.layer_params + self.hidden

    @property
    def largest_layer_params(self) -> int:
        """DeepSpeed's `largest_layer_params`: the biggest single module (the embedding here)."""
        return max(self.vocab * self.hidden, self.hidden * self.intermediate)

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes

    def lora_params(self, r: int) -> int:
        """LoRA on every linear layer (PEFT's "all-linear": attention and MLP projections)."""
        q_out, kv_out = self.heads * self.head_dim, self.kv_heads * self.head_dim
        per_layer = (
            (self.hidden + q_out)
            + 2 * (self.hidden + kv_out)
            + (q_out + self.hidden)
            + 2 * (self.hidden + self.intermediate)
            + (self.intermediate + self.hidden)
        )
        return r * per_layer * self.layers


def _shape(name: str, source: str, **kw: Any) -> ModelShape:
    return ModelShape(name=name, source=source, **kw)


_LLM_PROF = "citsjtu2020/LLM-Prof sglang/Model_Config.md (copies of the hub config.json files)"
# From the models' published config.json files; docs/gpu.md cites each.
KNOWN_MODELS = {
    m.name.lower(): m
    for m in (
        _shape(
            "Qwen/Qwen3-0.6B",
            "huggingface.co/Qwen/Qwen3-0.6B/raw/main/config.json",
            layers=28,
            heads=16,
            kv_heads=8,
            head_dim=128,
            hidden=1024,
            intermediate=3072,
            vocab=151936,
            max_position=40960,
            tied=True,
        ),
        _shape(
            "Qwen/Qwen3-1.7B",
            "huggingface.co/Qwen/Qwen3-1.7B config.json",
            layers=28,
            heads=16,
            kv_heads=8,
            head_dim=128,
            hidden=2048,
            intermediate=6144,
            vocab=151936,
            max_position=40960,
            tied=True,
        ),
        _shape(
            "Qwen/Qwen3-4B",
            _LLM_PROF,
            layers=36,
            heads=32,
            kv_heads=8,
            head_dim=128,
            hidden=2560,
            intermediate=9728,
            vocab=151936,
            max_position=40960,
            tied=True,
        ),
        _shape(
            "Qwen/Qwen3-4B-Thinking-2507",
            "huggingface.co/Qwen/Qwen3-4B-Thinking-2507 config.json (262,144-token context)",
            layers=36,
            heads=32,
            kv_heads=8,
            head_dim=128,
            hidden=2560,
            intermediate=9728,
            vocab=151936,
            max_position=262144,
            tied=True,
        ),
        _shape(
            "Qwen/Qwen3-8B",
            _LLM_PROF,
            layers=36,
            heads=32,
            kv_heads=8,
            head_dim=128,
            hidden=4096,
            intermediate=12288,
            vocab=151936,
            max_position=40960,
            tied=False,
        ),
        _shape(
            "Qwen/Qwen2.5-7B",
            _LLM_PROF,
            layers=28,
            heads=28,
            kv_heads=4,
            head_dim=128,
            hidden=3584,
            intermediate=18944,
            vocab=152064,
            max_position=131072,
            tied=False,
        ),
        _shape(
            "meta-llama/Llama-3.1-8B",
            _LLM_PROF,
            layers=32,
            heads=32,
            kv_heads=8,
            head_dim=128,
            hidden=4096,
            intermediate=14336,
            vocab=128256,
            max_position=131072,
            tied=False,
        ),
        _shape(
            "HuggingFaceTB/SmolLM2-135M",
            "the starter model's config.json (runs/starter-model, converted from SmolLM2-135M-Instruct)",
            layers=30,
            heads=9,
            kv_heads=3,
            head_dim=64,
            hidden=576,
            intermediate=1536,
            vocab=49152,
            max_position=8192,
            tied=True,
        ),
    )
}


def model_shape(model: str) -> ModelShape:
    """The shape of `model`: its config.json when it is a local folder, else the table entry
    whose name (or the part after the organisation) matches, ignoring case and `-Instruct`."""
    path = Path(model).expanduser()
    if (path / "config.json").is_file():
        return shape_from_config(json.loads((path / "config.json").read_text()), str(path))
    key = model.lower().removesuffix("-instruct")
    for name, shape in KNOWN_MODELS.items():
        if key in (name, name.split("/", 1)[1]):
            return shape
    known = ", ".join(m.name for m in KNOWN_MODELS.values())
    raise InputError(
        f"{model}: not a local model folder and not in the plan's table of known models ({known}); "
        "pass a local folder with its config.json (nothing is downloaded)"
    )


def shape_from_config(cfg: dict, name: str) -> ModelShape:
    cfg = cfg.get("text_config") or cfg
    try:
        heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        return ModelShape(
            name=name,
            layers=int(cfg["num_hidden_layers"]),
            heads=heads,
            kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or hidden // heads),
            hidden=hidden,
            intermediate=int(cfg["intermediate_size"]),
            vocab=int(cfg["vocab_size"]),
            max_position=int(cfg.get("max_position_embeddings") or 2048),
            tied=bool(cfg.get("tie_word_embeddings", False)),
            source=f"{name}/config.json",
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{name}/config.json: cannot read the model's shape ({exc})") from None


# -- the formulas ---------------------------------------------------------------------------------
def zero_model_states(params: int, stage: int, gpus: int, largest_layer: int = 0) -> float:
    """Bytes per GPU of weights, gradients and AdamW state in mixed precision (16 bytes per
    parameter: ZeRO paper, section 3.1), partitioned by ZeRO stage; stage 3 is DeepSpeed's
    `estimate_zero3_model_states_mem_needs` without offload (18 bytes over the GPUs plus the
    largest layer gathered in fp32)."""
    if stage == 0:
        return 16 * params
    if stage == 1:
        return 4 * params + 12 * params / gpus
    if stage == 2:
        return 2 * params + 14 * params / gpus
    return 4 * largest_layer + 18 * params / gpus


def zero_paper_figure(params: float, stage: int, gpus: int) -> float:
    """The ZeRO paper's figure 1 numbers: (2 + 2 + K) x params with K = 12, partitioned."""
    if stage == 3:
        return 16 * params / gpus
    return zero_model_states(int(params), stage, gpus)


@dataclass
class TrainShape:
    """What training's memory depends on beyond the model."""

    micro_batch: int  # completions in one forward/backward (per_device_train_batch_size)
    prompt_tokens: int
    completion_tokens: int
    compute_bytes: int = 2  # bf16 autocast or bf16 weights: 2; fp32: 4
    gradient_checkpointing: bool = True


# TRL 1.16's fused LM head (trl/trainer/utils.py `add_fused_lm_head`, the kernel in
# trl/kernels/chunked_logprob.py) never builds the (tokens x vocabulary) logits: it projects the
# completion's positions through the head in tiles of TOKEN_CHUNK_SIZE tokens x
# _CHUNKED_LOGPROB_CHUNK_SIZE vocabulary entries, folding each into fp32 running statistics,
# and its backward recomputes each tile.
HEAD_TOKEN_TILE = 4096  # trl.kernels.chunked_logprob.TOKEN_CHUNK_SIZE
HEAD_VOCAB_TILE = 32768  # trl.trainer.utils._CHUNKED_LOGPROB_CHUNK_SIZE
HEAD_FP32_PER_TOKEN = 9  # running max, sum_exp, x_sum_exp, sq_sum_exp, z_sum, max_before_target, target, log_z, entropy


def activation_bytes(m: ModelShape, t: TrainShape) -> float:
    """The activations of one forward/backward through the decoder layers, in bytes.

    A decoder layer saves, per token, about 10 x hidden (norm inputs and outputs, q, attention
    output, o_proj input), 4 x kv_heads x head_dim (k, v before and after RoPE) and 4 x
    intermediate (gate, up, SiLU(gate), their product) values for backward; attention is
    SDPA/flash, so no tokens-squared term. With checkpointing each layer keeps only its input
    (hidden values per token) and one layer at a time is recomputed, its saved values and their
    gradients alive together (x2)."""
    tokens = t.micro_batch * (t.prompt_tokens + t.completion_tokens)
    a = t.compute_bytes
    saved = tokens * a * (10 * m.hidden + 4 * m.intermediate + 4 * m.kv_heads * m.head_dim)
    if t.gradient_checkpointing:
        return m.layers * tokens * m.hidden * a + 2 * saved
    return m.layers * saved + saved


def head_bytes(m: ModelShape, t: TrainShape, trains_head: bool) -> float:
    """What TRL's fused LM head holds over one forward/backward, in bytes: the completion's
    hidden states it scores (compute dtype), one projection tile, the fp32 statistics per
    token, the fp32 accumulator of the hidden states' gradient, and, where the head is trained
    (full fine-tuning; tied to the embedding or not), the fp32 accumulator of its weight's."""
    n = t.micro_batch * t.completion_tokens
    a = t.compute_bytes
    tile = min(n, HEAD_TOKEN_TILE) * min(m.vocab, HEAD_VOCAB_TILE) * a
    hidden = n * m.hidden * (a + 4)
    weight_grad = m.vocab * m.hidden * 4 if trains_head else 0
    return tile + hidden + n * 4 * HEAD_FP32_PER_TOKEN + weight_grad


# -- the plan -------------------------------------------------------------------------------------
@dataclass
class Term:
    name: str
    gib: float
    note: str = ""


@dataclass
class Phase:
    """One thing a GPU holds at a time: the LLM stages' engine, or training (with its
    colocated engine). `limit_gib` is what it may use."""

    name: str
    limit_gib: float
    terms: list[Term] = field(default_factory=list)

    @property
    def total_gib(self) -> float:
        return sum(t.gib for t in self.terms)

    def add(self, name: str, nbytes: float, note: str = "") -> None:
        self.terms.append(Term(name, nbytes / GIB, note))


@dataclass
class Problem:
    term: str  # the failing term, e.g. "train: model states" or "backend: kv_cache"
    detail: str


@dataclass
class Plan:
    recipe: str
    model: str
    model_source: str
    params: int
    gpus: int
    gpu_gib: float
    phases: list[Phase] = field(default_factory=list)
    disk_gb_per_round: float = 0.0  # what a round keeps: its final model
    disk_gb_peak: float = 0.0  # while it trains: checkpoints (deleted once the round's train ends) + final model
    disk_notes: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    prompt_tokens: int = PROMPT_TOKENS  # the prompt length every budget is planned with
    nodes: int = 1  # machines of `gpus` GPUs each (iterate.cluster: ray spreads training over them)
    cluster: list[str] = field(default_factory=list)  # per phase: the nodes it asks for, memory per node

    @property
    def fits(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        out = asdict(self)
        out["fits"] = self.fits
        for phase, p in zip(out["phases"], self.phases):
            phase["total_gib"] = round(p.total_gib, 2)
        return out

    def lines(self) -> list[str]:
        nodes = f"{self.nodes} nodes of " if self.nodes > 1 else ""
        out = [
            f"plan: {self.recipe} with {self.model} ({self.params / 1e9:.2f}B parameters; shape from "
            f"{self.model_source}) on {nodes}{self.gpus} x {self.gpu_gib:g} GiB"
        ]
        for p in self.phases:
            mark = "ok" if p.total_gib <= p.limit_gib else "OVER"
            out.append(f"  {p.name}: {p.total_gib:.1f} of {p.limit_gib:.1f} GiB per GPU [{mark}]")
            out += [f"    {t.name:<28} {t.gib:8.2f} GiB  {t.note}".rstrip() for t in p.terms]
        out.append(
            f"  disk per round: {self.disk_gb_per_round:.1f} GB kept, {self.disk_gb_peak:.1f} GB at most while "
            f"training ({'; '.join(self.disk_notes)})"
        )
        out += [f"  cluster: {c}" for c in self.cluster]
        out += [f"  note: {n}" for n in self.notes]
        if self.fits:
            out.append("plan: fits")
        else:
            out += [f"  does not fit: {p.term}: {p.detail}" for p in self.problems]
        return out

    def refusal(self) -> str:
        first = self.problems[0]
        more = f" (and {len(self.problems) - 1} more: evoenv plan {self.recipe})" if len(self.problems) > 1 else ""
        return f"{self.recipe}: does not fit {self.gpus} x {self.gpu_gib:g} GiB: {first.term}: {first.detail}{more}"


# -- reading the recipe ---------------------------------------------------------------------------
HARDWARE_LINE = re.compile(r"^#\s*hardware:\s*(\d+)\s*x\s*(\d+(?:\.\d+)?)\s*GB", re.IGNORECASE | re.MULTILINE)
USABLE_PER_GB = 0.98


def usable_gib(gb: float) -> float:
    """What torch reports as a card's total memory, for a card sold as `gb` GB: an H100 80GB
    reports 79.6 GiB, an RTX 4090 (24 GB) 23.6 GiB; 0.98 of the label covers both."""
    return gb * USABLE_PER_GB


def stated_hardware(recipe_path: str | Path) -> tuple[int, float] | None:
    """The recipe header's `# hardware: 8 x 80 GB` line, as (GPUs, GB per GPU)."""
    text = Path(recipe_path).read_text(encoding="utf-8")
    m = HARDWARE_LINE.search(text)
    return (int(m.group(1)), float(m.group(2))) if m else None


def _has(section: Any, name: str) -> bool:
    """Whether this evoenv's section has the field (some arrive with other changes)."""
    return name in {f.name for f in dataclasses.fields(section)}


def _setting(section: Any, *names: str, default: Any = None) -> Any:
    """The first of `names` the section has and sets; `default` otherwise."""
    for name in names:
        value = getattr(section, name, None)
        if value is not None and value != "":
            return value
    return default


def backend_context(b: Any, m: ModelShape, budgets: dict[str, int], prompt_tokens: int = PROMPT_TOKENS) -> int:
    """The context the LLM stages' engine is built with: backend.max_model_len (or the
    `max_model_len` option); unset, an evoenv whose backend sizes it per call (room for the
    call's prompt + max_tokens) needs the longest stage's, and one that does not (or a
    vllm_server, started once per policy) leaves vLLM the model's whole context."""
    given = _setting(b, "max_model_len", default=(b.options or {}).get("max_model_len"))
    if given:
        return int(given)
    if _has(b, "max_model_len") and b.kind == "vllm":  # a server is started once per policy: no resizing
        return min(m.max_position, prompt_tokens + max(v for k, v in budgets.items() if not k.startswith("train")))
    return m.max_position


def colocated_context(t: Any, m: ModelShape, prompt_tokens: int = PROMPT_TOKENS) -> int:
    """The colocated engine's context: train.vllm_max_model_length; unset, an evoenv that
    passes TRL the rows' longest prompt + max_completion_length, and one that passes nothing
    leaves vLLM the model's whole context."""
    given = _setting(t, "vllm_max_model_length")
    if given:
        return int(given)
    if _has(t, "vllm_max_model_length"):
        return min(m.max_position, prompt_tokens + t.max_completion_length)
    return m.max_position


def launch_settings(train_launch: str) -> tuple[int | None, str]:
    """(processes, sharding) from `iterate.train_launch` ("accelerate launch --num_processes 8
    --use_deepspeed --zero_stage 3 ..."): processes as the loop counts them (None: the
    launcher's choice, every visible GPU), sharding none | zero1 | zero2 | zero3 | fsdp."""
    from evoenv_cli.loop import launch_processes

    words = shlex.split(train_launch or "")
    sharding = "none"
    for i, w in enumerate(words):
        key, _, inline = w.partition("=")
        value = inline or (words[i + 1] if i + 1 < len(words) else "")
        if key in ("--zero_stage", "--zero-stage") and value.isdigit():
            sharding = f"zero{value}"
        elif key in ("--use_fsdp", "--use-fsdp"):
            sharding = "fsdp"
        elif key in ("--config_file", "--config-file"):
            sharding = _sharding_of_file(value) or sharding
    return launch_processes(train_launch), sharding


def _sharding_of_file(name: str) -> str | None:
    low = Path(name).name.lower()
    for key in ("zero3", "zero2", "zero1", "fsdp"):
        if key in low:
            return key
    return None


def _stage_of(sharding: str) -> int:
    return {"none": 0, "ddp": 0, "zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}.get(sharding, 0)


# -- what the training launch imports ----------------------------------------------------------------
def training_sharding(t: Any, train_launch: str) -> str:
    """none | zero1 | zero2 | zero3 | fsdp, from train.accelerate_config (a shipped name, or a
    YAML file whose distributed_type and zero_stage say it) and iterate.train_launch's flags."""
    sharding = launch_settings(train_launch)[1]
    config = str(_setting(t, "accelerate_config", default=""))
    named = _sharding_of_file(config)
    if named or not config.endswith((".yaml", ".yml")) or not Path(config).is_file():
        return named or sharding
    import yaml

    data = yaml.safe_load(Path(config).read_text(encoding="utf-8")) or {}
    kind = str(data.get("distributed_type", "")).upper()
    if kind == "DEEPSPEED":
        return f"zero{(data.get('deepspeed_config') or {}).get('zero_stage', 3)}"
    return "fsdp" if kind == "FSDP" else sharding


def launch_dependencies(recipe) -> list[str]:
    """What the recipe's training imports that this environment lacks, one line each with its
    install line: DeepSpeed for a ZeRO launch, vLLM for train.use_vllm (colocated, or TRL's
    client of `trl vllm-serve`). Checked by `iterate` before the first stage, not at round 1's
    train hours later."""
    import importlib.util

    t = recipe.train
    missing = []
    sharding = training_sharding(t, recipe.iterate.train_launch)
    if sharding.startswith("zero") and importlib.util.find_spec("deepspeed") is None:
        missing.append(
            f"training runs DeepSpeed ZeRO ({sharding}) and deepspeed is not installed: pip install 'evoenv[deepspeed]'"
        )
    if t.use_vllm and importlib.util.find_spec("vllm") is None:
        missing.append(f"train.use_vllm (vllm_mode {t.vllm_mode}) needs vLLM and it is not installed: pip install vllm")
    return missing


# -- building it ----------------------------------------------------------------------------------
def plan(
    recipe_path: str | Path,
    model: str | None = None,
    gpus: int | None = None,
    gpu_gb: float | None = None,
    nodes: int | None = None,
):
    """The plan of a recipe file for `gpus` cards of `gpu_gb` GB each (default: the recipe
    header's `# hardware: N x GB GB` line) on each of `nodes` machines (default: one, or on a
    Ray cluster as many as train.workers need: the memory per GPU is what is planned)."""
    from evoenv_cli import config as cfgmod

    recipe = cfgmod.load_recipe(recipe_path)
    stated = stated_hardware(recipe_path)
    if gpus is None or gpu_gb is None:
        if stated is None:
            raise InputError(
                f"{recipe_path}: no '# hardware: N x GB GB' line in its header; pass --gpus and --gpu-memory"
            )
        gpus = gpus if gpus is not None else stated[0]
        gpu_gb = gpu_gb if gpu_gb is not None else stated[1]
    name = model or recipe.backend.model
    if not name:
        raise InputError(f"{recipe_path}: no model: pass --model or set backend.model")
    if nodes is None:
        nodes = -(-recipe.train.workers // gpus) if recipe.iterate.cluster == "ray" else 1
    return plan_recipe(recipe, str(recipe_path), model_shape(name), gpus, usable_gib(gpu_gb), nodes=nodes)


def plan_recipe(
    recipe, label: str, m: ModelShape, gpus: int, gpu_gib: float, prompt_tokens: int = PROMPT_TOKENS, nodes: int = 1
) -> Plan:
    """The plan of a loaded recipe for `gpus` x `gpu_gib` (usable GiB each) on `nodes` machines."""
    p = Plan(label, m.name, m.source, m.params, gpus, gpu_gib, prompt_tokens=prompt_tokens, nodes=nodes)
    _llm_phase(p, recipe, m)
    _train_phase(p, recipe, m)
    _contexts(p, recipe, m)
    _disk(p, recipe, m)
    _cluster(p, recipe)
    for phase in p.phases:
        if phase.total_gib > phase.limit_gib:
            worst = max(phase.terms, key=lambda t: t.gib)
            p.problems.insert(
                0,
                Problem(
                    f"{phase.name}: {worst.name}",
                    f"{phase.total_gib:.1f} GiB per GPU needed, {phase.limit_gib:.1f} GiB available; "
                    f"the largest term is {worst.name} ({worst.gib:.1f} GiB{', ' + worst.note if worst.note else ''})",
                ),
            )
    return p


def _kv_check(p: Plan, where: str, m: ModelShape, share_bytes: float, weights: float, max_len: int, dtype_b: int):
    """vLLM's start-up rule: one sequence of max_model_len tokens fits in the KV cache its share
    leaves after the weights and its runtime."""
    kv_budget = share_bytes - weights - VLLM_RUNTIME_GIB * GIB
    need = m.kv_bytes_per_token(dtype_b) * max_len
    if kv_budget < need:
        p.problems.append(
            Problem(
                f"{where}: kv_cache",
                f"one sequence of max_model_len {max_len} tokens needs {need / GIB:.1f} GiB of KV cache "
                f"({m.kv_bytes_per_token(dtype_b) / 1024:.0f} KiB per token), the engine's share leaves "
                f"{max(kv_budget, 0) / GIB:.1f} GiB after weights and runtime (vLLM refuses to start); "
                "lower max_model_len or raise the memory share",
            )
        )
    return kv_budget, need


def _engine(phase: Phase, p: Plan, where: str, m: ModelShape, util: float, tp: int, max_len: int, dtype_b: int) -> None:
    share = util * p.gpu_gib * GIB
    weights = m.params * dtype_b / tp
    kv_budget, need = _kv_check(p, where, m, share, weights, max_len, dtype_b)
    phase.add(f"vllm weights (tp={tp})", weights)
    phase.add("vllm runtime", VLLM_RUNTIME_GIB * GIB, "profiling peak, sampler, CUDA graphs")
    phase.add(
        "vllm kv cache",
        max(kv_budget, 0),
        f"rest of its {util:g} share; {max(kv_budget, 0) / max(need, 1):.1f} sequences of {max_len} tokens",
    )


def _llm_phase(p: Plan, recipe, m: ModelShape) -> None:
    b = recipe.backend
    kind = b.kind
    if kind not in ("vllm", "vllm_server", "hf"):
        p.notes.append(f"backend.kind {kind}: the LLM stages run elsewhere (not planned here)")
        return
    opts = b.options or {}
    phase = Phase("llm stages", p.gpu_gib)
    phase.add("cuda context", CUDA_OVERHEAD_GIB * GIB)
    dtype_b = DTYPE_BYTES.get(b.dtype, 2)
    if kind == "hf":
        batch = max(recipe.synthesize.batch, recipe.review.chunk)
        longest = p.prompt_tokens + max(_stage_budgets(recipe).values())
        phase.add("weights", m.params * DTYPE_BYTES.get(b.dtype, 4))
        phase.add("kv cache", m.kv_bytes_per_token(dtype_b) * longest * batch, f"{batch} sequences of {longest}")
        p.phases.append(phase)
        return
    util = float(_setting(b, "gpu_memory_utilization", default=opts.get("gpu_memory_utilization", 0.9)))
    max_len = backend_context(b, m, _stage_budgets(recipe), p.prompt_tokens)
    tp = b.tensor_parallel_size
    _engine(phase, p, "backend", m, util, tp, max_len, dtype_b)
    if kind == "vllm_server":
        dp = max(1, len(_setting(b, "gpus", default=[]) or []) // tp)
        if dp * tp > p.gpus:
            p.problems.append(Problem("backend: gpus", f"the server asks for {dp * tp} GPUs, the machine has {p.gpus}"))
        phase.name = f"llm stages (vllm serve, data-parallel {dp})"
    p.phases.append(phase)


def train_processes(recipe, gpus: int) -> int:
    """Training's processes, one GPU each: train.workers on a Ray cluster, else what
    iterate.train_launch starts (a plain child: the GPUs of the machine)."""
    if recipe.iterate.cluster == "ray":
        return recipe.train.workers
    return launch_settings(recipe.iterate.train_launch)[0] or gpus


def _train_phase(p: Plan, recipe, m: ModelShape) -> None:
    t = recipe.train
    procs = train_processes(recipe, p.gpus)
    sharding = training_sharding(t, recipe.iterate.train_launch)
    stage = _stage_of(sharding)
    on_ray = recipe.iterate.cluster == "ray"
    if procs > p.gpus * (p.nodes if on_ray else 1):
        where = f"{p.nodes} nodes x {p.gpus} GPUs" if on_ray else f"{p.gpus} GPUs"
        setting = "train.workers" if on_ray else "iterate.train_launch"
        p.problems.append(Problem(setting, f"{procs} training processes on {where} (one GPU per process)"))
    # The weights' dtype as train loads them (training/precision.py): float32 masters where
    # bf16 weights would be silently wrong, bf16 under DeepSpeed and for an adapter kept off vLLM
    bf16 = t.bf16 is not False  # None: bf16 on GPUs
    ds = "deepspeed" if sharding.startswith("zero") else "fsdp" if sharding == "fsdp" else ""
    dtype = precision.weights_dtype(t, True, bf16, ds)
    refused = precision.refusal(t, ds, stage if ds == "deepspeed" else None)
    if refused:
        p.problems.append(Problem("train: sharding", refused))
    w = DTYPE_BYTES[dtype]
    compute = 2 if bf16 else 4
    kind = precision.adapter_kind(t)
    phase = Phase(f"train ({procs} process{'es' if procs > 1 else ''}, {sharding}, weights {dtype})", p.gpu_gib)
    phase.add("cuda context", CUDA_OVERHEAD_GIB * GIB)
    n = procs
    if kind != "full":
        base = m.params * w / (n if stage == 3 else 1)
        why = "float32: TRL merges the adapter into it at every vLLM sync" if dtype == "float32" and bf16 else dtype
        phase.add("frozen base weights", base, f"{why}{', sharded' if stage == 3 else ''}")
        if kind == "lora":
            lp = m.lora_params(t.lora_r)
            phase.add(
                "lora states", 16 * lp, f"{lp / 1e6:.0f}M adapter parameters x 16 bytes (fp32 weight, grad, AdamW)"
            )
        else:  # TinyLoRA: the frozen rank-r SVD factors in fp32 (the trained vector is a few values)
            phase.add("tinylora svd factors", 4 * m.lora_params(t.tinylora_r), f"rank {t.tinylora_r}, fp32, frozen")
    elif stage == 0:
        # plain DDP / one process: fp32 master weights, their gradients and both AdamW moments
        phase.add("model states", 4 * w * m.params, f"{4 * w} bytes/param: weights, grads, AdamW m and v in {dtype}")
    else:
        phase.add(
            "model states",
            zero_model_states(m.params, stage, n, m.largest_layer_params),
            f"ZeRO-{stage} mixed precision over {n} GPUs" if sharding != "fsdp" else f"FSDP full shard over {n} GPUs",
        )
    shape = TrainShape(
        micro_batch=t.per_device_train_batch_size,
        prompt_tokens=p.prompt_tokens,
        completion_tokens=t.max_completion_length,
        compute_bytes=compute,
        gradient_checkpointing=t.gradient_checkpointing,
    )
    acts = activation_bytes(m, shape)
    ckpt = "checkpointed" if t.gradient_checkpointing else "no checkpointing"
    phase.add(
        "activations", acts, f"{shape.micro_batch} x {shape.prompt_tokens + shape.completion_tokens} tokens, {ckpt}"
    )
    phase.add(
        "lm head (fused, tiled)",
        head_bytes(m, shape, trains_head=kind == "full"),
        f"TRL's chunked head: {min(HEAD_TOKEN_TILE, shape.micro_batch * shape.completion_tokens)} x "
        f"{min(m.vocab, HEAD_VOCAB_TILE)} tiles over {shape.micro_batch} x {shape.completion_tokens} completion tokens",
    )
    if not t.use_vllm:
        # transformers' generate: the device's whole generation batch at once, its KV cache
        # beside the weights (before the loss's activations exist, so a phase of its own)
        gen = Phase("train generation (transformers)", p.gpu_gib)
        gen.terms = [x for x in phase.terms if x.name not in ("activations", "lm head (fused, tiled)")]
        local = t.per_device_train_batch_size * t.gradient_accumulation_steps
        seq = p.prompt_tokens + t.max_completion_length
        gen.add("generation kv cache", local * seq * m.kv_bytes_per_token(compute), f"{local} sequences of {seq}")
        p.phases.append(gen)
    if t.use_vllm and t.vllm_mode == "colocate":
        max_len = colocated_context(t, m, p.prompt_tokens)
        if max_len == m.max_position and not _has(t, "vllm_max_model_length"):
            p.notes.append(f"this evoenv passes TRL no vllm_max_model_length: the colocated engine takes {max_len}")
        util = t.vllm_gpu_memory_utilization
        share = util * p.gpu_gib * GIB
        before = len(p.problems)
        _engine(Phase("scratch", 0), p, "train (colocated vllm)", m, util, t.vllm_tensor_parallel_size, int(max_len), 2)
        phase.add("colocated vllm share", share, f"vllm_gpu_memory_utilization {util:g}")
        if len(p.problems) > before:
            p.problems[-1].detail += " (train.vllm_gpu_memory_utilization, train.vllm_max_model_length)"
    generation = t.per_device_train_batch_size * procs * t.gradient_accumulation_steps
    if generation % t.num_generations:
        p.problems.append(
            Problem(
                "train: batch",
                f"TRL's generation batch per_device_train_batch_size {t.per_device_train_batch_size} x "
                f"{procs} processes x gradient_accumulation_steps {t.gradient_accumulation_steps} = {generation} "
                f"is not divisible by num_generations {t.num_generations} (TRL refuses at start)",
            )
        )
    p.phases.append(phase)


def _cluster(p: Plan, recipe) -> None:
    """What each phase asks of a Ray cluster (iterate.cluster: ray): the nodes, and the GPU
    memory each of those nodes holds (the phase's per-GPU total times the GPUs it uses there)."""
    if recipe.iterate.cluster != "ray":
        if p.nodes > 1:
            p.notes.append(f"{p.nodes} nodes given, but iterate.cluster is not ray: the loop runs on one machine")
        return
    for phase in p.phases:
        if phase.name.startswith("train ("):
            procs = train_processes(recipe, p.gpus)
            asked = -(-procs // p.gpus)
            per_node = min(procs, p.gpus)
            p.cluster.append(
                f"train: {procs} Ray Train workers on {asked} of {p.nodes} nodes, {per_node} GPUs each: "
                f"{phase.total_gib * per_node:.1f} GiB of GPU memory per node ({phase.total_gib:.1f} per GPU)"
            )
        elif phase.name.startswith("llm stages"):
            b = recipe.backend
            used = min(p.gpus, len(b.gpus) or p.gpus) if b.kind == "vllm_server" else b.tensor_parallel_size
            total = b.data_parallel_size * b.tensor_parallel_size if b.kind == "vllm_server" else 0
            if total > used:  # vLLM's Ray data parallelism: the other ranks on other nodes
                asked = -(-total // p.gpus)
                if asked > p.nodes:
                    p.problems.append(
                        Problem(
                            "backend.data_parallel_size",
                            f"{b.data_parallel_size} engines x {b.tensor_parallel_size} GPUs = {total} GPUs; "
                            f"{p.nodes} nodes x {p.gpus} hold {p.nodes * p.gpus}",
                        )
                    )
                p.cluster.append(
                    f"llm stages: {asked} nodes, {b.data_parallel_size} vllm engines (Ray data parallel): "
                    f"{phase.total_gib * min(total, p.gpus):.1f} GiB of GPU memory per full node "
                    f"({phase.total_gib:.1f} per GPU)"
                )
            else:
                p.cluster.append(
                    f"llm stages: 1 node, the {b.kind} engine on {used} of its GPUs: "
                    f"{phase.total_gib * used:.1f} GiB of GPU memory on it ({phase.total_gib:.1f} per GPU)"
                )
    p.cluster.append(
        f"sandboxed work (validate, calibrate, evaluate, rewards): every node, {recipe.runtime.workers} "
        "sandbox workers each on its CPUs, no GPU"
    )


def _stage_budgets(recipe) -> dict[str, int]:
    return {
        "synthesize.max_tokens": recipe.synthesize.max_tokens,
        "review.max_tokens": recipe.review.max_tokens,
        "calibrate.max_tokens": recipe.calibrate.max_tokens,
        "evaluate.max_tokens": recipe.evaluate.max_tokens,
        "train.max_completion_length": recipe.train.max_completion_length,
    }


def _contexts(p: Plan, recipe, m: ModelShape) -> None:
    """Every stage's output budget plus a prompt fits the model and the engine that serves it."""
    b = recipe.backend
    engine = (
        backend_context(b, m, _stage_budgets(recipe), p.prompt_tokens) if b.kind in ("vllm", "vllm_server") else None
    )
    colocated = colocated_context(recipe.train, m, p.prompt_tokens)
    for key, budget in _stage_budgets(recipe).items():
        need = budget + p.prompt_tokens
        limits = [("the model's context", m.max_position)]
        if key.startswith("train") and recipe.train.use_vllm and colocated:
            limits.append(("train.vllm_max_model_length", int(colocated)))
        elif not key.startswith("train") and engine:
            limits.append(("backend max_model_len", int(engine)))
        for what, limit in limits:
            if need > limit:
                p.problems.append(
                    Problem(
                        key,
                        f"{budget} output tokens + a {p.prompt_tokens}-token prompt exceed {what} ({limit})",
                    )
                )
                break  # the tightest is enough to name


def _disk(p: Plan, recipe, m: ModelShape) -> None:
    """What one round writes that is large: the trainer's checkpoints (save_total_limit kept,
    each the weights and, for full fine-tuning, the optimizer state; the loop deletes them once
    the round's training is done) and the final model, which stays."""
    t = recipe.train
    w = 4 if t.bf16 is False else 2
    steps = t.max_steps if t.max_steps > 0 else None
    kept = min(t.save_total_limit, (steps // t.save_steps) if steps else t.save_total_limit)
    if t.lora:
        adapter = m.lora_params(t.lora_r) * 4 * 3  # adapter weights + AdamW m and v, fp32
        ckpt, final = adapter, m.lora_params(t.lora_r) * 4
        if t.merge_lora:
            final += m.params * 2
        p.disk_notes.append(f"{kept} adapter checkpoints of {ckpt / 1e9:.2f} GB")
    else:
        sharded = _stage_of(_sharding_of_file(str(_setting(t, "accelerate_config", default=""))) or "none")
        # weights + AdamW's two moments; DeepSpeed and FSDP keep fp32 master weights beside them
        ckpt = m.params * (w + (12 if sharded else 8))
        final = m.params * w
        p.disk_notes.append(f"{kept} checkpoints of {ckpt / 1e9:.1f} GB (weights + optimizer)")
    p.disk_notes.append(f"final model {final / 1e9:.1f} GB")
    p.disk_gb_peak = (kept * ckpt + final) / 1e9
    p.disk_gb_per_round = final / 1e9


__all__ = [
    "KNOWN_MODELS",
    "ModelShape",
    "Plan",
    "TrainShape",
    "activation_bytes",
    "head_bytes",
    "launch_settings",
    "model_shape",
    "plan",
    "plan_recipe",
    "stated_hardware",
    "zero_model_states",
    "zero_paper_figure",
]


def visible_gpus() -> tuple[int, float] | None:
    """(count, GB each) of this machine's GPUs from nvidia-smi (no torch import, no CUDA
    context); None where there is none."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    mib = [float(x) for x in out.split() if x.replace(".", "", 1).isdigit()]
    if not mib:
        return None
    # the plan takes a card's label in GB and reads 0.98 of it as usable: give it back the label
    return len(mib), min(mib) / 1024 / USABLE_PER_GB


def preflight(recipe_path: str | Path, model: str, note) -> None:
    """`iterate`'s check before anything loads, for a recipe that states its hardware: on this
    machine's GPUs where nvidia-smi sees some, else on the stated ones. An InputError naming the
    failing term when it does not fit; a model whose shape is unknown is said and let through."""
    stated = stated_hardware(recipe_path)
    if stated is None:
        return
    here = visible_gpus()
    gpus, gb = here or stated
    try:
        result = plan(recipe_path, model, gpus, gb)
    except InputError as exc:
        if "not in the plan's table" in str(exc):
            note(f"plan: skipped ({exc})")
            return
        raise
    if not result.fits:
        raise InputError(result.refusal() + " (iterate --no-plan skips this check)")
    where = "this machine's" if here else "the recipe's stated"
    note(f"plan: {recipe_path} fits {where} {gpus} x {gb:.0f} GB (evoenv plan {recipe_path} shows the terms)")
