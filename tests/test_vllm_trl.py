"""TRL's colocated vLLM generation (GRPO with `use_vllm`, `vllm_mode: colocate`) on vLLM's CPU
build (CI's vLLM lane, `make test-vllm`): the engine TRL starts inside the training process
generates every completion, and the weight sync TRL runs before each generation reaches it."""

import importlib.util

import pytest

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed (make test-vllm)"),
]


def test_grpo_generates_with_colocated_vllm_and_syncs_its_weights(vllm_tiny_model, tmp_path, monkeypatch):
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    # the CPU build's KV-cache size in GiB: vllm_gpu_memory_utilization is read there as the
    # share of host memory to reserve
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    # vLLM's switch for CPU CI: no inductor compile and no warm-up (vllm/platforms/cpu.py);
    # TRL offers no enforce_eager for the engine it builds
    monkeypatch.setenv("VLLM_CPU_CI_ENV", "1")
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"What is {i} + 1?"}]} for i in range(4)])
    completions = []

    def reward(completions_in, **kwargs):
        completions.extend(completions_in)
        return [float(len(c[0]["content"]) % 3) for c in completions_in]

    reward.__name__ = "length_mod_3"
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        report_to="none",
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        max_steps=2,
        logging_steps=1,
        save_strategy="no",
        learning_rate=1e-3,
        use_vllm=True,
        vllm_mode="colocate",
        vllm_max_model_length=256,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(model=str(vllm_tiny_model), reward_funcs=reward, args=args, train_dataset=data)
    trainer.train()
    assert len(completions) == 2 * 4 and all(c[0]["content"] is not None for c in completions)
    engine = trainer.vllm_generation.llm.llm_engine.model_executor.driver_worker.model_runner.model
    policy = trainer.model.model.embed_tokens.weight
    with torch.no_grad():
        policy.add_(1.0)  # a change the engine can only learn of through the sync
    trainer.vllm_generation.sync_weights()
    synced = dict(engine.named_parameters())["model.embed_tokens.weight"]
    assert torch.equal(synced.float().cpu(), policy.detach().float().cpu())
