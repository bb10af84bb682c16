"""Which dtype `train` loads the policy in, and which recipe combinations it refuses, decided
before anything loads: the same rules for `train` (as its launcher set it up) and `evoenv plan`
(as the recipe asks), so the plan charges the bytes training will hold.
"""

from __future__ import annotations

import os

from evoenv_cli.config import TrainConfig
from evoenv_cli.errors import InputError

# TRL issue #6688 (PEFT's real merge_adapter/unmerge_adapter on a bf16 Linear): after 100 sync
# cycles the base drifts by 0.28 x its mean weight magnitude, after 1000 by 0.67 x; in float32
# it stays flat at 1.7e-7 x (rounding).
DRIFT_SOURCE = "TRL issue #6688: bf16 merge/unmerge drifts 0.28 x the mean weight in 100 syncs; fp32 stays flat"


# The CPU feature under which bfloat16 is the faster arithmetic here: AMX's bfloat16 tiles
# (torch.cpu's name). Without AMX, bfloat16 was slower than float32 wherever measured:
# - an AMD EPYC with AVX2 alone (2026-12-07, one thread): a 64x576 by 576x1536 product 4.4 ms in
#   float32, 32.5 ms in bfloat16; the starter model's 24 tokens for 32 prompts 11.2 s, 61.2 s;
# - a Xeon with AVX512-BF16 and no AMX (2026-12-06): one GRPO step of the starter model under
#   bfloat16 autocast 101 s, in float32 60 s (tests/llm/test_starter_model.py).
NATIVE_BF16_FEATURES = ("amx_bf16",)


def native_bf16(device: str = "cpu") -> bool:
    """Whether `device` ("cpu" or "cuda") computes in bfloat16 faster than in float32: a CUDA
    device that supports it, or a CPU with AMX (NATIVE_BF16_FEATURES)."""
    import torch

    if device == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    capabilities = torch.cpu.get_capabilities()
    return any(capabilities.get(name) is True for name in NATIVE_BF16_FEATURES)


def resolved_dtype(dtype: str, device: str = "cpu") -> str:
    """A requested dtype with "auto" resolved: bfloat16 where `device` runs it natively
    (`native_bf16`), float32 elsewhere; any other value as given."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if native_bf16(device) else "float32"


def trains_in_bf16(setting: bool | str | None, on_gpu: bool) -> bool:
    """train.bf16 / distill.bf16 as TRL's `bf16`: None on GPUs only; "auto" where the device
    computes in bfloat16 natively; true or false as given."""
    if setting is None:
        return on_gpu
    if setting == "auto":
        return native_bf16("cuda" if on_gpu else "cpu")
    return bool(setting)


def adapter_kind(cfg: TrainConfig) -> str:
    """What `train` trains: "tinylora", "lora" or "full" (all weights)."""
    return "tinylora" if cfg.adapter == "tinylora" else "lora" if cfg.lora else "full"


def launched_sharding() -> tuple[str, int | None]:
    """("deepspeed" | "fsdp" | "", ZeRO stage) as `accelerate launch` tells the processes it
    starts (its ACCELERATE_USE_* environment); ("", None) for one process or plain DDP."""
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        stage = os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", "")
        return "deepspeed", int(stage) if stage.isdigit() else None
    if os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        return "fsdp", None
    return "", None


def weights_dtype(cfg: TrainConfig, on_gpu: bool, bf16: bool, sharding: str) -> str:
    """The dtype the policy's weights load in. `sharding`: "deepspeed", "fsdp" or "" (one
    process or DDP).

    - off the GPU, or with bf16 off: float32;
    - under DeepSpeed: bfloat16; its bf16 optimizer keeps an fp32 master copy of every weight
      it trains (and casts the module to bf16 whatever it was loaded in);
    - full fine-tuning otherwise: float32, computed in bf16 by the trainer's autocast: AdamW's
      steps at learning rates near 1e-6 are below bf16's resolution (8 bits of mantissa: a
      weight of 0.02 moves only by 1.2e-4 or more), so pure-bf16 weights barely change; FSDP2
      then shards these fp32 masters and computes in bf16 (accelerate's MixedPrecisionPolicy);
    - an adapter synced to vLLM (colocate or server): float32; TRL merges the adapter into the
      base and unmerges it in place at every sync, and in bf16 the rounding accumulates
      (DRIFT_SOURCE); the frozen base costs twice the bytes instead;
    - an adapter without vLLM: bfloat16; the base is never written (PEFT keeps the adapter
      in fp32), and the one merge at save is a single rounding."""
    if not (on_gpu and bf16):
        return "float32"
    if sharding == "deepspeed":
        return "bfloat16"
    if adapter_kind(cfg) == "full" or cfg.use_vllm:
        return "float32"
    return "bfloat16"


def refusal(cfg: TrainConfig, sharding: str, zero_stage: int | None) -> str | None:
    """Why this combination cannot be made correct here (one line naming the setting and the
    fix), or None. `zero_stage`: DeepSpeed's stage when `sharding` is "deepspeed"."""
    kind = adapter_kind(cfg)
    if kind == "full":
        return None
    setting = "train.adapter: tinylora" if kind == "tinylora" else "train.lora: true"
    if sharding == "fsdp" or (sharding == "deepspeed" and (zero_stage is None or zero_stage >= 3)):
        where = "FSDP" if sharding == "fsdp" else "DeepSpeed ZeRO-3"
        return (
            f"{setting} under {where}: every rank holds only a shard of the base, so TinyLoRA's SVD and the merge "
            "into train/merged would see partial weights; an adapter's frozen base fits one GPU: train it with plain "
            "DDP (leave train.accelerate_config empty) or zero2"
        )
    if sharding == "deepspeed" and cfg.use_vllm:
        return (
            f"{setting} with train.use_vllm under DeepSpeed ZeRO-{zero_stage}: DeepSpeed holds the frozen base in "
            "bf16 and TRL merges and unmerges the adapter into it at every sync, which drifts (TRL issue #6688); "
            "leave train.accelerate_config empty (plain DDP loads the base in float32)"
        )
    return None


def check(cfg: TrainConfig, sharding: str, zero_stage: int | None) -> None:
    """An InputError with `refusal`'s line, where there is one."""
    problem = refusal(cfg, sharding, zero_stage)
    if problem:
        raise InputError(problem)
