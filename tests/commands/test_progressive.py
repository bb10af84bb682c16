"""Progressive RLVR: TinyLoRA through `train`, `distill`, quantization, and `bound` (its
arithmetic against hand-computed values, its refusal of a checkpoint outside the recorded code,
and its determinism)."""

import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from evoenv_cli import artifacts
from evoenv_cli.artifacts import EnvLibrary
from evoenv_cli.conversations import draw_levels
from evoenv_cli.stages import bound
from evoenv_cli.training import answering, precision, quantize

EXE = Path(sys.executable).with_name("evoenv")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
FIXTURE = Path(__file__).parents[1] / "fixtures" / "digit_share.py"
RECIPE = """train:
  num_generations: 2
  per_device_train_batch_size: 4
  max_completion_length: 8
  # the random model's completions all run to max_completion_length: masked (the default),
  # none would count in the loss and no weight would change
  mask_truncated_completions: false
  learning_rate: 0.01
  gradient_checkpointing: false
  save_steps: 2
  adapter: tinylora
  tinylora_u: 13
  tinylora_weight_tying: 1.0
distill:
  max_steps: 2
  per_device_train_batch_size: 2
  max_completion_length: 8
  learning_rate: 0.01
bound:
  n: 8
  max_tokens: 8
  threshold: 0.5
  batch_size: 4
  bits: 4
  grid:
    u: [13]
    bits: [2, 4]
    learning_rate: [0.01]
    steps: [2]
answer:
  tag: ""
"""


def evoenv(*args, cwd=None, threads: int = 1):
    env = {**ENV, "OMP_NUM_THREADS": str(threads)}
    return subprocess.run([str(EXE), *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=900)


def one_line(r, needle):
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr


def code_for(work: Path, name: str, old: str, new: str, model) -> tuple[Path, str]:
    """A bound code in WORK/NAME/ for the test recipe with `old` replaced by `new`: (path, stderr)."""
    recipe = work / f"{name}.yaml"
    recipe.write_text(RECIPE.replace(old, new))
    code = work / name / "bound-code.json"
    code.parent.mkdir()
    r = evoenv("bound-code", code, "--library", work / "lib", "--model", model, "-c", recipe)
    assert r.returncode == 0, r.stderr
    return code, r.stderr


# -- the arithmetic, by hand ---------------------------------------------------------------------
def test_kl_inverse_matches_hand_computed_values():
    # the design note's case: n = 2000, L = 120 bits, delta = 0.05, empirical error 0.5
    c = (120 * math.log(2) + math.log(1 / 0.05)) / 2000
    assert bound.occam_complexity(120, 2000, 0.05) == pytest.approx(c)
    assert c == pytest.approx(0.043085, abs=1e-5)
    p = bound.risk_bound(1000, 2000, 120, 0.05)
    # at q = 1/2, kl(q || p) = -ln 2 - ln(p(1 - p)) / 2, so p = (1 + sqrt(1 - exp(-2c))) / 2 by hand
    assert p == pytest.approx((1 + math.sqrt(1 - math.exp(-2 * c))) / 2, abs=1e-9)
    assert round(p, 4) == 0.6437  # "about 0.65": accuracy >= 0.356
    assert bound.kl_bernoulli(0.5, p) == pytest.approx(c, abs=1e-9)  # the inverse is exact at the edge
    # zero errors: kl(0 || p) = -ln(1 - p), so the inverse is 1 - exp(-c) in closed form
    assert bound.kl_inverse(0.0, 0.1) == pytest.approx(1 - math.exp(-0.1), abs=1e-9)
    assert bound.kl_inverse(0.3, 0.0) == 0.3
    assert bound.kl_inverse(0.9, 50.0) == 1.0  # a vacuous budget bounds nothing
    lo, hi = bound.wilson(50, 100)
    assert (round(lo, 4), round(hi, 4)) == (0.4038, 0.5962)


def test_description_length_is_values_codebook_and_the_grid_union_bound():
    grid = {"u": [13], "bits": [2, 4, 8], "learning_rate": [1e-3, 1e-2], "steps": [20, 40]}
    assert quantize.grid_size(grid) == 12
    dl = quantize.description_length(13, 4, grid, math.log2(len(quantize.SCALES)))
    assert (dl.value_bits, dl.codebook_bits) == (52.0, 7.0)
    assert dl.grid_bits == pytest.approx(math.log2(12))
    assert dl.total == pytest.approx(52 + 7 + 3.5849625)
    assert "0 bits" in dl.free and "projection seed" in dl.free


def test_quantize_picks_the_codebook_with_least_error():
    values = [0.3, -0.3, 0.1, -0.1, 0.29]
    s, codes = quantize.quantize(values, 2)
    levels = quantize.codebook(2, quantize.SCALES[s])
    assert len(levels) == 4 and levels == sorted(levels)
    assert max(abs(v - levels[c]) for v, c in zip(values, codes)) < 0.03
    assert quantize.codebook(1, 0.5) == [-0.5, 0.5]


# -- the commands on the tiny model --------------------------------------------------------------
@pytest.fixture(scope="module")
def work(tmp_path_factory, tiny_model):
    """A one-environment library calibrated (by hand) at levels 1-2, rows from `sample`, the
    recipe, a second tiny model to distil from, and the bound code written before training."""
    from evoenv_cli.llm.tiny import build_tiny_model

    d = tmp_path_factory.mktemp("progressive")
    (d / "lib" / "envs").mkdir(parents=True)
    (d / "lib" / "envs" / FIXTURE.name).write_bytes(FIXTURE.read_bytes())
    env = EnvLibrary.open(d / "lib").files[0]
    index = {"file": env.path.name, "env_id": env.env_id, "name": env.name, "calibration": {"levels": [1, 2]}}
    (d / "lib" / "index.jsonl").write_text(json.dumps(index) + "\n")
    (d / "recipe.yaml").write_text(RECIPE)
    r = evoenv("sample", d / "lib", "-o", d / "rows.jsonl", "-n", "4", "--difficulty-from", "index")
    assert r.returncode == 0, r.stderr
    build_tiny_model(d / "teacher", seed=1)
    r = evoenv(
        "bound-code", d / "bound-code.json", "--library", d / "lib", "--model", tiny_model, "-c", d / "recipe.yaml"
    )
    assert r.returncode == 0, r.stderr
    assert "cost 0 bits" in r.stderr
    return d


def tinylora_vector(path: Path):
    from safetensors.torch import load_file

    state = load_file(str(path / "adapter_model.safetensors"))
    return [state[k] for k in quantize.vector_keys(state)]


@pytest.mark.slow
def test_tinylora_through_train_counts_13_values_changes_them_and_resumes(work, tiny_model):
    args = ["train", work / "rows.jsonl", "--library", work / "lib", "--model", tiny_model]
    out = work / "grpo-tiny"
    r = evoenv(*args, "--out", out, "-c", work / "recipe.yaml", "--max-steps", "2", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["adapter_kind"] == "tinylora" and summary["trained_parameters"] == 13
    manifest = json.loads((out / "train-manifest.json").read_text())
    assert manifest["summary"]["trained_parameters"] == 13
    # what it trained in, resolved (train.bf16 null: on GPUs only), as the bench reads it
    assert summary["bf16"] is False and manifest["summary"]["bf16"] is False
    (v,) = tinylora_vector(out)
    assert v.numel() == 13 and v.abs().sum() > 0  # PEFT starts v at zero: training moved it
    assert (out / "merged" / "config.json").is_file()  # the loop's next round loads the merged copy
    r = evoenv(*args, "--out", out, "-c", work / "recipe.yaml", "--max-steps", "3", "--resume", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["steps"] == 3


@pytest.fixture(scope="module")
def distilled(work, tiny_model):
    out = work / "distill"
    r = evoenv(
        "distill",
        work / "rows.jsonl",
        "--library",
        work / "lib",
        "--teacher",
        work / "teacher",
        "--model",
        tiny_model,
        "--out",
        out,
        "-c",
        work / "recipe.yaml",
        "--json",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return out, json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_rank_other_than_0_of_distill_writes_no_metrics_quantized_copy_or_manifest(work, tiny_model):
    """The same distill as rank 1 of a launch sees it (RANK=1): it trains and saves through the
    trainer (which writes on the main process only) and writes nothing of its own."""
    out = work / "distill-rank1"
    args = ["distill", work / "rows.jsonl", "--library", work / "lib", "--teacher", work / "teacher"]
    argv = [str(EXE), *map(str, args), "--model", str(tiny_model), "--out", str(out), "-c", str(work / "recipe.yaml")]
    r = subprocess.run(argv, capture_output=True, text=True, env={**ENV, "RANK": "1"}, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    for own in ("metrics.jsonl", "quantized", "distill-manifest.json"):
        assert not (out / own).exists(), own


@pytest.mark.slow
def test_distill_trains_a_13_value_student_and_quantizes_it(distilled):
    out, summary = distilled
    assert summary["steps"] == 2 and summary["trained_parameters"] == 13
    assert summary["loss"] == "generalized JSD, beta 1 (reverse KL)" and summary["reward_mixed_in"] is False
    assert summary["bf16"] is False  # distill.bf16 null on a CPU, resolved
    (v,) = tinylora_vector(out)
    assert v.abs().sum() > 0
    q = json.loads((out / "quantized" / "quantized.json").read_text())
    assert q["bits"] == 4 and len(q["codes"]) == 13 and all(0 <= c < 16 for c in q["codes"])
    # 13 values x 4 bits + 7 bits naming the scale + log2(2 grid settings)
    assert q["description_length"]["total"] == pytest.approx(13 * 4 + 7 + 1)
    (qv,) = tinylora_vector(out / "quantized")
    levels = quantize.codebook(4, q["scale"])
    assert [round(x, 6) for x in qv.tolist()] == [round(levels[c], 6) for c in q["codes"]]


def test_reinforce_term_matches_hand_computed_values():
    import torch

    from evoenv_cli.training.mixed_reward import logit_transforms, reinforce_loss

    logps = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.5, -4.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])  # the first completion ended after 2 tokens
    advantages = torch.tensor([0.25, -0.25])
    loss = reinforce_loss(logps, mask, advantages, 5)
    # -(0.25 * (-1 - 2) + (-0.25) * (-0.5 - 0.5 - 4)) / 5 = -(-0.75 + 1.25) / 5
    assert loss.item() == pytest.approx(-0.1)
    loss.backward()
    # descending the loss raises the log-probs of the better completion, lowers the worse one's,
    # and leaves the masked token alone
    assert logps.grad.flatten().tolist() == pytest.approx([-0.05, -0.05, 0.0, 0.05, 0.05, 0.05])
    from transformers import LlamaConfig

    assert logit_transforms(LlamaConfig()) == []
    assert logit_transforms(LlamaConfig(final_logit_softcapping=30.0)) == ["final_logit_softcapping"]


@pytest.mark.slow
def test_distill_mixes_the_environments_reward_in(work, tiny_model):
    # batches of 4 completions of 24 tokens: enough text that the random model writes a digit
    # somewhere, so digit_share's rewards differ inside a batch
    wider = "distill:\n  per_device_train_batch_size: 4\n  max_completion_length: 24\n  learning_rate: 0.01\n"
    base = RECIPE.replace("distill:\n  max_steps: 2\n  per_device_train_batch_size: 2\n", "distill:\n  max_steps: 2\n")
    base = base.replace(
        "distill:\n  max_steps: 2\n  max_completion_length: 8\n  learning_rate: 0.01\n", wider + "  max_steps: 2\n"
    )
    assert "max_completion_length: 24" in base
    recipe = work / "mixed.yaml"
    recipe.write_text(base)
    runs = {}
    for weight in (0.0, 1.0):  # the recipe's default weight 0, then --reward-weight 1
        out = work / f"distill-mixed-{weight:g}"
        args = ["distill", work / "rows.jsonl", "--library", work / "lib", "--teacher", work / "teacher"]
        flag = ["--reward-weight", weight] if weight else []
        r = evoenv(*args, "--model", tiny_model, "--out", out, "-c", recipe, *flag, "--json")
        assert r.returncode == 0, r.stderr[-3000:]
        runs[weight] = out, json.loads(r.stdout.strip().splitlines()[-1])
    one_line(evoenv(*args, "--model", tiny_model, "--out", work / "never", "--reward-weight", "-1"), "--reward-weight")
    (plain, plain_summary), (mixed, summary) = runs[0.0], runs[1.0]
    assert plain_summary["reward_mixed_in"] is False and summary["reward_mixed_in"] is True
    assert summary["reward_weight"] == 1.0 and summary["trained_parameters"] == 13
    assert summary["loss"] == "generalized JSD, beta 1 (reverse KL) + 1 x REINFORCE on the environments' reward"
    logged = [json.loads(x) for x in (mixed / "metrics.jsonl").read_text().splitlines()]
    steps = [x for x in logged if "reward" in x]
    assert len(steps) == 2 and all(0.0 <= x["reward"] < 1.0 for x in steps)
    assert any(x["reward_std"] > 0 and x["reward_term"] != 0 for x in steps)  # digit shares differ, so it pulls
    assert all("reward" not in json.loads(x) for x in (plain / "metrics.jsonl").read_text().splitlines())
    # same seed, same rows, same first samples: only the reward term moves the vector apart
    (a,), (b,) = tinylora_vector(plain), tinylora_vector(mixed)
    assert not bool((a == b).all())
    q = json.loads((mixed / "quantized" / "quantized.json").read_text())
    assert q["hyperparameters"]["reward_weight"] == 1.0
    manifest = json.loads((mixed / "distill-manifest.json").read_text())
    assert (
        manifest["config"]["reward"]["format_weight"] == 0.0
        and "reward" not in json.loads((plain / "distill-manifest.json").read_text())["config"]
    )


@pytest.mark.slow
def test_bound_is_deterministic_and_prints_its_statement(work, distilled, tiny_model):
    out, _ = distilled
    args = ["bound", out / "quantized", "--library", work / "lib", "-c", work / "recipe.yaml"]
    # the second run answers in two processes (one a torch thread of two): the same answers, and
    # stdout still only the JSON
    first, second = evoenv(*args, "--json"), evoenv(*args, "--json", threads=2)
    assert first.returncode == 0 and second.returncode == 0, first.stderr[-3000:] + second.stderr[-3000:]
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert a == b
    assert a["n"] == 8 and a["kind"] == "tinylora-quantized" and a["trained_parameters"] == 13
    assert a["description_length_bits"] == pytest.approx(60.0)
    assert a["risk_bound"] == pytest.approx(bound.risk_bound(a["errors"], 8, 60.0, 0.05))
    assert a["form"].startswith("kl-inverse (Langford-Seeger)")
    assert "generate(seed, level)" in a["statement"] and "temperature 1" in a["statement"]
    r = evoenv(*args)
    assert r.returncode == 0 and "base model on the same S" in r.stderr and "0 bits" in r.stderr
    # each run is one line of bounds.jsonl beside the code, and the report shows the latest
    lines = [json.loads(x) for x in (work / "bounds.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and {x["risk_bound"] for x in lines} == {a["risk_bound"]}
    assert f"recorded in {work / 'bounds.jsonl'}" in r.stderr.replace("\n", "")
    from evoenv_cli.report.numbers import bounds
    from evoenv_cli.report.run_files import RunFiles

    (shown,) = bounds(RunFiles(work))
    assert shown["checkpoint"] == str(out / "quantized") and shown["accuracy_lower_bound"] == a["accuracy_lower_bound"]
    # a second code beside it that differs only in the adapter family reuses the base's answers
    (base_file,) = work.glob("bound-base-*.json")
    stamp = base_file.stat().st_mtime_ns
    untied = work / "untied.yaml"
    untied.write_text(RECIPE.replace("tinylora_weight_tying: 1.0", "tinylora_weight_tying: 0.0"))
    code = work / "bound-code-untied.json"
    assert evoenv("bound-code", code, "--library", work / "lib", "--model", tiny_model, "-c", untied).returncode == 0
    r = evoenv("bound", tiny_model, "--library", work / "lib", "--code", code, "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["base_accuracy"] == a["base_accuracy"]
    assert list(work.glob("bound-base-*.json")) == [base_file] and base_file.stat().st_mtime_ns == stamp
    one_line(evoenv(*args, "--temperature", "0.5"), "differs from the 1 recorded before S")
    assert a["statement"].count("float32") == 1  # the code's dtype (the default), named


@pytest.mark.slow
def test_bound_in_bfloat16_is_recorded_in_the_code_and_deterministic(work, distilled, tiny_model):
    out, _ = distilled
    code, _ = code_for(work, "bf16", "  batch_size: 4\n", "  batch_size: 3\n  dtype: bfloat16\n", tiny_model)
    recorded = json.loads(code.read_text())
    assert (recorded["dtype"], recorded["batch_size"]) == ("bfloat16", 3)
    # the recipe given to `bound` asks for batches of 4: the code's 3 is what answers S
    args = ["bound", out / "quantized", "--library", work / "lib", "--code", code, "-c", work / "recipe.yaml", "--json"]
    first, second = evoenv(*args), evoenv(*args)
    assert first.returncode == 0, first.stderr[-3000:]
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert a == b and a["n"] == 8 and "bfloat16" in a["statement"]
    assert recorded["device"] == "cpu" and "bfloat16 on cpu" in a["statement"]
    assert recorded["batching"] == "shared-context"
    # "auto" is recorded resolved: bfloat16 where this CPU computes in it natively, else float32
    auto, _ = code_for(work, "auto", "  batch_size: 4\n", "  batch_size: 4\n  dtype: auto\n", tiny_model)
    assert json.loads(auto.read_text())["dtype"] == precision.resolved_dtype("auto") != "auto"
    # a code written before batching was recorded answers padded, and hashes as it did
    del recorded["batching"]
    fields = {k: v for k, v in recorded.items() if k != "code_sha256"}
    padded = bound.BoundCode(**fields)
    assert padded.batching == "padded"
    assert padded.digest() == artifacts.config_hash({k: v for k, v in fields.items() if k != "written"})
    # an older code, written before dtype, batch size and device were recorded, still reads: float32
    del recorded["dtype"], recorded["batch_size"], recorded["device"]
    older = bound.BoundCode(**{k: v for k, v in recorded.items() if k != "code_sha256"})
    assert (older.dtype, older.device) == ("float32", "cpu")


@pytest.mark.slow
def test_bound_on_cuda_without_a_cuda_device_is_one_line(work, distilled, tiny_model):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the cuda path is `make gpu-check`'s")
    out, _ = distilled
    code, said = code_for(work, "cuda", "  batch_size: 4\n", "  batch_size: 4\n  device: cuda\n", tiny_model)
    assert "on cuda" in said
    r = evoenv("bound", out / "quantized", "--library", work / "lib", "--code", code)
    one_line(r, "this machine has no CUDA device")
    assert not (code.parent / "bounds.jsonl").exists()


@pytest.mark.slow
def test_bound_refuses_a_checkpoint_outside_the_recorded_code(work, distilled, tiny_model):
    out, _ = distilled
    # a code recorded with another projection seed: the checkpoint's seed differs from it
    seed = "  tinylora_u: 13\n  tinylora_projection_seed: 7\n"
    code, _ = code_for(work, "other", "  tinylora_u: 13\n", seed, tiny_model)
    r = evoenv("bound", out / "quantized", "--library", work / "lib", "--code", code)
    one_line(r, "its code differs from the one recorded before S: projection_seed 42 (the code records 7)")
    # a code recorded for another base model
    code = work / "teacher-code" / "bound-code.json"
    code.parent.mkdir()
    r = evoenv("bound-code", code, "--library", work / "lib", "--model", work / "teacher", "-c", work / "recipe.yaml")
    assert r.returncode == 0, r.stderr
    r = evoenv("bound", out / "quantized", "--library", work / "lib", "--code", code)
    one_line(r, "does not hash to the recorded")
    # the code never moves once written
    r = evoenv("bound-code", code, "--library", work / "lib", "--model", tiny_model)
    one_line(r, "a bound code is already recorded")


@pytest.fixture(scope="module")
def sampled(work, distilled, tiny_model):
    """A bound code in a folder of its own, and one run of `bound` on the quantized student with
    its samples written: (code, the bound's arguments, the samples file, its JSON report). The
    samples test and the --first test both read this whole run."""
    out, _ = distilled
    code, _ = code_for(work, "samples", "  n: 8\n", "  n: 8\n", tiny_model)
    args = ["bound", out / "quantized", "--library", work / "lib", "--code", code, "-c", work / "recipe.yaml"]
    first = work / "samples" / "q1.jsonl"
    r = evoenv(*args, "--json", "--samples", first)
    assert r.returncode == 0, r.stderr[-3000:]
    return code, args, first, json.loads(r.stdout)


@pytest.mark.slow
def test_bound_samples_write_each_item_answered_and_scored(work, sampled, tiny_model):
    code, args, first, report = sampled
    recorded = json.loads(code.read_text())
    items = [json.loads(x) for x in first.read_text().splitlines()]
    assert [x["item"] for x in items] == list(range(8))
    assert sum(x["correct"] for x in items) == 8 - report["errors"]
    assert all(x["correct"] == (x["score"] >= 0.5) for x in items)  # the code's threshold
    assert [x["noise_seed"] for x in items] == [bound.noise_seed(recorded["seed"], j) for j in range(8)]
    assert {x["difficulty"] for x in items} <= {1, 2} and all(x["question"] and x["env_id"] for x in items)
    # a second run, its samples on stdout (without --json, stdout is free for them), answers as
    # the first did: the answers are a function of (model, instance, noise)
    on_stdout = evoenv(*args, "--samples", "-")
    assert on_stdout.returncode == 0 and on_stdout.stdout == first.read_text(), on_stdout.stderr[-2000:]
    # the base model's samples come from its answers kept beside the code...
    (cache,) = code.parent.glob("bound-base-*.json")
    kept = json.loads(cache.read_text())
    base_args = ["bound", tiny_model, "--library", work / "lib", "--code", code, "--json", "--samples"]
    r = evoenv(*base_args, work / "samples" / "base.jsonl")
    assert r.returncode == 0, r.stderr[-3000:]
    base_items = [json.loads(x) for x in (work / "samples" / "base.jsonl").read_text().splitlines()]
    assert [x["answer"] for x in base_items] == kept["answers"]
    assert [x["correct"] for x in base_items] == kept["correct"] and json.loads(r.stdout)["base_accuracy"] == (
        sum(kept["correct"]) / 8
    )
    # ... and are answered again where an older cache kept only which were correct
    cache.write_text(json.dumps({k: kept[k] for k in ("answering_sha256", "correct")}))
    assert evoenv(*base_args, work / "samples" / "again.jsonl").returncode == 0
    assert (work / "samples" / "again.jsonl").read_text() == (work / "samples" / "base.jsonl").read_text()
    assert json.loads(cache.read_text()) == kept  # and kept there again
    # a bad --samples is found before any answering, and nothing is recorded
    lines = (code.parent / "bounds.jsonl").read_text()
    one_line(evoenv(*args, "--samples", work / "samples"), "is a folder; the output here is a file")
    one_line(evoenv(*args, "--json", "--samples", "-"), "--samples - with --json")
    assert (code.parent / "bounds.jsonl").read_text() == lines


def test_tinylora_partial_tying_trains_one_vector_a_group(tiny_model):
    """weight_tying between 0 and 1 (the bench's two groups): PEFT splits the adapted modules in
    order into round(M * (1 - t)) groups, one u-value vector each, and the count says so."""
    import dataclasses

    from transformers import AutoModelForCausalLM

    from evoenv_cli.config import TrainConfig
    from evoenv_cli.stages.train import adapter_config, trained_parameters

    def count(tying: float) -> int:
        from peft import get_peft_model

        cfg = dataclasses.replace(TrainConfig(), adapter="tinylora", tinylora_u=13, tinylora_weight_tying=tying)
        model = AutoModelForCausalLM.from_pretrained(str(tiny_model))
        return trained_parameters(get_peft_model(model, adapter_config(cfg)))

    untied = count(0.0)  # one vector per adapted module
    modules = untied // 13
    assert modules > 2 and untied == 13 * modules
    assert count(1.0) == 13
    assert count(1 - 2 / modules) == 26  # two groups
    assert count(1 - 3 / modules) == 39


def test_first_k_takes_the_first_instances_of_each_level_as_an_s_of_k_would_split_them():
    # S's order: environment by environment, levels in blocks, low to high (6 of a at 1-3, 4 of b at 1-2)
    rows = [{"env_id": "a", "difficulty": d} for d in (1, 1, 2, 2, 3, 3)]
    rows += [{"env_id": "b", "difficulty": d} for d in (1, 1, 2, 2)]
    assert bound.prefix(rows, None) == list(range(10))
    assert bound.prefix(rows, 3) == [0, 2, 4, 6, 7, 8]  # a: one a level; b: 2 at level 1, 1 at level 2
    assert bound.prefix(rows, 4) == [0, 1, 2, 4, 6, 7, 8, 9]
    assert bound.prefix(rows, 6) == list(range(10))
    # every level of the starter bench's S of 3,072 keeps its share in the first 1,024
    s = [{"env_id": "e", "difficulty": d} for d in draw_levels([1, 2, 3], 3072)]
    kept = [s[j]["difficulty"] for j in bound.prefix(s, 1024)]
    assert [kept.count(d) for d in (1, 2, 3)] == [draw_levels([1, 2, 3], 1024).count(d) for d in (1, 2, 3)]


def test_bench_tables_by_level_on_the_items_every_arm_answered(tmp_path):
    # an arm that answered all of S (levels 1-3 in blocks of 4) and one that answered its first 6
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_progressive

    s = [{"env_id": "e", "difficulty": d, "correct": c} for d, c in zip(draw_levels([1, 2, 3], 12), [1, 1, 0, 0] * 3)]
    whole, part = tmp_path / "whole.jsonl", tmp_path / "part.jsonl"
    whole.write_text("".join(json.dumps(r) + "\n" for r in s))
    part.write_text("".join(json.dumps(s[j]) + "\n" for j in bound.prefix(s, 6)))
    # the first 6 are the first 2 of each level: all correct; on all of S half are
    assert bench_progressive.by_level(whole, 6) == {"1": 1.0, "2": 1.0, "3": 1.0}
    assert bench_progressive.by_level(part, 6) == bench_progressive.by_level(whole, 6)
    assert bench_progressive.by_level(whole) == {"1": 0.5, "2": 0.5, "3": 0.5}
    assert bench_progressive.side_by_side(whole, 6) == [1] * 6  # the same items, in S's order


@pytest.mark.slow
def test_bound_first_k_answers_a_prefix_of_s_as_the_whole_run_does(work, sampled):
    code, args, whole, _ = sampled
    part = code.parent / "part.jsonl"
    # S holds 8 at levels 1-2 (4 each); the first 4 are 2 of each, answered as in the whole run
    # (the same items and noise; their answers, in a batch of their own, match the whole run's)
    r = evoenv(*args, "--json", "--samples", part, "--first", "4")
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    everything = whole.read_text().splitlines()
    assert [json.loads(x)["difficulty"] for x in everything] == [1, 1, 1, 1, 2, 2, 2, 2]
    picked = [0, 1, 4, 5]
    assert part.read_text().splitlines() == [everything[j] for j in picked]
    assert (report["n"], report["sample_n"]) == (4, 8)
    assert report["errors"] == sum(not json.loads(x)["correct"] for x in part.read_text().splitlines())
    assert report["risk_bound"] == pytest.approx(bound.risk_bound(report["errors"], 4, 60.0, 0.05))
    (cache,) = code.parent.glob("bound-base-*.json")
    assert report["base_accuracy"] == sum(json.loads(cache.read_text())["correct"][j] for j in picked) / 4
    # the same prefix without --json, its samples in a file (the samples test's second run writes
    # them to stdout): the same lines
    plain = code.parent / "part-plain.jsonl"
    r = evoenv(*args[:-2], "--first", "4", "--samples", plain)
    assert r.returncode == 0 and "the first 4 instances of each environment: 4 of S's 8" in r.stderr
    assert plain.read_text() == part.read_text()
    assert "deprecated" not in r.stderr  # loading the adapter says nothing the user cannot act on
    one_line(evoenv(*args, "--first", "9"), "--first 9: S holds 8 instances of each environment")


def _traced_answers(monkeypatch, model, tokenizer, prompts, code, batch_size, items=None):
    """gumbel_answers, and the float32 logits each item's noise was added to, by (noise seed,
    step): the arithmetic an answer is a function of, seen bit for bit."""
    import collections

    seen, steps = {}, collections.Counter()
    perturbed = answering._perturbed

    def tracing(scores, generators, temperature):
        for row, g in zip(scores, generators):
            seed = g.initial_seed()
            seen[seed, steps[seed]] = row.clone()
            steps[seed] += 1
        return perturbed(scores, generators, temperature)

    monkeypatch.setattr(answering, "_perturbed", tracing)
    try:
        return answering.gumbel_answers(model, tokenizer, prompts, code, batch_size, items), seen
    finally:
        monkeypatch.setattr(answering, "_perturbed", perturbed)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_an_answer_alone_is_the_answer_in_any_batch_token_for_token(monkeypatch, tiny_model, dtype):
    """The shared-context rule: an item answered alone, inside a batch of others, or among
    other companions in another order gets the same tokens from the same logits, bit for bit,
    with its own noise (the rule's seed for its position in S). Prompts of several context and
    question lengths, contexts (demonstrations) shared by some, reads of 8 filled or full,
    answers of every length (a sixth of the vocabulary ends one) so that slots free and take
    new reads mid-way; contexts read in windows or all at once. Padding, the old rule, moves
    the logits of the same prompts with their batch: the check sees what it is there to see."""
    from types import SimpleNamespace

    model, tokenizer = bound.load_policy(bound.Policy(tiny_model, "base", str(tiny_model), None, 0), dtype)
    ends = set(range(3, 2048, 6))
    monkeypatch.setattr(answering, "_eos_ids", lambda *_: ends)

    def demo(k):
        return [{"role": "user", "content": f"What is {k} + {k}?"}, {"role": "assistant", "content": f"{2 * k}"}]

    prompts = [demo(10 + i % 12) + [{"role": "user", "content": f"What is {7 * i} + {13 * i}?"}] for i in range(30)]
    prompts += [[{"role": "user", "content": f"Say {i}."}] for i in range(4)]  # no context at all
    items = list(range(100, 100 + len(prompts)))  # positions in a larger S: the noise follows them
    code = SimpleNamespace(seed=7, temperature=0.7, max_tokens=10, batching="shared-context")
    split = [answering._split(tokenizer, p) for p in prompts]
    assert len({(len(c), len(q)) for c, q in split}) >= 6 and len({c for c, _ in split}) == 13

    together, logits = _traced_answers(monkeypatch, model, tokenizer, prompts, code, 16, items)
    assert {seed for seed, _ in logits} == {answering.noise_seed(7, j) for j in items}
    steps = Counter(seed for seed, _ in logits)
    assert min(steps.values()) == 1 and max(steps.values()) == 10 and len(set(steps.values())) >= 5
    backwards, logits_back = _traced_answers(monkeypatch, model, tokenizer, prompts[::-1], code, 16, items[::-1])
    assert backwards[::-1] == together
    assert logits_back.keys() == logits.keys() and all(torch_equal(logits_back[k], logits[k]) for k in logits)
    reads = []
    read = answering._read_contexts
    monkeypatch.setattr(answering, "_read_contexts", lambda *a: reads.append(a[1]) or read(*a))
    monkeypatch.setattr(answering, "CONTEXT_BYTES", 1)  # windows of 8 (a read's rows) distinct contexts
    assert _traced_answers(monkeypatch, model, tokenizer, prompts, code, 16, items)[0] == together
    assert max(map(len, reads)) == 8 and sum(map(len, reads)) > 13  # windowed: some read twice
    monkeypatch.setattr(answering, "CONTEXT_BYTES", 1 << 30)
    monkeypatch.setattr(answering, "_read_contexts", read)
    for prompt, j, answer in zip(prompts, items, together):
        (alone,), seen = _traced_answers(monkeypatch, model, tokenizer, [prompt], code, 16, [j])
        assert alone == answer
        assert seen.keys() == {k for k in logits if k[0] == answering.noise_seed(7, j)}
        assert all(torch_equal(v, logits[k]) for k, v in seen.items())

    monkeypatch.undo()
    padded = SimpleNamespace(**{**vars(code), "batching": "padded"})
    _, in_batch = _traced_answers(monkeypatch, model, tokenizer, prompts, padded, 4, items)
    alone = {}
    for prompt, j in zip(prompts, items):
        alone.update(_traced_answers(monkeypatch, model, tokenizer, [prompt], padded, 4, [j])[1])
    assert any(not torch_equal(alone[k], in_batch[k]) for k in in_batch)


def torch_equal(a, b) -> bool:
    import torch

    return torch.equal(a, b)


@pytest.mark.parametrize("vocab", [2048, 49153])
def test_the_noise_is_the_rules_bit_for_bit_row_by_row(vocab):
    """_perturbed, row by row in buffers, against NOISE_RULE written out over the whole matrix:
    logits/T + G, G = -log(-log U), U the item's generator's float64 uniforms."""
    import torch

    logits = torch.randn(5, vocab, generator=torch.Generator().manual_seed(0)) * 8

    def generators():
        return [torch.Generator().manual_seed(answering.noise_seed(7, j)) for j in range(5)]

    uniforms = torch.stack([torch.rand(vocab, generator=g, dtype=torch.float64) for g in generators()])
    rule = (logits.double() / 0.7 + -torch.log(-torch.log(uniforms.clamp(min=1e-300)))).float()
    ours = generators()
    assert torch.equal(answering._perturbed(logits, ours, 0.7), rule)
    # the generators moved on by one draw: the next step's noise is the next uniforms
    again = [torch.Generator().manual_seed(answering.noise_seed(7, j)) for j in range(5)]
    for g in again:
        torch.rand(vocab, generator=g, dtype=torch.float64)
    assert torch.equal(answering._perturbed(logits, ours, 0.7), answering._perturbed(logits, again, 0.7))


def test_shards_keep_contexts_whole_and_sizes_even():
    def prompt(demo: int, q: int):
        return [
            {"role": "user", "content": f"d{demo}"},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": f"q{q}"},
        ]

    prompts = [prompt(i % 5, i) for i in range(23)] + ["plain", "text"]
    parts = answering._shards(prompts, 2)
    assert sorted(k for part in parts for k in part) == list(range(25))
    assert all(part == sorted(part) for part in parts) and abs(len(parts[0]) - len(parts[1])) <= 5
    for part in parts:  # a context is read in one process only
        others = [k for other in parts if other is not part for k in other]
        assert not {str(prompts[k][:-1]) for k in part} & {str(prompts[k][:-1]) for k in others}
    assert answering._shards(prompts[:3], 8) == [[0], [1], [2]] and answering._shards(prompts, 1) == [list(range(25))]
    assert answering._shards(["a", "b", "c", [{"role": "user", "content": "d"}]], 2) == [[0, 2], [1, 3]]


@pytest.mark.slow
def test_answers_in_two_processes_are_the_answers_in_one(tiny_model):
    """`answer` spawns one process a part, each of one torch thread: the same answers as one
    process of one thread (the split decides only the time), and the old rule still answers in
    this process, in one call."""
    import functools
    from types import SimpleNamespace

    policy = bound.Policy(tiny_model, "base", str(tiny_model), None, 0)
    load = functools.partial(bound.load_policy, policy, "bfloat16", "cpu")

    def demo(k):
        return [{"role": "user", "content": f"What is {k} + {k}?"}, {"role": "assistant", "content": f"{2 * k}"}]

    prompts = [demo(10 + i % 6) + [{"role": "user", "content": f"What is {7 * i} + {i}?"}] for i in range(20)]
    items = list(range(50, 70))
    code = SimpleNamespace(seed=7, temperature=0.7, max_tokens=6, batching="shared-context", device="cpu")
    one = answering.answer(load, prompts, code, 16, items, processes=1)
    assert answering.answer(load, prompts, code, 16, items, processes=2) == one
    padded = SimpleNamespace(**{**vars(code), "batching": "padded"})
    model, tokenizer = load()
    assert answering.answer(load, prompts, padded, 4, items, processes=2) == answering.gumbel_answers(
        model, tokenizer, prompts, padded, 4, items
    )
