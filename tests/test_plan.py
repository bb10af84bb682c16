"""`evoenv plan`: its formulas against published figures, its model table against the models'
published sizes, its refusals, and the shipped GPU recipes against the hardware they state."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from evoenv_cli import plan as P
from evoenv_cli.config import load_recipe
from evoenv_cli.errors import InputError

EXE = Path(sys.executable).with_name("evoenv")
GPU_RECIPES = ["single-gpu", "single-gpu-24gb", "paper-8xgpu"]


# -- the formulas against published figures ------------------------------------------------------
@pytest.mark.parametrize("stage, published_gb", [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_model_states_match_the_zero_papers_figure_1(stage, published_gb):
    """ZeRO (arXiv:1910.02054), figure 1: a 7.5B model on 64 GPUs, mixed-precision Adam (K=12):
    120 GB per GPU replicated, 31.4 (P_os), 16.6 (P_os+g), 1.9 (P_os+g+p)."""
    assert P.zero_paper_figure(7.5e9, stage, 64) / 1e9 == pytest.approx(published_gb, abs=0.05)


def test_zero3_matches_deepspeeds_estimator_output():
    """DeepSpeed's estimate_zero3_model_states_mem_needs_all_live on t5-small (60,506,624
    parameters, 16,449,536 in its largest layer), 1 GPU, no offload prints 1.08GB per GPU."""
    assert P.zero_model_states(60_506_624, 3, 1, 16_449_536) / 2**30 == pytest.approx(1.08, abs=0.005)


def test_kv_cache_per_token_is_vllms_page_size_formula():
    # 2 x layers x kv_heads x head_dim x 2 bytes: Llama-3.1-8B's widely quoted 128 KiB per token,
    # Qwen3-4B-Thinking-2507's 144 KiB, 36 GiB for one sequence of its 262,144-token context
    assert P.model_shape("meta-llama/Llama-3.1-8B").kv_bytes_per_token() == 128 * 1024
    qwen = P.model_shape("Qwen/Qwen3-4B-Thinking-2507")
    assert qwen.kv_bytes_per_token() == 144 * 1024
    assert qwen.kv_bytes_per_token() * qwen.max_position / 2**30 == pytest.approx(36.0)


@pytest.mark.parametrize(
    "model, total, non_embedding",
    [
        # the model cards' "Number of Parameters" and "(Non-Embedding)"
        ("Qwen/Qwen3-0.6B", 0.6e9, 0.44e9),
        ("Qwen/Qwen3-1.7B", 1.7e9, 1.4e9),
        ("Qwen/Qwen3-4B-Thinking-2507", 4.0e9, 3.6e9),
        ("Qwen/Qwen3-8B", 8.2e9, 6.95e9),
        ("Qwen/Qwen2.5-7B", 7.61e9, 6.53e9),
        ("meta-llama/Llama-3.1-8B", 8.03e9, None),
        ("HuggingFaceTB/SmolLM2-135M", 0.135e9, None),
    ],
)
def test_parameter_counts_match_the_model_cards(model, total, non_embedding):
    m = P.model_shape(model)
    assert m.params == pytest.approx(total, rel=0.02)
    if non_embedding:
        embed = m.vocab * m.hidden * (1 if m.tied else 2)
        assert m.params - embed == pytest.approx(non_embedding, rel=0.02)


def test_a_local_folder_is_read_from_its_config_and_an_unknown_name_is_refused(tmp_path):
    cfg = {
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "vocab_size": 1000,
        "max_position_embeddings": 512,
        "tie_word_embeddings": True,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = P.model_shape(str(tmp_path))
    assert (m.layers, m.kv_heads, m.head_dim, m.max_position, m.tied) == (2, 2, 16, 512, True)
    assert P.model_shape("qwen3-8b").name == "Qwen/Qwen3-8B"  # the name after the organisation
    with pytest.raises(InputError, match="not in the plan's table"):
        P.model_shape("someone/Unknown-3B")


def test_activation_estimate_grows_as_checkpointing_and_lengths_say():
    m = P.model_shape("Qwen/Qwen3-0.6B")
    short = P.TrainShape(micro_batch=1, prompt_tokens=256, completion_tokens=1024)
    long = P.TrainShape(micro_batch=1, prompt_tokens=256, completion_tokens=4096)
    acts_s, acts_l = P.activation_bytes(m, short), P.activation_bytes(m, long)
    assert acts_l > 3 * acts_s
    no_ckpt = P.TrainShape(micro_batch=1, prompt_tokens=256, completion_tokens=1024, gradient_checkpointing=False)
    assert P.activation_bytes(m, no_ckpt) > 5 * acts_s


def test_the_head_term_is_trls_tiles_read_from_the_installed_source():
    """TRL 1.16's fused head projects in tiles of TOKEN_CHUNK_SIZE tokens x
    _CHUNKED_LOGPROB_CHUNK_SIZE vocabulary entries (trl/kernels/chunked_logprob.py,
    trl/trainer/utils.py): the plan's tile is theirs, and GRPOTrainer installs that head."""
    import inspect

    from trl.kernels import chunked_logprob
    from trl.trainer import grpo_trainer, utils

    assert P.HEAD_TOKEN_TILE == chunked_logprob.TOKEN_CHUNK_SIZE
    assert P.HEAD_VOCAB_TILE == utils._CHUNKED_LOGPROB_CHUNK_SIZE
    assert "add_fused_lm_head(" in inspect.getsource(grpo_trainer.GRPOTrainer.__init__)
    m = P.model_shape("Qwen/Qwen3-4B-Thinking-2507")
    t = P.TrainShape(micro_batch=1, prompt_tokens=2048, completion_tokens=32768)
    full_logits = 32768 * m.vocab * 2  # what a (tokens x vocabulary) bf16 logits tensor would weigh
    assert full_logits / P.GIB == pytest.approx(9.27, abs=0.01)
    frozen = P.head_bytes(m, t, trains_head=False)
    # one 4096 x 32768 bf16 tile (256 MiB) + 32,768 hidden states in bf16 and their fp32 gradient
    assert frozen == 4096 * 32768 * 2 + 32768 * m.hidden * 6 + 32768 * 4 * P.HEAD_FP32_PER_TOKEN
    assert frozen < full_logits / 10
    # full fine-tuning also accumulates the head's (tied embedding's) gradient in fp32
    assert P.head_bytes(m, t, trains_head=True) - frozen == m.vocab * m.hidden * 4


def test_launch_settings_read_processes_and_sharding():
    assert P.launch_settings("accelerate launch --num_processes 8") == (8, "none")
    assert P.launch_settings("accelerate launch --num_processes=4 --use_deepspeed --zero_stage 3") == (4, "zero3")
    assert P.launch_settings("accelerate launch --config_file cfg/fsdp.yaml --num_processes 2") == (2, "fsdp")
    assert P.launch_settings("") == (1, "none")
    assert P.launch_settings("accelerate launch --use_fsdp") == (None, "fsdp")  # the launcher's choice: every GPU


# -- refusals --------------------------------------------------------------------------------------
def _recipe(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "r.yaml"
    p.write_text(text)
    return p


def test_an_8b_model_in_fp32_ddp_on_8x80gb_is_refused_naming_model_states(tmp_path):
    p = _recipe(
        tmp_path,
        "# hardware: 8 x 80 GB\nbackend:\n  kind: vllm\n  model: Qwen/Qwen3-8B\n  options: {max_model_len: 16384}\n"
        "train:\n  bf16: false\n  use_vllm: false\n  per_device_train_batch_size: 8\n"
        "  max_completion_length: 1024\niterate:\n  train_launch: accelerate launch --num_processes 8\n",
    )
    result = P.plan(p)
    assert not result.fits
    term = result.problems[0].term
    assert term.startswith("train") and term.endswith("model states")
    states = next(t for ph in result.phases for t in ph.terms if t.name == "model states")
    assert states.gib == pytest.approx(16 * 8.19e9 / 2**30, rel=0.01)  # 16 bytes/param, replicated


def test_a_max_model_len_beyond_the_kv_budget_is_refused_naming_kv_cache(tmp_path):
    p = _recipe(
        tmp_path,
        "# hardware: 1 x 24 GB\nbackend:\n  kind: vllm\n  model: Qwen/Qwen3-4B-Thinking-2507\n"
        "  options: {max_model_len: 262144, gpu_memory_utilization: 0.9}\n"
        "train:\n  lora: true\n  use_vllm: false\n  per_device_train_batch_size: 1\n"
        "  gradient_accumulation_steps: 8\n  max_completion_length: 1024\n",
    )
    result = P.plan(p)
    terms = [x.term for x in result.problems]
    assert "backend: kv_cache" in terms, terms
    detail = next(x.detail for x in result.problems if x.term == "backend: kv_cache")
    assert "262144 tokens needs 36.0 GiB" in detail


def test_batch_divisibility_and_context_are_checked(tmp_path):
    p = _recipe(
        tmp_path,
        "# hardware: 2 x 80 GB\nbackend:\n  kind: vllm\n  model: Qwen/Qwen3-0.6B\n"
        "synthesize:\n  max_tokens: 40000\n"
        "train:\n  num_generations: 8\n  per_device_train_batch_size: 3\n  use_vllm: false\n"
        "  max_completion_length: 512\niterate:\n  train_launch: accelerate launch --num_processes 2\n",
    )
    problems = {x.term: x.detail for x in P.plan(p).problems}
    assert "train: batch" in problems and "= 6 is not divisible by num_generations 8" in problems["train: batch"]
    assert "synthesize.max_tokens" in problems and "the model's context (40960)" in problems["synthesize.max_tokens"]


def test_cli_plan_exits_2_naming_the_term_and_prints_json(tmp_path):
    p = _recipe(
        tmp_path,
        "backend:\n  kind: vllm\n  model: Qwen/Qwen3-8B\n  options: {max_model_len: 16384}\n"
        "train:\n  bf16: false\n  use_vllm: false\n  max_completion_length: 1024\n",
    )
    run = subprocess.run(
        [str(EXE), "plan", str(p), "--gpus", "8", "--gpu-memory", "80", "--json"], capture_output=True, text=True
    )
    assert run.returncode == 2, run.stderr
    data = json.loads(run.stdout)
    assert data["fits"] is False and data["gpus"] == 8
    assert "model states" in run.stderr.splitlines()[-1] and "Traceback" not in run.stderr
    bare = subprocess.run([str(EXE), "plan", str(p)], capture_output=True, text=True)
    assert bare.returncode == 2 and "no '# hardware: N x GB GB' line" in bare.stderr


# -- the shipped GPU recipes -------------------------------------------------------------------------
@pytest.mark.parametrize("name", GPU_RECIPES)
def test_shipped_gpu_recipes_fit_the_hardware_their_header_states(name):
    path = ROOT / "recipes" / f"{name}.yaml"
    load_recipe(path)
    stated = P.stated_hardware(path)
    assert stated is not None, f"{path} has no '# hardware:' line"
    result = P.plan(path)
    assert result.fits, "\n".join(result.lines())
    # and the LLM stages get the token budget the model card asks for
    assert load_recipe(path).synthesize.max_tokens >= 32768


def test_the_recipes_before_this_change_did_not_fit():
    """The 8-GPU recipe as it shipped before the plan: fp32 weights under plain DDP, 16,384-token
    completings 8 to a forward, and a colocated engine with the model's whole context."""
    old = load_recipe(ROOT / "recipes" / "paper-8xgpu.yaml")
    old.train.accelerate_config, old.train.bf16 = "", False
    old.train.per_device_train_batch_size, old.train.gradient_accumulation_steps = 8, 4
    old.train.max_completion_length = 16384
    result = P.plan_recipe(old, "old", P.model_shape("Qwen/Qwen3-4B-Thinking-2507"), 8, P.usable_gib(80))
    assert not result.fits and result.problems[0].term.startswith("train")


def test_iterate_refuses_a_recipe_that_does_not_fit_before_anything_loads(tmp_path):
    p = _recipe(
        tmp_path,
        "# hardware: 8 x 80 GB\nbackend:\n  kind: hf\n  model: Qwen/Qwen3-8B\n"
        "train:\n  bf16: false\n  use_vllm: false\n  max_completion_length: 1024\n"
        "iterate:\n  train_launch: accelerate launch --num_processes 8\n",
    )
    argv = [str(EXE), "iterate", "--recipe", str(p), "--run", str(tmp_path / "run"), "--seeds", str(ROOT / "seeds")]
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # no nvidia-smi: the recipe's stated hardware
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "model states" in last and "iterate --no-plan skips this check" in last
    assert not (tmp_path / "run").exists()  # nothing ran


# -- a Ray cluster (iterate.cluster: ray) ---------------------------------------------------------
def test_the_cluster_recipe_fits_four_nodes_and_says_what_each_phase_asks_of_them():
    p = P.plan(ROOT / "recipes" / "cluster-4x8gpu.yaml")  # as many nodes as train.workers need
    assert p.fits and p.nodes == 4 and p.gpus == 8
    train = next(ph for ph in p.phases if ph.name.startswith("train ("))
    assert train.name.startswith("train (32 processes, zero3")  # train.workers, sharded over all 32
    lines = "\n".join(p.lines())
    assert "train: 32 Ray Train workers on 4 of 4 nodes, 8 GPUs each" in lines
    assert f"{train.total_gib * 8:.1f} GiB of GPU memory per node" in lines
    assert "llm stages: 4 nodes, 32 vllm engines (Ray data parallel)" in lines
    assert "sandboxed work" in lines and "every node, 16 sandbox workers" in lines
    # ZeRO-3 over 32 GPUs holds less per GPU than over the 8 of one node
    one = P.plan(ROOT / "recipes" / "paper-8xgpu.yaml")
    s32 = next(t.gib for t in train.terms if t.name == "model states")
    s8 = next(t.gib for ph in one.phases if ph.name.startswith("train (") for t in ph.terms if t.name == "model states")
    assert s32 < s8


def test_too_few_nodes_for_the_train_workers_is_refused_naming_the_setting(tmp_path):
    p = P.plan(ROOT / "recipes" / "cluster-4x8gpu.yaml", nodes=3)
    assert not p.fits
    assert p.problems[0].term == "train.workers" and "32 training processes on 3 nodes x 8 GPUs" in p.problems[0].detail
    r = subprocess.run(
        [str(EXE), "plan", str(ROOT / "recipes" / "cluster-4x8gpu.yaml"), "--nodes", "3"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 2 and "train.workers: 32 training processes on 3 nodes" in r.stderr.strip().splitlines()[-1]


def test_generation_across_the_cluster_asks_for_its_nodes():
    from dataclasses import replace

    recipe = load_recipe(ROOT / "recipes" / "cluster-4x8gpu.yaml")
    m = P.model_shape(recipe.backend.model)
    p = P.plan_recipe(recipe, "r", m, 8, P.usable_gib(80), nodes=4)
    assert p.fits and any(c.startswith("llm stages: 4 nodes, 32 vllm engines (Ray data parallel)") for c in p.cluster)
    one = P.plan_recipe(
        replace(recipe, backend=replace(recipe.backend, data_parallel_size=0)), "r", m, 8, 78.4, nodes=4
    )
    assert any(c.startswith("llm stages: 1 node, the vllm_server engine on 8 of its GPUs") for c in one.cluster)
    p = P.plan_recipe(recipe, "r", m, 8, P.usable_gib(80), nodes=2)
    assert "backend.data_parallel_size" in [x.term for x in p.problems]  # 32 GPUs asked of 16
