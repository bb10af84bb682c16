"""One rank of test_zero3_cpu.py: DeepSpeed ZeRO-3 over gloo on the CPU, a tiny random
Qwen3 model partitioned for real (no parameter kept whole), one AdamW step; writes what each
rank sees as JSON to OUT_DIR/rank-N.json (a file per rank: two ranks printing one line each to
the shared stdout interleaved them into one line)."""

import json
import os
from pathlib import Path

import deepspeed
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from evoenv_cli.stages.train import trained_parameters

# DeepSpeed's shared-memory collectives for CPU ranks are a C++ op it compiles with g++ on first
# use, in every new venv: 66 CPU-seconds of a fresh clone's `make test` (2026-12-07). What this
# probe reads is ZeRO-3's partitioning, which gloo carries the same, so the op is marked
# unavailable and DeepSpeed's collectives go through torch.distributed (its own fallback where
# the op cannot build). The probe of every op runs once, on first access, and is kept.
deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
deepspeed.init_distributed(dist_backend="gloo")
config = AutoConfig.for_model(
    "qwen3",
    vocab_size=256,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=128,
)
torch.manual_seed(0)
model = AutoModelForCausalLM.from_config(config)
whole = sum(p.numel() for p in model.parameters() if p.requires_grad)
ds = {
    "train_micro_batch_size_per_gpu": 1,
    # threshold 0: every parameter partitioned (the default keeps ones under 100k elements whole)
    "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0},
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}},
}
engine, *_ = deepspeed.initialize(model=model, config=ds, model_parameters=model.parameters())
ids = torch.randint(0, 256, (1, 16))
loss = engine(input_ids=ids, labels=ids).loss
engine.backward(loss)
engine.step()
local = sum(p.numel() for p in engine.module.parameters() if p.requires_grad)
linear = engine.module.model.layers[0].self_attn.q_proj.weight
out = {
    "rank": int(os.environ["RANK"]),
    "whole": whole,
    "counted": trained_parameters(engine.module),
    "local_numel": local,
    "q_proj_local_shape": list(linear.shape),
    "q_proj_ds_shape": list(linear.ds_shape),
    "loss": float(loss.detach()),
}
Path(os.environ["OUT_DIR"], f"rank-{out['rank']}.json").write_text(json.dumps(out))
