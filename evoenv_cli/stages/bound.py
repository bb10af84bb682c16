"""`evoenv bound-code` and `evoenv bound`: a compression (Occam) bound on a policy's error over
fresh instances of a library's environments, at their calibrated levels.

`bound-code` writes the code (the prior) before any training: the base model and its hash,
the adapter family and its projection seed, the quantization and hyperparameter grids, and the
rule that fixes the sample S (instance seeds, levels, Gumbel noise seeds). `bound` refuses a
checkpoint the code does not describe, draws S by that rule, answers every instance with
Gumbel-max sampling at fixed noise (each answer a deterministic function of model, instance and
noise), scores it with the environment's own `score` in the sandbox, and inverts the binomial
kl: with probability >= 1 - delta over S, for every h in the code at once,
kl(R_S(h) || R(h)) <= (L(h) ln 2 + ln(1/delta)) / n.

Why one module: the code (the prior), the rule that draws S and the bound's arithmetic must
agree to the bit; a reader checks the bound against its code in one file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from evoenv_cli import artifacts
from evoenv_cli.config import AnswerConfig, BoundConfig, RuntimeConfig, SampleConfig, TrainConfig
from evoenv_cli.errors import InputError
from evoenv_cli.training import quantize

CODE_FILE = "bound-code.json"
# the base model's answers on S, beside the code (deterministic, so kept), one file per way of
# answering: codes that differ only in the adapter family or the grids share it
BASE_FILE = "bound-base-{}.json"
# what the base model's answers on S do not depend on
NOT_ANSWERING = ("written", "base_model", "adapter", "quantization", "grid", "grid_size", "delta")
FORM = "kl-inverse (Langford-Seeger) Occam bound"
MODEL_FILES = ("config.json", "*.safetensors", "*.bin")


# -- the arithmetic ------------------------------------------------------------------------------
def kl_bernoulli(q: float, p: float) -> float:
    """kl(q || p) between Bernoulli(q) and Bernoulli(p), in nats."""
    eps = 1e-300
    out = 0.0
    if q > 0:
        out += q * math.log(q / max(p, eps))
    if q < 1:
        out += (1 - q) * math.log((1 - q) / max(1 - p, eps))
    return out


def kl_inverse(q: float, c: float, iterations: int = 200) -> float:
    """max{p in [q, 1] : kl(q || p) <= c}, by bisection."""
    if c <= 0:
        return q
    lo, hi = q, 1.0
    if kl_bernoulli(q, hi) <= c:
        return 1.0
    for _ in range(iterations):
        mid = (lo + hi) / 2
        if kl_bernoulli(q, mid) <= c:
            lo = mid
        else:
            hi = mid
    return hi


def occam_complexity(bits: float, n: int, delta: float) -> float:
    """(L ln 2 + ln(1/delta)) / n: the kl budget the union bound over the code allows."""
    return (bits * math.log(2) + math.log(1 / delta)) / n


def risk_bound(errors: int, n: int, bits: float, delta: float) -> float:
    """The upper bound on the true error rate: kl^-1(errors/n, complexity)."""
    return kl_inverse(errors / n, occam_complexity(bits, n, delta))


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion k/n."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, centre - half), min(1.0, centre + half))


# -- the code, fixed before S --------------------------------------------------------------------
def model_hash(path: Path) -> str:
    """sha256 over a model folder's config and weight files (names and bytes)."""
    h = hashlib.sha256()
    files = sorted({f for pattern in MODEL_FILES for f in path.glob(pattern) if f.is_file()})
    if not files:
        raise InputError(f"{path}: no model files to hash (config.json, *.safetensors)")
    for f in files:
        h.update(f.name.encode() + b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


@dataclass
class BoundCode:
    """Everything the bound's prior fixes, written before training and before S is drawn."""

    base_model: str
    base_model_sha256: str
    adapter: dict  # the family: kind, r, weight_tying, projection_seed, target_modules
    quantization: dict  # bits allowed (the grid's), the scale table's size
    grid: dict[str, list]
    grid_size: int
    envs: list[str]  # env_ids of the library S is drawn from
    levels: dict[str, list[int]]  # env name -> calibrated levels
    n: int
    per_env: int
    delta: float
    temperature: float
    max_tokens: int
    threshold: float
    seed: int
    seed_rule: str
    noise_rule: str
    answer: dict
    demonstrations: int
    written: str = ""
    # how the policy answers S: its dtype and batch size (both move answers by rounding, so
    # both are fixed with the code); codes written before these were recorded answered in
    # float32 at the recipe's batch size (0)
    dtype: str = "float32"
    batch_size: int = 0
    device: str = "cpu"
    # how prompts share a forward pass (gumbel_answers): "shared-context" (BATCHING_RULE) in codes
    # written since it was recorded; older codes answered "padded" and still do
    batching: str = "padded"

    def _recorded(self) -> dict:
        """The fields as hashed: a code from before `batching` was recorded hashes as it did."""
        fields = asdict(self)
        if fields["batching"] == "padded":
            del fields["batching"]
        return fields

    def digest(self) -> str:
        return artifacts.config_hash({k: v for k, v in self._recorded().items() if k != "written"})

    def answering_digest(self) -> str:
        """The hash of what decides the base model's correct answers on S: the base model's
        bytes, S's rules, the sampling, the dtype, batch size, batching and device, the threshold."""
        return artifacts.config_hash({k: v for k, v in self._recorded().items() if k not in NOT_ANSWERING})


SEED_RULE = (
    "instance i of an environment: seed = instance_seed(seed, NAME, i, 'heldout') (sha256, bit 31 set), "
    "level = levels[i * len(levels) // per_env] (each level about equally often, in blocks, low to high), "
    "i = 0..per_env-1"
)
NOISE_RULE = (
    "item j of S (in order): a torch.Generator seeded with sha256('seed:noise:j'); the t-th token is "
    "argmax(logits/T + G_t), G_t = -log(-log(U_t)), U_t the generator's t-th uniform vector"
)


def library_levels(library: artifacts.EnvLibrary) -> dict[str, list[int]]:
    from evoenv_cli.conversations import levels_for

    cfg = SampleConfig(difficulty_from="index")
    return {e.name: list(levels_for(e, library, cfg)) for e in library.files}


def write_code(
    out: Path,
    library: artifacts.EnvLibrary,
    base_model: str,
    cfg: BoundConfig,
    train: TrainConfig,
    answer: AnswerConfig,
    demonstrations: int,
) -> BoundCode:
    """Record the code at OUT (refusing to replace one: the code must not move after S)."""
    if out.exists():
        raise InputError(f"{out}: a bound code is already recorded; it must not change once written")
    if not (library.root / "index.jsonl").is_file():
        raise InputError(f"{library.root}: no index.jsonl (S is drawn at the library's calibrated levels)")
    base = Path(base_model)
    if not base.is_dir():
        raise InputError(f"{base_model}: the base model must be a local folder (its bytes are hashed)")
    bad = [b for b in cfg.grid.get("bits", [cfg.bits]) if not (isinstance(b, int) and 1 <= b <= 16)]
    if bad or cfg.bits not in cfg.grid.get("bits", [cfg.bits]):
        raise InputError(f"bound.bits {cfg.bits} must be one of bound.grid.bits {cfg.grid.get('bits')}")
    envs = sorted(e.env_id for e in library.files)
    per_env = max(1, cfg.n // max(1, len(envs)))
    code = BoundCode(
        base_model=str(base.resolve()),
        base_model_sha256=model_hash(base),
        adapter={
            "kind": "tinylora",
            "r": train.tinylora_r,
            "weight_tying": train.tinylora_weight_tying,
            "projection_seed": train.tinylora_projection_seed,
            "target_modules": train.lora_target_modules,
        },
        quantization={"bits": list(cfg.grid.get("bits", [cfg.bits])), "scales": len(quantize.SCALES)},
        grid=cfg.grid,
        grid_size=quantize.grid_size(cfg.grid),
        envs=envs,
        levels=library_levels(library),
        n=per_env * len(envs),
        per_env=per_env,
        delta=cfg.delta,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        threshold=cfg.threshold,
        seed=cfg.seed,
        seed_rule=SEED_RULE,
        noise_rule=NOISE_RULE,
        answer=asdict(answer),
        demonstrations=demonstrations,
        written=artifacts.now_iso(),
        dtype=cfg.dtype,
        batch_size=cfg.batch_size,
        device=cfg.device,
        batching=cfg.batching,
    )
    artifacts.write_json_atomic(out, {**asdict(code), "code_sha256": code.digest()})
    return code


def read_code(path: Path) -> BoundCode:
    try:
        data = json.loads(path.read_text())
        data.pop("code_sha256", None)
        return BoundCode(**data)
    except (OSError, ValueError, TypeError) as exc:
        raise InputError(f"{path}: not a bound code written by `evoenv bound-code` ({exc})") from None


def find_code(checkpoint: Path) -> Path:
    """bound-code.json in the checkpoint's folder or the nearest folder above it."""
    for d in [checkpoint, *checkpoint.resolve().parents]:
        if (d / CODE_FILE).is_file():
            return d / CODE_FILE
    raise InputError(f"{checkpoint}: no {CODE_FILE} here or above (write one with `evoenv bound-code` before training)")


# -- the hypothesis: what a checkpoint is and what it costs --------------------------------------
@dataclass
class Policy:
    """A checkpoint as the bound sees it: how to load it and its description length."""

    path: Path
    kind: str  # base | tinylora-quantized | tinylora | lora | full
    base_model: str
    adapter: Path | None
    trained_parameters: int
    bits: dict = field(default_factory=dict)  # a quantize.DescriptionLength as a dict


def _manifest(path: Path) -> dict:
    for name in ("distill-manifest.json", "train-manifest.json"):
        if (path / name).is_file():
            return json.loads((path / name).read_text())
    return {}


def _stored_bits(path: Path) -> int:
    """Bits per stored value of a checkpoint's weights, read from the file, not assumed."""
    from safetensors import safe_open

    files = sorted(path.glob("*.safetensors"))
    with safe_open(str(files[0]), "pt") as f:
        key = next(iter(f.keys()))
        return 16 if f.get_slice(key).get_dtype() in ("BF16", "F16") else 32


def describe(checkpoint: Path, code: BoundCode) -> Policy:
    """The checkpoint's place in the code, or an InputError saying how it differs from it."""
    where = f"{checkpoint}:"
    if (checkpoint / quantize.QUANTIZED_FILE).is_file():
        q = json.loads((checkpoint / quantize.QUANTIZED_FILE).read_text())
        problems = []
        for key in ("r", "weight_tying", "projection_seed"):
            if q.get(key) != code.adapter[key]:
                problems.append(f"{key} {q.get(key)} (the code records {code.adapter[key]})")
        if q["bits"] not in code.quantization["bits"]:
            problems.append(f"{q['bits']} bits (the code's grid: {code.quantization['bits']})")
        for name, value in {"u": q.get("u"), **q.get("hyperparameters", {})}.items():
            if name in code.grid and value not in code.grid[name]:
                problems.append(f"{name} {value} (the code's grid: {code.grid[name]})")
        if problems:
            raise InputError(f"{where} its code differs from the one recorded before S: {'; '.join(problems)}")
        dl = quantize.description_length(len(q["codes"]), q["bits"], code.grid, math.log2(code.quantization["scales"]))
        policy = Policy(checkpoint, "tinylora-quantized", q["base_model"], checkpoint, len(q["codes"]), asdict(dl))
    elif (checkpoint / "adapter_config.json").is_file():
        cfg = json.loads((checkpoint / "adapter_config.json").read_text())
        kind = "tinylora" if cfg.get("peft_type") == "TINYLORA" else "lora"
        params = _manifest(checkpoint).get("summary", {}).get("trained_parameters")
        if not isinstance(params, int):
            raise InputError(f"{where} no trained_parameters in its manifest (train or distill it with this evoenv)")
        if kind == "tinylora" and cfg.get("projection_seed") != code.adapter["projection_seed"]:
            raise InputError(
                f"{where} its code differs from the one recorded before S: projection_seed "
                f"{cfg.get('projection_seed')} (the code records {code.adapter['projection_seed']})"
            )
        dl = quantize.description_length(params, _stored_bits(checkpoint), code.grid, 0.0)
        policy = Policy(checkpoint, kind, cfg.get("base_model_name_or_path") or "", checkpoint, params, asdict(dl))
    elif (checkpoint / "config.json").is_file():
        digest = model_hash(checkpoint)
        if digest == code.base_model_sha256:
            dl = quantize.description_length(0, 0, {}, 0.0)
            return Policy(checkpoint, "base", str(checkpoint), None, 0, asdict(dl))
        base = _manifest(checkpoint).get("inputs", {}).get("model")
        if not base:
            raise InputError(f"{where} a full model that is not the code's base and has no train manifest")
        params = _manifest(checkpoint).get("summary", {}).get("trained_parameters") or 0
        dl = quantize.description_length(params, _stored_bits(checkpoint), code.grid, 0.0)
        policy = Policy(checkpoint, "full", base, None, params, asdict(dl))
    else:
        raise InputError(f"{checkpoint}: not a checkpoint (no quantized.json, adapter_config.json or config.json)")
    base = Path(policy.base_model)
    if not base.is_dir() or model_hash(base) != code.base_model_sha256:
        raise InputError(
            f"{where} its code differs from the one recorded before S: base model {policy.base_model} "
            f"does not hash to the recorded {code.base_model_sha256[:12]}"
        )
    return policy


# -- the sample and the sampled policy -----------------------------------------------------------
def draw_sample(code: BoundCode, library: artifacts.EnvLibrary, pool) -> list[dict]:
    """S by the code's rule: rows as `evoenv sample` writes them, refused if the library moved."""
    from evoenv_cli.stages import sample

    envs = sorted(e.env_id for e in library.files)
    if envs != code.envs:
        raise InputError(f"{library.root}: its environments differ from the ones the bound code records")
    if library_levels(library) != code.levels:
        raise InputError(f"{library.root}: its calibrated levels differ from the ones the bound code records")
    cfg = SampleConfig(
        per_env=code.per_env,
        seed=code.seed,
        split="heldout",
        difficulty_from="index",
        demonstrations=code.demonstrations,
    )
    report = sample.run(library, cfg, pool, AnswerConfig(**code.answer))
    if report.skipped:
        first = report.skipped[0]
        raise InputError(f"{first['env']}: an instance of S could not be made ({first['reason']})")
    return report.rows


def noise_seed(seed: int, item: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:noise:{item}".encode()).digest()[:8], "big") >> 1


def load_policy(policy: Policy, dtype: str = "float32", device: str = "cpu"):
    """(model, tokenizer) in `dtype` on `device`, in eval mode; an adapter is merged into its
    base in float32 on the CPU first, then the merged weights are cast and moved."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = policy.path if policy.kind in ("base", "full") else Path(policy.base_model)
    model = AutoModelForCausalLM.from_pretrained(str(source), dtype=torch.float32)
    if policy.adapter is not None:
        from peft import PeftModel

        from evoenv_cli.stages.train import checkpointing_noise_silenced

        with checkpointing_noise_silenced():  # PEFT asks through a name transformers 5 deprecates
            model = PeftModel.from_pretrained(model, str(policy.adapter)).merge_and_unload()
    model = model.to(device=device, dtype=getattr(torch, dtype))
    tokenizer = AutoTokenizer.from_pretrained(str(source), padding_side="left")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.eval()
    return model, tokenizer


def _perturbed(scores, generators: list, temperature: float):
    """float32 logits [rows, vocab] -> logits/T + G in float32, G drawn from each row's own
    generator (NOISE_RULE) on the CPU whatever the device, then moved to the logits. Row by row,
    in place in buffers of one row: the same float64 operations in the same order (bit for bit
    the values the rule names, tested against the whole-matrix form), a row's values never
    computed beside another row's, and each pass over a row that stays in cache (2.4x cheaper
    than the same passes over [rows, vocab])."""
    import torch

    vocab = scores.shape[-1]
    out = torch.empty_like(scores)
    noise = torch.empty(vocab, dtype=torch.float64)
    value = torch.empty(vocab, dtype=torch.float64, device=scores.device)
    for row, g, dst in zip(scores, generators, out):
        torch.rand(vocab, generator=g, dtype=torch.float64, out=noise)
        gumbel = noise.clamp_(min=1e-300).log_().neg_().log_().neg_()
        dst.copy_(value.copy_(row).div_(temperature).add_(gumbel.to(scores.device)))
    return out


def _eos_ids(model, tokenizer) -> set[int]:
    eos = model.generation_config.eos_token_id
    eos = tokenizer.eos_token_id if eos is None else eos
    return set(eos) if isinstance(eos, list) else {eos}


def _chat_text(tokenizer, prompt) -> str:
    if isinstance(prompt, list):
        return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    return prompt


def gumbel_answers(
    model, tokenizer, prompts: list, code: BoundCode, batch_size: int, items: list[int] | None = None
) -> list[str]:
    """Each prompt answered by Gumbel-max sampling at temperature T: token t of item j is
    argmax(logits/T + G), G drawn from item j's own generator (see NOISE_RULE). `items` are the
    prompts' positions in S (default 0, 1, ...): they name each one's noise. How the prompts
    share a forward pass is the code's `batching`: "shared-context" (codes written since it
    was recorded) makes each answer a function of (model, instance, noise) alone, whatever else is
    answered with it; "padded" is how older codes answered, and still answer."""
    items = list(range(len(prompts))) if items is None else items
    if getattr(code, "batching", "shared-context") == "padded":
        return _padded_answers(model, tokenizer, prompts, code, batch_size, items)
    return _shared_context_answers(model, tokenizer, prompts, code, batch_size, items)


def _padded_answers(model, tokenizer, prompts: list, code, batch_size: int, items: list[int]) -> list[str]:
    """The old answering ("padded"): HF `generate` on S's prompts in order, batch_size at a
    time, left-padded to the longest in the batch. Padding moves the rounding of the real
    tokens, so an answer also depends on which prompts shared its batch."""
    import torch
    from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList

    class GumbelNoise(LogitsProcessor):
        def __init__(self, items: list[int]):
            self.generators = [torch.Generator().manual_seed(noise_seed(code.seed, j)) for j in items]

        def __call__(self, input_ids, scores):
            return _perturbed(scores, self.generators, code.temperature)

    gen = GenerationConfig(
        max_new_tokens=code.max_tokens,
        do_sample=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=model.generation_config.eos_token_id or tokenizer.eos_token_id,
    )
    out: list[str] = []
    for start in range(0, len(prompts), batch_size):
        chunk = prompts[start : start + batch_size]
        texts = [_chat_text(tokenizer, p) for p in chunk]
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
        processors = LogitsProcessorList([GumbelNoise(items[start : start + len(chunk)])])
        with torch.no_grad():
            ids = model.generate(**enc, generation_config=gen, logits_processor=processors)
        new = ids[:, enc["input_ids"].shape[1] :]
        out += tokenizer.batch_decode(new, skip_special_tokens=True)
    return out


BATCHING_RULE = (
    "shared-context: a prompt is read in two parts, its context (the tokens it shares with its "
    "conversation less the last turn: the system turn and the demonstrations) and its question (the "
    "rest). Contexts of one length are read R rows a forward (R = min(batch_size, 8)), each distinct "
    "context once; questions whose context and question lengths are both equal are read on their "
    "contexts' keys and values, R rows a forward, in S's order; a read short of R rows is filled "
    "with copies of its first. Each answer is then decoded one token a step in one of batch_size "
    "slots, every step [batch_size, 1], attending to its own keys and values over a span fixed by "
    "its own length (context + question + max_tokens, rounded up to 32), masked past its length; a "
    "slot freed by an answer that ends takes the next read's. No padding and no shape that depends "
    "on another item: the arithmetic on an item's row is the same whatever shares its forward; a "
    "row stops at its first end-of-sequence token or max_tokens"
)
READ_ROWS = 8  # rows a read forward (at most batch_size): the per-token cost of a read is flat from 8 up
SPAN = 32  # a slot's keys and values span its length + max_tokens, rounded up to this


def _split(tokenizer, prompt) -> tuple[tuple[int, ...], list[int]]:
    """A prompt's tokens as (context, question): the context is the longest prefix its tokens
    share with its conversation less the last turn (none for a single turn or a plain string);
    the question keeps at least one token."""
    ids = tokenizer(_chat_text(tokenizer, prompt), add_special_tokens=False)["input_ids"]
    if not isinstance(prompt, list) or len(prompt) < 2:
        return (), ids
    before = tokenizer(tokenizer.apply_chat_template(prompt[:-1], tokenize=False), add_special_tokens=False)[
        "input_ids"
    ]
    k = 0
    while k < min(len(before), len(ids) - 1) and ids[k] == before[k]:
        k += 1
    return tuple(ids[:k]), ids[k:]


def _shared_context_answers(model, tokenizer, prompts: list, code, batch_size: int, items: list[int]) -> list[str]:
    """BATCHING_RULE: the prompts of one span at a time, decoded in slots as their reads come."""
    split = [_split(tokenizer, p) for p in prompts]
    spans: dict[int, list[int]] = {}
    for k, (context, question) in enumerate(split):
        span = -(-(len(context) + len(question) + code.max_tokens) // SPAN) * SPAN
        spans.setdefault(span, []).append(k)
    eos = _eos_ids(model, tokenizer)
    answers: list[list[int]] = [[] for _ in prompts]
    for span, members in spans.items():
        reads = _reads(model, split, members, min(batch_size, READ_ROWS))
        _decode_in_slots(model, reads, items, code, batch_size, span, eos, answers)
    return [tokenizer.decode(tokens, skip_special_tokens=True) for tokens in answers]


CONTEXT_BYTES = 1 << 30  # contexts' keys and values held at once (about 540 of the starter bench's)


def _kv_bytes(model, length: int) -> int:
    """Bytes of one context's keys and values: layers x 2 x kv heads x length x head dim."""
    config = model.config.get_text_config()
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    itemsize = next(model.parameters()).element_size()
    return config.num_hidden_layers * 2 * heads * length * head_dim * itemsize


def _windows(members: list[int], contexts: list, limit: int):
    """`members` in order, cut so that no part holds more than `limit` distinct contexts."""
    part: list[int] = []
    seen: set = set()
    for k, context in zip(members, contexts):
        if context not in seen and len(seen) == limit:
            yield part
            part, seen = [], set()
        part.append(k)
        seen.add(context)
    if part:
        yield part


def _fill(rows: list, shape: int) -> list:
    """`rows` made `shape` long with copies of the first."""
    return rows + [rows[0]] * (shape - len(rows))


def _read_contexts(model, contexts: list[tuple[int, ...]], shape: int):
    """The keys and values of contexts of one length, read `shape` rows a forward: per layer,
    a (keys, values) pair of [contexts, kv heads, length, head dim]; None for the empty context."""
    import torch
    from transformers.cache_utils import Cache

    if not contexts[0]:
        return None
    layers = model.config.get_text_config().num_hidden_layers
    store = None
    with torch.no_grad():
        for start in range(0, len(contexts), shape):
            chunk = contexts[start : start + shape]
            cache = Cache(layers=[_kv_buffer_class()(len(chunk[0])) for _ in range(layers)])
            x = torch.tensor(_fill(chunk, shape), device=model.device)
            model(input_ids=x, cache=cache, use_cache=True, logits_to_keep=1)
            if store is None:
                store = [
                    tuple(t.new_empty(len(contexts), *t.shape[1:]) for t in (layer.keys, layer.values))
                    for layer in cache.layers
                ]
            for (keys, values), layer in zip(store, cache.layers):
                keys[start : start + len(chunk)] = layer.keys[: len(chunk)]
                values[start : start + len(chunk)] = layer.values[: len(chunk)]
    return store


def _reads(model, split: list, members: list[int], shape: int):
    """The questions of `members` read on their contexts, `shape` rows a forward (BATCHING_RULE):
    yields (prompt indices, their last logits in float32, per layer their keys and values of
    [rows, kv heads, context + question, head dim]). One context length at a time, its prompts in
    windows of at most CONTEXT_BYTES of contexts' keys and values. Windows decide only which reads
    are shared, never an answer: a context read in two windows has the same keys and values."""
    import torch
    from transformers.cache_utils import Cache

    by_context: dict[int, list[int]] = {}
    for k in members:
        by_context.setdefault(len(split[k][0]), []).append(k)
    layers = model.config.get_text_config().num_hidden_layers
    for length, group in by_context.items():
        limit = max(shape, CONTEXT_BYTES // max(1, _kv_bytes(model, length)))
        for window in _windows(group, [split[k][0] for k in group], limit):
            contexts = list(dict.fromkeys(split[k][0] for k in window))
            kv = _read_contexts(model, contexts, shape)
            where = {c: i for i, c in enumerate(contexts)}
            by_question: dict[int, list[int]] = {}
            for k in window:
                by_question.setdefault(len(split[k][1]), []).append(k)
            for bucket in by_question.values():
                for start in range(0, len(bucket), shape):
                    chunk = bucket[start : start + shape]
                    questions = _fill([split[k][1] for k in chunk], shape)
                    cache = Cache(layers=[_kv_buffer_class()(length + len(questions[0])) for _ in range(layers)])
                    if kv is not None:
                        index = torch.tensor(_fill([where[split[k][0]] for k in chunk], shape), device=model.device)
                        for layer, (keys, values) in zip(cache.layers, kv):
                            layer.update(keys[index], values[index])
                    x = torch.tensor(questions, device=model.device)
                    position = torch.arange(length, length + x.shape[1], device=model.device)[None]
                    with torch.no_grad():
                        out = model(input_ids=x, position_ids=position, cache=cache, use_cache=True, logits_to_keep=1)
                    logits = out.logits[: len(chunk), -1].float()  # as `generate` takes them
                    yield chunk, logits, [(layer.keys, layer.values) for layer in cache.layers]


def _decode_in_slots(model, reads, items: list[int], code, slots: int, span: int, eos: set[int], answers: list) -> None:
    """Each read row's first token from its read's logits, the rest one token a step in one of
    `slots` rows (BATCHING_RULE), into answers[k]: its tokens up to (not including) its first EOS.
    A slot's keys and values span `span` positions; a step's mask lets each row see its own
    positions up to its own length, so a row never depends on another's length or contents."""
    import torch
    from transformers.cache_utils import Cache

    cache = None
    state: list = [None] * slots  # per slot: [prompt index, generator, tokens chosen, length, next input]
    pending = None
    positions = torch.zeros(slots, dtype=torch.long, device=model.device)
    while True:
        while sum(s is None for s in state) >= (len(pending[0]) if pending else 1):
            if pending is None:
                pending = next(reads, None)
                if pending is None:
                    break
                if sum(s is None for s in state) < len(pending[0]):
                    break
            chunk, logits, kv = pending
            pending = None
            generators = [torch.Generator().manual_seed(noise_seed(code.seed, items[k])) for k in chunk]
            chosen = _perturbed(logits, generators, code.temperature).argmax(-1).tolist()
            if cache is None:
                cache = Cache(layers=[_slot_layer_class()(keys, values, slots, span, positions) for keys, values in kv])
            length = kv[0][0].shape[2]
            free = [i for i, s in enumerate(state) if s is None]
            for r, (k, g, token) in enumerate(zip(chunk, generators, chosen)):
                if token in eos:
                    continue
                answers[k].append(token)
                if code.max_tokens == 1:
                    continue
                slot = free.pop(0)
                for layer, (keys, values) in zip(cache.layers, kv):
                    layer.keys[slot, :, :length] = keys[r]
                    layer.values[slot, :, :length] = values[r]
                state[slot] = [k, g, 1, length, token]
        live = [i for i, s in enumerate(state) if s is not None]
        if not live:
            if pending is None:
                return
            continue
        x = torch.tensor([[s[4] if s else min(eos)] for s in state], device=model.device)
        positions.copy_(torch.tensor([s[3] if s else 0 for s in state]))
        mask = torch.arange(span, device=model.device)[None, None, None, :] <= positions[:, None, None, None]
        with torch.no_grad():
            out = model(
                input_ids=x,
                position_ids=positions[:, None],
                cache=cache,
                attention_mask=mask,
                use_cache=True,
                logits_to_keep=1,
            )
        logits = out.logits[live, -1].float()
        chosen = _perturbed(logits, [state[i][1] for i in live], code.temperature).argmax(-1).tolist()
        for i, token in zip(live, chosen):
            s = state[i]
            if token in eos:
                state[i] = None
                continue
            answers[s[0]].append(token)
            s[2] += 1
            s[3] += 1
            s[4] = token
            if s[2] == code.max_tokens:
                state[i] = None


@functools.cache
def _kv_buffer_class():
    """The class, made on first use (transformers is imported only when a model answers)."""
    from transformers.cache_utils import DynamicLayer

    class KVBuffer(DynamicLayer):
        """A layer's keys and values as views of one buffer allocated for the whole answer,
        instead of a concatenation per token (a copy of the cache each step)."""

        def __init__(self, capacity: int):
            super().__init__()
            self.capacity = capacity

        def lazy_initialization(self, key_states, value_states) -> None:
            self.device = key_states.device
            b, h, _, d = key_states.shape
            self.buffers = (
                key_states.new_empty(b, h, self.capacity, d),
                value_states.new_empty(b, h, self.capacity, value_states.shape[-1]),
            )
            self.keys, self.values = (buf[:, :, :0] for buf in self.buffers)
            self.is_initialized = True

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n, m = self.keys.shape[-2], key_states.shape[-2]
            kb, vb = self.buffers
            kb[:, :, n : n + m] = key_states
            vb[:, :, n : n + m] = value_states
            self.keys, self.values = kb[:, :, : n + m], vb[:, :, : n + m]
            return self.keys, self.values

    return KVBuffer


@functools.cache
def _slot_layer_class():
    """The decode cache's layer: keys and values of [slots, kv heads, span, head dim], zeroed
    once; a step writes each row's new key and value at that row's own position."""
    from transformers.cache_utils import DynamicLayer

    class SlotLayer(DynamicLayer):
        def __init__(self, keys, values, slots: int, span: int, positions):
            super().__init__()
            self.keys = keys.new_zeros(slots, keys.shape[1], span, keys.shape[3])
            self.values = values.new_zeros(slots, values.shape[1], span, values.shape[3])
            self.positions, self.rows = positions, torch_arange(slots, keys.device)
            self.device, self.is_initialized = keys.device, True

        def update(self, key_states, value_states, *args, **kwargs):
            self.keys[self.rows, :, self.positions] = key_states[:, :, 0]
            self.values[self.rows, :, self.positions] = value_states[:, :, 0]
            return self.keys, self.values

    return SlotLayer


def torch_arange(n: int, device):
    import torch

    return torch.arange(n, device=device)


def score_answers(
    rows: list[dict], answers: list[str], code: BoundCode, library: artifacts.EnvLibrary, runtime: RuntimeConfig
) -> list[float]:
    """Each answer scored by its environment's own `score` in the sandbox (checked in the parent)."""
    from evoenv_cli.integrations.rewards import EnvReward

    reward = EnvReward(
        library.files,
        answer_tag=code.answer.get("tag", "answer"),
        sandbox=runtime.sandbox,
        workers=runtime.workers,
        limits=runtime.limits,
        recheck_share=0.0,
    )
    try:
        details = reward.details(
            answers, [r["env_id"] for r in rows], [r["instance"] for r in rows], [r.get("env_name") for r in rows]
        )
    finally:
        reward.close()
    return [float(d["score"]) for d in details]


@dataclass
class Answers:
    """A policy's answers on S, their scores, and which count as correct (score >= threshold)."""

    texts: list[str]
    scores: list[float]
    correct: list[bool]


def answer_sample(
    policy: Policy,
    rows: list[dict],
    code: BoundCode,
    library,
    runtime: RuntimeConfig,
    batch_size: int,
    items: list[int] | None = None,
) -> Answers:
    model, tokenizer = load_policy(policy, code.dtype, code.device)
    prompts = [r["prompt"] for r in rows]
    texts = gumbel_answers(model, tokenizer, prompts, code, code.batch_size or batch_size, items)
    scores = score_answers(rows, texts, code, library, runtime)
    return Answers(texts, scores, [s >= code.threshold for s in scores])


def write_samples(
    path: Path, rows: list[dict], answers: Answers, code: BoundCode, items: list[int] | None = None
) -> int:
    """One JSON line per item of S, in S's order: what was asked (environment, level, instance
    seed, the question), the noise seed, the answer, its score and whether it counts as correct;
    enough to re-score every answer or read where the policy fails. Written whole or not at all."""

    def asked(prompt) -> str:
        return prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)

    return artifacts.write_jsonl_atomic(
        path,
        (
            {
                "item": j,
                "env_id": r["env_id"],
                "env_name": r.get("env_name"),
                "difficulty": r.get("difficulty"),
                "seed": r.get("seed"),
                "noise_seed": noise_seed(code.seed, j),
                "question": asked(r["prompt"]),
                "reference": r.get("answer"),
                "answer": text,
                "score": score,
                "correct": ok,
            }
            for j, r, text, score, ok in zip(
                range(len(rows)) if items is None else items, rows, answers.texts, answers.scores, answers.correct
            )
        ),
    )


# -- the report ----------------------------------------------------------------------------------
@dataclass
class BoundReport:
    checkpoint: str
    kind: str
    form: str
    n: int
    errors: int
    empirical_error: float
    accuracy: float
    accuracy_interval: tuple[float, float]
    description_length_bits: float
    bits: dict
    trained_parameters: int
    delta: float
    temperature: float
    threshold: float
    complexity: float
    risk_bound: float
    accuracy_lower_bound: float
    base_accuracy: float
    base_accuracy_interval: tuple[float, float]
    levels: dict[str, list[int]]
    code: str
    statement: str
    # the size of the whole S the code draws; n is smaller when only the first instances of each
    # environment were answered (`bound --first K`), and the bound is then at that n
    sample_n: int = 0


RECORDS_FILE = "bounds.jsonl"  # beside the code: one line per `bound` run, read by `evoenv report`


def record(report: BoundReport, code_path: Path) -> Path:
    """Append the report as one JSON line to bounds.jsonl beside the code (earlier lines are
    never rewritten; a line torn by a kill is skipped by the reader) and return the file."""
    path = code_path.parent / RECORDS_FILE
    line = json.dumps({**asdict(report), "recorded": artifacts.now_iso()}) + "\n"
    with path.open("a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())
    return path


def statement(code: BoundCode, accuracy_lower: float) -> str:
    levels = "; ".join(f"{name} at levels {', '.join(map(str, lv))}" for name, lv in sorted(code.levels.items()))
    return (
        f"With probability >= {1 - code.delta:g} over the draw of S, the policy sampled at temperature "
        f"{code.temperature:g} (Gumbel-max, {code.dtype} on {code.device}) answers instances generate(seed, level) of {levels} correctly "
        f"(score >= {code.threshold:g}) with probability >= {accuracy_lower:.3f}. The bound covers the "
        "distribution of generate(seed, level) at those levels, sampled at that temperature; it says "
        "nothing about other environments, other levels or other temperatures."
    )


def run(
    checkpoint: Path,
    library: artifacts.EnvLibrary,
    code_path: Path,
    runtime: RuntimeConfig,
    batch_size: int,
    pool,
    samples: Path | None = None,
    first: int | None = None,
) -> BoundReport:
    code = read_code(code_path)
    if first is not None and not 1 <= first <= code.per_env:
        raise InputError(f"{code_path}: --first {first}: S holds {code.per_env} instances of each environment")
    if code.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InputError(
                f"{code_path}: the code answers on cuda (bound.device) and this machine has no CUDA device"
            )
    policy = describe(checkpoint, code)
    drawn = draw_sample(code, library, pool)
    items = prefix(drawn, first)
    rows = [drawn[j] for j in items]
    digest = code.digest()
    answering = code.answering_digest()
    base_file = code_path.parent / BASE_FILE.format(answering[:16])
    cached = json.loads(base_file.read_text()) if base_file.is_file() else {}
    mine = None  # this policy's Answers, when answered here
    if cached.get("answering_sha256") == answering and len(cached.get("correct", [])) == len(drawn):
        base_correct = [cached["correct"][j] for j in items]
        kept = (cached.get("answers", []), cached.get("scores", []))
        if policy.kind == "base" and all(len(k) == len(drawn) for k in kept):
            mine = Answers(*([k[j] for j in items] for k in kept), base_correct)
    else:
        base_correct = None
    if base_correct is None or (policy.kind == "base" and samples is not None and mine is None):
        # no cache, or one from before answers were kept in it: the base answers, and is kept
        # (a cache holds the whole S: the base's answers on a part of it are not kept)
        base = Policy(Path(code.base_model), "base", code.base_model, None, 0)
        answered = answer_sample(base, rows, code, library, runtime, batch_size, items)
        base_correct = answered.correct
        if len(rows) == len(drawn):
            artifacts.write_json_atomic(
                base_file,
                {
                    "answering_sha256": answering,
                    "correct": answered.correct,
                    "answers": answered.texts,
                    "scores": answered.scores,
                },
            )
        if policy.kind == "base":
            mine = answered
    if policy.kind != "base":
        mine = answer_sample(policy, rows, code, library, runtime, batch_size, items)
    correct = mine.correct if mine is not None else base_correct
    if samples is not None:
        write_samples(samples, rows, mine, code, items)
    n = len(rows)
    errors = n - sum(correct)
    bits = policy.bits["total"]
    bound = risk_bound(errors, n, bits, code.delta)
    return BoundReport(
        checkpoint=str(checkpoint),
        kind=policy.kind,
        form=FORM,
        n=n,
        errors=errors,
        empirical_error=errors / n,
        accuracy=1 - errors / n,
        accuracy_interval=wilson(n - errors, n),
        description_length_bits=bits,
        bits=policy.bits,
        trained_parameters=policy.trained_parameters,
        delta=code.delta,
        temperature=code.temperature,
        threshold=code.threshold,
        complexity=occam_complexity(bits, n, code.delta),
        risk_bound=bound,
        accuracy_lower_bound=1 - bound,
        base_accuracy=sum(base_correct) / n,
        base_accuracy_interval=wilson(sum(base_correct), n),
        levels=code.levels,
        code=digest,
        statement=statement(code, 1 - bound),
        sample_n=len(drawn),
    )


def prefix(rows: list[dict], first: int | None) -> list[int]:
    """The positions in S of its first `first` instances of each environment, level by level
    (all of S when None): of each level, the first instances in S's order, as many as an S of
    `first` per environment would hold at that level (the code's split of levels). Within a
    level S's instances are independent draws, so these are a sample drawn as S is drawn, of
    n = `first` per environment; fixed before S is answered, the bound holds at that n. Their
    noise is still named by their position in the whole S."""
    from collections import Counter

    from evoenv_cli.conversations import draw_levels

    if first is None:
        return list(range(len(rows)))
    quota: dict[str, Counter] = {}
    for r in rows:
        quota.setdefault(r["env_id"], Counter())[r["difficulty"]] = 0
    quota = {env: Counter(draw_levels(sorted(levels), first)) for env, levels in quota.items()}
    seen: Counter = Counter()
    items = []
    for j, r in enumerate(rows):
        seen[r["env_id"], r["difficulty"]] += 1
        if seen[r["env_id"], r["difficulty"]] <= quota[r["env_id"]][r["difficulty"]]:
            items.append(j)
    return items
