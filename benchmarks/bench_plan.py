"""`evoenv plan`'s weight and activation terms against torch's measured peak, on a CPU, for the
tiny random model and the starter model, side by side in one run.

Each model is measured in a fresh child process, as the GPU recipes train (fp32 here, gradient
checkpointing, LoRA on every linear layer): the resident-set growth of loading its weights
against the plan's weight term; the peak growth over one forward/backward through its layers
(the head left out) against the plan's activations (+ the adapter's gradients); and the whole
step with TRL 1.16's fused LM head against activations + head. The peak is Linux's VmHWM, reset
before each (/proc/self/clear_refs), with glibc told to return freed blocks (MALLOC). Prints one
`bench plan: MODEL ... ratio R` line per model.

Run: `python benchmarks/bench_plan.py` (part of `make bench`; about a minute on 2 cores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# (name, prompt tokens, completion tokens): long enough that the terms stand above the noise
CASES = [("tiny", 512, 8192), ("starter", 256, 2048)]
LORA_R = 8
# glibc returns every block over 64 KiB to the system when it is freed (no dynamic threshold, no
# retained heap), so the resident set follows the live tensors as torch's CUDA allocator stats do
MALLOC = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536"}


def rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_growth(fn) -> int:
    """Bytes the resident set grew to at most while `fn` ran (VmHWM reset to VmRSS first)."""
    Path("/proc/self/clear_refs").write_text("5")
    start = rss_kib("VmRSS")
    fn()
    return (rss_kib("VmHWM") - start) * 1024


def child(model: str, prompt: int, completion: int) -> dict:
    """In this process: the measured bytes of `model`'s weights, of one forward/backward
    through its checkpointed layers (LoRA on, the head left out), and of the whole step with
    TRL's fused head."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    from evoenv_cli.training.cpu_head import compact_lm_head_on_cpu

    compact_lm_head_on_cpu()
    torch.manual_seed(0)
    before = rss_kib("VmRSS")
    net = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    sum(float(p.detach().sum()) for p in net.parameters())  # fault in the lazily mapped weights
    weights = (rss_kib("VmRSS") - before) * 1024
    add_fused_lm_head(net, temperature=1.0)
    net.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    net.config.use_cache = False
    net = get_peft_model(net, LoraConfig(r=LORA_R, lora_alpha=2 * LORA_R, target_modules="all-linear"))
    net.train()
    ids = torch.randint(0, net.config.vocab_size, (1, prompt + completion))
    labels = ids.clone()
    labels[:, :prompt] = -100  # TRL scores the completion only
    backbone = net.get_base_model().model

    def layers() -> None:
        backbone(input_ids=ids).last_hidden_state.square().mean().backward()

    def step() -> None:
        net(input_ids=ids, labels=labels, fused_lm_head=True).loss.backward()

    return {"weights": weights, "activations": peak_growth(layers), "step": peak_growth(step)}


def planned(model: str, prompt: int, completion: int) -> dict:
    from evoenv_cli import plan as P

    m = P.model_shape(model)
    t = P.TrainShape(micro_batch=1, prompt_tokens=prompt, completion_tokens=completion, compute_bytes=4)
    grads = 4 * m.lora_params(LORA_R)
    acts = P.activation_bytes(m, t) + grads
    return {"weights": 4 * m.params, "activations": acts, "step": acts + P.head_bytes(m, t, False), "shape": m}


def main() -> int:
    from evoenv_cli.llm.starter import build_starter_model
    from evoenv_cli.llm.tiny import build_tiny_model

    with tempfile.TemporaryDirectory(prefix="bench-plan-") as tmp:
        models = {"tiny": Path(tmp) / "tiny", "starter": ROOT / "runs" / "starter-model"}
        build_tiny_model(models["tiny"], seed=0)
        build_starter_model(models["starter"])
        for name, prompt, completion in CASES:
            code = f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
            code += (
                f"from bench_plan import child; print(json.dumps(child({str(models[name])!r}, {prompt}, {completion})))"
            )
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=MALLOC)
            measured = json.loads(done.stdout.strip().splitlines()[-1])
            plan = planned(str(models[name]), prompt, completion)
            ratio = {k: measured[k] / plan[k] for k in ("weights", "activations", "step")}
            mib = {k: (measured[k] / 2**20, plan[k] / 2**20) for k in ratio}
            print(
                f"bench plan: {name} ({plan['shape'].params / 1e6:.1f}M parameters, {prompt}+{completion} tokens, "
                f"LoRA r={LORA_R}, fp32, checkpointed): weights {mib['weights'][0]:.0f} MiB measured / "
                f"{mib['weights'][1]:.0f} planned, ratio {ratio['weights']:.2f}; activations (layers' forward+backward) "
                f"{mib['activations'][0]:.0f} / {mib['activations'][1]:.0f}, ratio {ratio['activations']:.2f}; "
                f"whole step with TRL's fused head {mib['step'][0]:.0f} / {mib['step'][1]:.0f}, ratio "
                f"{ratio['step']:.2f} (on a CPU the head's torch fallback keeps several fp32 tile copies that "
                "Triton folds in place)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
