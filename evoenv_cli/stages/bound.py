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
from evoenv_cli.stages import distill, train
from evoenv_cli.training import answering, precision, quantize
from evoenv_cli.training.answering import NOISE_RULE, noise_seed

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
    if not (library.root / artifacts.INDEX).is_file():
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
        dtype=precision.resolved_dtype(cfg.dtype, cfg.device),
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
    for name in (distill.MANIFEST, train.MARKER):
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
    load = functools.partial(load_policy, policy, code.dtype, code.device)
    texts = answering.answer(load, [r["prompt"] for r in rows], code, code.batch_size or batch_size, items)
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
