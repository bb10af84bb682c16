"""distill on a GPU: the student's base and the teacher in bf16, each whole on one card (not
spread over every visible GPU), checkpointing on; on the CPU float32; and under a launcher only
rank 0 writes the metrics, the quantized copy and the manifests."""

from __future__ import annotations

import pytest

from evoenv_cli.config import DistillConfig, TrainConfig
from evoenv_cli.stages import distill

STUDENT = TrainConfig(adapter="tinylora")


def test_on_a_gpu_bf16_student_and_teacher_on_one_card_with_checkpointing(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for name in ("WORLD_SIZE", "ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP"):
        monkeypatch.delenv(name, raising=False)
    args = distill.distill_args(DistillConfig(), tmp_path, STUDENT)
    assert args["bf16"] is True and args["use_cpu"] is False
    assert args["model_init_kwargs"] == {"dtype": "bfloat16", "device_map": {"": 0}}
    assert args["teacher_model_init_kwargs"] == {"dtype": "bfloat16", "device_map": {"": 0}}
    assert args["activation_checkpointing"] is True
    monkeypatch.setenv("WORLD_SIZE", "2")  # under accelerate launch each rank's accelerator places them
    args = distill.distill_args(DistillConfig(gradient_checkpointing=False), tmp_path, STUDENT)
    assert args["model_init_kwargs"]["device_map"] is None and args["teacher_model_init_kwargs"]["device_map"] is None
    assert args["activation_checkpointing"] is False
    from trl import DistillationConfig

    assert set(args) <= set(DistillationConfig.__dataclass_fields__)  # every name is one TRL knows


def test_on_the_cpu_float32_and_no_checkpointing(tmp_path):
    args = distill.distill_args(DistillConfig(), tmp_path, STUDENT)
    assert args["model_init_kwargs"] == {"dtype": "float32", "device_map": None}
    assert args["teacher_model_init_kwargs"]["dtype"] == "float32"
    assert args["activation_checkpointing"] is False


def test_a_tinylora_student_under_zero3_is_refused_before_loading(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    from evoenv_cli.errors import InputError

    with pytest.raises(InputError, match="train.adapter: tinylora under DeepSpeed ZeRO-3"):
        distill.precision.check(STUDENT, *distill.precision.launched_sharding())
