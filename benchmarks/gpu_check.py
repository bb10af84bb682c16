"""`make gpu-check`: what only a GPU can show about evoenv's GPU path, in one run of at most
ten minutes on a machine with a CUDA device, nothing downloaded.

One line per step: `gpu-check: STEP PASS|FAIL|SKIP SECONDS detail`. A step the machine cannot
run (no CUDA device, no vLLM, one GPU for a two-rank launch) is a SKIP that says what is
missing; the exit code is 1 when any step FAILs, else 0.

Steps:
- cuda: the device, its memory, torch's CUDA and bf16 support;
- wheels: TRL, datasets and their small dependencies, and evoenv, installed `pip install
  --no-deps` from the folder `make gpu-wheels` fills (GPU_WHEELS, default gpu-wheels/), for
  whichever of them is not importable (the checked machine has torch, transformers, accelerate
  and peft, and no network);
- grpo-lora: evoenv's own GRPO settings (`stages.train.grpo_args`, `adapter_config`) on CUDA in
  bf16 with gradient checkpointing and LoRA, on a random-init model built from Qwen3-0.6B's
  published config (no weights needed; vocabulary 151,936, so the head weighs what it will),
  two steps; then evoenv's `save()`: the adapter and the merged copy, which is reloaded and run;
- grpo-full: the same in full fine-tuning, over fp32 master weights with bf16 autocast
  (training/precision.py), checked to be float32;
- memory (one line per run): the peak `torch.cuda.max_memory_reserved` of those steps (what
  the allocator holds, fragmentation included; `max_memory_allocated` beside it) against
  `evoenv plan`'s estimate for the same shapes, and their ratio (target: within 25%);
- drift: 100 syncs of PEFT's merge_adapter/unmerge_adapter (TRL's vLLM sync) on CUDA on that
  model, its base in float32 (what train loads for an adapter synced to vLLM) and in bf16;
- zero3: evoenv's shipped ZeRO-3 config on one rank (`accelerate launch --num_processes 1`), a
  full fine-tuning step and its saved model, where DeepSpeed is importable (it does not travel:
  the wheels are at the 64 MiB limit);
- accelerate: `accelerate launch` of a GRPO run over every GPU (one process per GPU), checking
  that only the main process writes the output and that it is complete after every rank ends;
- vllm: an in-process vLLM engine on the same shape with a bounded max_model_len, where vLLM
  is importable;
- bound: `evoenv bound`'s Gumbel-max answers on CUDA in bfloat16 (bound.device: cuda), the same
  twice.

Run: `python benchmarks/gpu_check.py [--wheels DIR] [--steps 2] [--completion 512]`.
"""

from __future__ import annotations

import argparse
import glob
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the clone's evoenv when none is installed (an installed wheel, earlier on the path, wins)
sys.path.append(str(ROOT))
FAILED: list[str] = []


def line(step: str, status: str, seconds: float, detail: str) -> None:
    print(f"gpu-check: {step:<10} {status:<4} {seconds:7.1f}s  {detail}", flush=True)
    if status == "FAIL":
        FAILED.append(step)


def run_step(step: str, fn, *args):
    """Run one step; its return value is the detail (a SKIP raises Skip)."""
    started = time.perf_counter()
    try:
        detail = fn(*args)
    except Skip as exc:
        line(step, "SKIP", time.perf_counter() - started, str(exc))
        return None
    except Exception as exc:  # a failed step is a line, and the next steps still run
        tb = traceback.format_exc(limit=3).strip().splitlines()
        line(step, "FAIL", time.perf_counter() - started, f"{type(exc).__name__}: {exc} | {tb[-1]}")
        return None
    line(step, "PASS", time.perf_counter() - started, detail)
    return detail


class Skip(Exception):
    """A step this machine cannot run, with what it lacks."""


# -- steps ---------------------------------------------------------------------------------------
def cuda() -> str:
    if importlib.util.find_spec("torch") is None:
        raise Skip(f"no torch in {sys.executable}: run it with the Python that has torch (make gpu-check PYTHON=...)")
    import torch

    if not torch.cuda.is_available():
        raise Skip(f"no CUDA device (torch {torch.__version__}: torch.cuda.is_available() is False); GPU steps skip")
    from evoenv_cli.training.precision import resolved_dtype, trains_in_bf16

    props = torch.cuda.get_device_properties(0)
    # the recipes' "auto" (bound.dtype, train.bf16, distill.bf16) on this device: bfloat16 where it computes in it
    auto = resolved_dtype("auto", "cuda")
    assert auto == ("bfloat16" if torch.cuda.is_bf16_supported() else "float32"), auto
    assert trains_in_bf16("auto", True) is (auto == "bfloat16")
    return (
        f"{torch.cuda.device_count()} x {props.name} {props.total_memory / 2**30:.1f} GiB, torch {torch.__version__} "
        f"CUDA {torch.version.cuda}, bf16 {torch.cuda.is_bf16_supported()}, auto dtype {auto}"
    )


WHEEL_MODULES = {  # import name -> wheel name prefix
    # pandas imports these three; the machine has none of them
    "dateutil": "python_dateutil",
    "pytz": "pytz",
    "tzdata": "tzdata",
    "trl": "trl",
    "datasets": "datasets",
    "dill": "dill",
    "multiprocess": "multiprocess",
    "xxhash": "xxhash",
    "pyarrow": "pyarrow",
    "pandas": "pandas",
    "evoenv_cli": "evoenv",
}


def wheels(folder: Path) -> str:
    missing = [m for m in WHEEL_MODULES if importlib.util.find_spec(m) is None]
    if not missing:
        raise Skip("trl, datasets and evoenv are already importable: nothing to install")
    files = [f for m in missing for f in glob.glob(str(folder / f"{WHEEL_MODULES[m]}-*.whl"))]
    if not files:
        raise Skip(f"{', '.join(missing)} not importable and no wheels for them in {folder} (make gpu-wheels)")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", *files]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "pip failed")
    importlib.invalidate_caches()
    still = [m for m in missing if importlib.util.find_spec(m) is None]
    if still:
        raise RuntimeError(f"installed {len(files)} wheels but {', '.join(still)} is still not importable")
    return f"installed {', '.join(Path(f).name for f in files)}"


def need_gpu() -> None:
    if importlib.util.find_spec("torch") is None:
        raise Skip("no torch")
    import torch

    if not torch.cuda.is_available():
        raise Skip("no CUDA device")
    for m in ("trl", "datasets", "peft", "evoenv_cli"):
        if importlib.util.find_spec(m) is None:
            raise Skip(f"{m} is not importable (see the wheels step)")


def build_model(out: Path) -> Path:
    """A random-init model of Qwen3-0.6B's shape (evoenv's plan table, from its config.json)
    with evoenv's offline tokenizer: the ids past the tokenizer decode to nothing."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from evoenv_cli.llm import tiny
    from evoenv_cli.plan import model_shape

    m = model_shape("Qwen/Qwen3-0.6B")
    tok = tiny.build_tokenizer()
    config = AutoConfig.for_model(
        "qwen3",
        vocab_size=m.vocab,
        hidden_size=m.hidden,
        intermediate_size=m.intermediate,
        num_hidden_layers=m.layers,
        num_attention_heads=m.heads,
        num_key_value_heads=m.kv_heads,
        head_dim=m.head_dim,
        max_position_embeddings=m.max_position,
        tie_word_embeddings=m.tied,
        eos_token_id=tok.convert_tokens_to_ids(tiny.IM_END),
        pad_token_id=tok.convert_tokens_to_ids(tiny.ENDOFTEXT),
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.generation_config.eos_token_id = None  # random weights: every completion runs to its full length
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def train_config(lora: bool, steps: int, completion: int, batch: int):
    """evoenv's TrainConfig for a check run: bf16, checkpointing, transformers generating."""
    from evoenv_cli.config import TrainConfig

    return TrainConfig(
        lora=lora,
        lora_r=16,
        lora_alpha=32,
        merge_lora=lora,
        per_device_train_batch_size=batch,
        num_generations=batch,
        max_completion_length=completion,
        max_steps=steps,
        learning_rate=1e-5,
        bf16=True,
        gradient_checkpointing=True,
        mask_truncated_completions=False,  # random weights never stop: every completion is cut
        use_vllm=False,
        save_steps=10**6,
    )


def grpo(model_dir: Path, out: Path, lora: bool, steps: int, completion: int, batch: int) -> dict:
    """GRPO steps on CUDA with evoenv's own settings; the peak memory and the plan's estimate."""
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from evoenv_cli import plan as planner
    from evoenv_cli.config import Recipe
    from evoenv_cli.stages import train as stage

    cfg = train_config(lora, steps, completion, batch)
    prompts = [
        [{"role": "user", "content": f"Add {i} and {i + 1}, then explain the sum at length."}] for i in range(64)
    ]
    args = {**stage.grpo_args(cfg, out), "save_strategy": "no"}
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=[lambda completions, **kw: [float(len(str(c)) % 7) for c in completions]],
        args=GRPOConfig(**args),
        train_dataset=Dataset.from_list([{"prompt": p} for p in prompts]),
        peft_config=stage.adapter_config(cfg),
    )
    torch.cuda.reset_peak_memory_stats()
    trainer.train()
    allocated = torch.cuda.max_memory_allocated() / 2**30
    reserved = torch.cuda.max_memory_reserved() / 2**30
    recipe = Recipe()
    recipe.train = cfg
    shape = planner.model_shape("Qwen/Qwen3-0.6B")
    props = torch.cuda.get_device_properties(0)
    # these prompts run about 32 tokens, not a task prompt's 2048
    result = planner.plan_recipe(recipe, "gpu-check", shape, 1, props.total_memory / 2**30, prompt_tokens=32)
    phases = [p for p in result.phases if p.name.startswith("train")]
    estimate = max(p.total_gib for p in phases) - planner.CUDA_OVERHEAD_GIB
    return {"trainer": trainer, "cfg": cfg, "peak": reserved, "allocated": allocated, "estimate": estimate}


def grpo_lora(model_dir: Path, work: Path, steps: int, completion: int, batch: int, results: dict) -> str:
    need_gpu()
    import torch
    from transformers import AutoModelForCausalLM

    from evoenv_cli.stages import train as stage

    out = work / "lora"
    r = grpo(model_dir, out, True, steps, completion, batch)
    results["grpo-lora"] = r
    base = next(p for n, p in r["trainer"].model.named_parameters() if "base_layer" in n)
    assert base.dtype == torch.bfloat16, f"LoRA without vLLM keeps its base in bf16, got {base.dtype}"
    merged = stage.save(r["trainer"], out, r["cfg"])  # evoenv's own save(): adapter + merged copy
    assert merged is not None and (out / "adapter_config.json").is_file()
    back = AutoModelForCausalLM.from_pretrained(merged, dtype=torch.bfloat16, device_map={"": 0})
    logits = back(torch.tensor([[1, 2, 3]], device="cuda")).logits
    assert logits.shape[-1] == back.config.vocab_size and torch.isfinite(logits.float()).all()
    del r["trainer"], back
    torch.cuda.empty_cache()
    return f"{steps} steps, bf16, gradient checkpointing, LoRA r=16; evoenv's save(): merged, reloaded ({merged})"


def grpo_full(model_dir: Path, work: Path, steps: int, completion: int, batch: int, results: dict) -> str:
    need_gpu()
    import torch

    from evoenv_cli.stages import train as stage

    r = grpo(model_dir, work / "full", False, steps, completion, batch)
    results["grpo-full"] = r
    dtypes = {p.dtype for p in r["trainer"].model.parameters()}
    assert dtypes == {torch.float32}, f"full fine-tuning trains fp32 masters, got {dtypes}"
    stage.save(r["trainer"], work / "full", r["cfg"])
    assert (work / "full" / "config.json").is_file()
    del r["trainer"]
    torch.cuda.empty_cache()
    return f"{steps} steps, bf16 autocast over fp32 master weights, gradient checkpointing, full fine-tuning; saved"


def drift(model_dir: Path) -> str:
    """TRL's vLLM sync, 100 times: the base after it against the base before."""
    need_gpu()
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    ratios = {}
    for dtype in (torch.float32, torch.bfloat16):
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, device_map={"": 0})
        lora = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", init_lora_weights=False)
        model = get_peft_model(model, lora)
        bases = {n: p for n, p in model.named_parameters() if n.endswith("base_layer.weight")}
        before = {n: p.detach().clone() for n, p in bases.items()}
        with torch.no_grad():
            for _ in range(100):
                model.merge_adapter()
                model.unmerge_adapter()
        worst = max((bases[n].float() - before[n].float()).abs().max().item() for n in bases)
        mean = torch.stack([b.float().abs().mean() for b in before.values()]).mean().item()
        ratios[str(dtype).removeprefix("torch.")] = worst / mean
        del model, bases, before
        torch.cuda.empty_cache()
    detail = ", ".join(f"{k} {v:.1e}" for k, v in ratios.items())
    if ratios["float32"] >= 1e-5:
        raise RuntimeError(f"max drift / mean weight after 100 syncs: {detail} (fp32 should stay at rounding)")
    return f"max drift / mean weight after 100 syncs: {detail} (train loads a synced adapter's base in float32)"


def memory(results: dict, name: str) -> str:
    r = results.get(name)
    if r is None:
        raise Skip(f"{name} did not run")
    ratio = r["peak"] / r["estimate"]
    detail = (
        f"{name}: max_memory_reserved {r['peak']:.2f} GiB (allocated {r['allocated']:.2f}), "
        f"{r['estimate']:.2f} GiB planned, ratio {ratio:.2f}"
    )
    if not 0.75 <= ratio <= 1.25:
        raise RuntimeError(detail + " (outside the 25% target)")
    return detail


ACCELERATE_CHILD = """
import os, sys, json
from pathlib import Path
sys.path.insert(0, os.environ["GPU_CHECK_ROOT"])
from benchmarks.gpu_check import grpo
out = Path(sys.argv[1])
r = grpo(Path(sys.argv[2]), out, True, 1, 64, 4)
trainer = r["trainer"]
trainer.accelerator.wait_for_everyone()
if trainer.accelerator.is_main_process:
    trainer.save_model(str(out / "final"))
    (out / "written-by.json").write_text(json.dumps({"rank": int(os.environ.get("RANK", 0))}))
trainer.accelerator.wait_for_everyone()
"""


def accelerate(model_dir: Path, work: Path) -> str:
    need_gpu()
    import torch

    gpus = torch.cuda.device_count()
    launcher = Path(sys.executable).with_name("accelerate")
    if not launcher.exists():
        raise Skip(f"no accelerate command beside {sys.executable}")
    script = work / "accelerate_child.py"
    script.write_text(ACCELERATE_CHILD)
    out = work / "accelerate"
    cmd = [str(launcher), "launch", "--num_processes", str(gpus), "--mixed_precision", "bf16"]
    cmd += ["--multi_gpu"] if gpus > 1 else []
    env = {**os.environ, "GPU_CHECK_ROOT": str(ROOT)}
    done = subprocess.run([*cmd, str(script), str(out), str(model_dir)], capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"accelerate launch exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    written = json.loads((out / "written-by.json").read_text())
    assert written["rank"] == 0 and (out / "final" / "adapter_config.json").exists()
    note = "" if gpus > 1 else " (one GPU: one rank; the two-rank case is tested on CPU with gloo)"
    return f"{gpus} process(es): only rank 0 wrote, after every rank finished{note}"


ZERO3_CHILD = """
import os, sys, json
from pathlib import Path
sys.path.insert(0, os.environ["GPU_CHECK_ROOT"])
from benchmarks.gpu_check import grpo
from evoenv_cli.stages import train as stage
out = Path(sys.argv[1])
r = grpo(Path(sys.argv[2]), out, False, 1, 64, 4)
stage.save(r["trainer"], out, r["cfg"])
if r["trainer"].accelerator.is_main_process:
    count = stage.trained_parameters(r["trainer"].model)
    (out / "zero3.json").write_text(json.dumps({"trained_parameters": count}))
"""


def zero3(model_dir: Path, work: Path) -> str:
    """evoenv's zero3.yaml on one rank: DeepSpeed partitions, trains, gathers and saves."""
    need_gpu()
    if importlib.util.find_spec("deepspeed") is None:
        raise Skip("DeepSpeed is not installed (it does not travel: gpu-wheels is at the 64 MiB limit)")
    from safetensors import safe_open

    from evoenv_cli.accelerate_configs import config_path
    from evoenv_cli.plan import model_shape

    launcher = Path(sys.executable).with_name("accelerate")
    script, out = work / "zero3_child.py", work / "zero3"
    script.write_text(ZERO3_CHILD)
    cmd = [str(launcher), "launch", "--config_file", str(config_path("zero3")), "--num_processes", "1"]
    env = {**os.environ, "GPU_CHECK_ROOT": str(ROOT)}
    done = subprocess.run([*cmd, str(script), str(out), str(model_dir)], capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"accelerate launch exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    count = json.loads((out / "zero3.json").read_text())["trained_parameters"]
    expected = model_shape("Qwen/Qwen3-0.6B").params
    assert abs(count - expected) / expected < 0.01, f"trained_parameters {count} under ZeRO-3, expected ~{expected}"
    files = sorted(out.glob("*.safetensors"))
    assert files, "ZeRO-3 saved no weights"
    with safe_open(str(files[0]), "pt") as f:
        empty = [k for k in f.keys() if f.get_slice(k).get_shape() in ([], [0])]
    assert not empty, f"ZeRO-3 saved empty tensors: {empty[:3]}"
    return f"one rank: a step, the gathered 16-bit model saved whole, trained_parameters {count:,} (ds_numel)"


def vllm_step(model_dir: Path) -> str:
    need_gpu()
    if importlib.util.find_spec("vllm") is None:
        raise Skip("vLLM is not installed (its wheel is over 300 MB and cannot travel with the check)")
    from evoenv_cli.llm import SamplingConfig, make_backend
    from evoenv_cli.plan import model_shape

    shape = model_shape("Qwen/Qwen3-0.6B")
    with make_backend(
        "vllm", str(model_dir), max_model_len=4096, gpu_memory_utilization=0.3, enforce_eager=True
    ) as llm:
        gens = llm.generate([[{"role": "user", "content": "2+2?"}]], SamplingConfig(n=2, max_tokens=64))
    assert gens[0].error is None
    return f"vllm engine at max_model_len 4096 ({shape.kv_bytes_per_token() // 1024} KiB of KV per token) generated"


def bound_step(model_dir: Path) -> str:
    """`evoenv bound`'s sampled policy on CUDA in bfloat16 (bound.device: cuda): Gumbel-max
    answers of the same prompts twice, which must be identical (a deterministic function of
    model, instance and noise on one device), and a third time in another batch, which runs."""
    need_gpu()
    from types import SimpleNamespace

    from evoenv_cli.stages import bound
    from evoenv_cli.training.answering import gumbel_answers

    policy = bound.Policy(model_dir, "base", str(model_dir), None, 0)
    model, tokenizer = bound.load_policy(policy, "bfloat16", "cuda")
    code = SimpleNamespace(seed=7, temperature=0.7, max_tokens=16)
    prompts = [[{"role": "user", "content": f"What is {i} + {i}?"}] for i in range(12)]
    first = gumbel_answers(model, tokenizer, prompts, code, 4)
    second = gumbel_answers(model, tokenizer, prompts, code, 4)
    assert first == second, "the same prompts and noise gave different answers on cuda"
    assert len(gumbel_answers(model, tokenizer, prompts, code, 6)) == 12
    # the shared-context rule keeps shapes fixed, so each answer alone should be the same; the
    # CPU tests hold it bit for bit, this says whether the GPU's kernels do too
    alone = [gumbel_answers(model, tokenizer, [p], code, 4, [j])[0] for j, p in enumerate(prompts)]
    same = sum(a == b for a, b in zip(alone, first))
    return (
        f"12 Gumbel-max answers on {next(model.parameters()).device} in bfloat16, identical twice; "
        f"{same}/12 the same answered alone"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheels", default=os.environ.get("GPU_WHEELS", "gpu-wheels"), help="folder of carried wheels")
    ap.add_argument("--steps", type=int, default=2, help="GRPO steps per run")
    ap.add_argument("--completion", type=int, default=512, help="completion tokens (random weights never stop)")
    ap.add_argument("--batch", type=int, default=8, help="completions per step (one prompt group)")
    a = ap.parse_args()
    started = time.perf_counter()
    has_cuda = run_step("cuda", cuda) is not None
    run_step("wheels", wheels, Path(a.wheels))
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        work = Path(tmp)
        model_dir = run_step("model", lambda: (need_gpu(), str(build_model(work / "qwen3-0.6b-shape")))[1])
        model_dir = Path(model_dir) if model_dir else None
        for step, fn in (
            ("grpo-lora", lambda: grpo_lora(model_dir, work, a.steps, a.completion, a.batch, results)),
            ("memory", lambda: memory(results, "grpo-lora")),
            ("grpo-full", lambda: grpo_full(model_dir, work, a.steps, a.completion, a.batch, results)),
            ("memory", lambda: memory(results, "grpo-full")),
            ("drift", lambda: drift(model_dir)),
            ("zero3", lambda: zero3(model_dir, work)),
            ("accelerate", lambda: accelerate(model_dir, work)),
            ("vllm", lambda: vllm_step(model_dir)),
            ("bound", lambda: bound_step(model_dir)),
        ):
            if model_dir is None and step != "memory":
                line(step, "SKIP", 0.0, "no CUDA device" if not has_cuda else "the model step did not run")
                continue
            run_step(step, fn)
    total = time.perf_counter() - started
    print(f"gpu-check: done in {total:.0f}s, {len(FAILED)} failed{': ' + ', '.join(FAILED) if FAILED else ''}")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
