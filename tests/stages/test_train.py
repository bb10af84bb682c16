import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SEEDS

EXE = Path(sys.executable).with_name("evoenv")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
FIXTURE = Path(__file__).parents[1] / "fixtures" / "digit_share.py"
RECIPE = """train:
  num_generations: 2
  per_device_train_batch_size: 4
  max_completion_length: 8
  learning_rate: 0.01
  gradient_checkpointing: false
  save_steps: 2
  # the random model's completions all run to max_completion_length: masked (the default),
  # none would count in the loss and no weight would change
  mask_truncated_completions: false
answer:
  tag: ""
"""


def evoenv(*args, cwd=None):
    return subprocess.run([str(EXE), *map(str, args)], capture_output=True, text=True, env=ENV, cwd=cwd, timeout=900)


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    """Rows of a partial-credit fixture whose reward varies for a random model (the seeds'
    rewards are all 0 for it, and a group of equal rewards teaches nothing); the library
    holds the seeds too."""
    d = tmp_path_factory.mktemp("train")
    lib = d / "lib"
    lib.mkdir()
    for f in [FIXTURE, *SEEDS.glob("*.py")]:
        (lib / f.name).write_bytes(f.read_bytes())
    out = d / "rows.jsonl"
    assert evoenv("sample", lib, "-o", out, "-n", "2", "-d", "1").returncode == 0
    lines = out.read_text().splitlines()
    digits = [x for x in lines if '"digit_share"' in x]
    out.write_text("\n".join(digits * 4) + "\n")  # the seeds are in the library, not in these rows
    (d / "recipe.yaml").write_text(RECIPE)
    return out


def test_demonstrations_fade_once_the_format_share_reaches_the_threshold():
    """Rows are read through the fade's transform: with their demonstration turns until a
    logged step's format share reaches the threshold, without them (system prompt kept) after."""
    import datasets

    from evoenv_cli.stages.train import DemonstrationFade

    prompt = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "demo task"},
        {"role": "assistant", "content": "<answer>1</answer>"},
        {"role": "user", "content": "the task"},
    ]
    data = datasets.Dataset.from_list([{"prompt": prompt, "env_id": "x"}] * 2)
    fade = DemonstrationFade(0.8)
    data.set_transform(fade.transform)
    fade.observe(1, 0.5)
    assert data[0]["prompt"] == prompt and fade.faded_at is None
    fade.observe(2, 0.85)
    fade.observe(3, 0.1)  # once faded, stays faded
    assert fade.faded_at == 2 and data[1]["prompt"] == [prompt[0], prompt[-1]] and data[1]["env_id"] == "x"


def weights(path: Path):
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors"))
    assert files, f"no weights in {path}"
    out = {}
    for f in files:
        out.update(load_file(str(f)))
    return out


@pytest.mark.slow
def test_grpo_steps_change_weights_and_log_rewards(tiny_model, rows, tmp_path):
    out = tmp_path / "ckpt"
    r = evoenv(
        "train",
        rows,
        "--library",
        rows.parent / "lib",
        "--model",
        tiny_model,
        "--out",
        out,
        "--config",
        rows.parent / "recipe.yaml",
        "--max-steps",
        "2",
        "--json",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 2
    before, after = weights(tiny_model), weights(out)
    changed = [k for k in before if k in after and not (before[k] == after[k]).all()]
    assert changed, "training changed no weight"
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    for m in metrics:
        assert "reward" in m and "reward_std" in m and "frac_reward_zero_std" in m
        assert m["per_env"] and all(
            {"reward_mean", "reward_std", "pass_rate", "n"} <= set(v) for v in m["per_env"].values()
        )
        # the task's own signal: the score's zero-variance share (the sum's is TRL's), per reward
        # function, and the time spent in the reward path against TRL's step_time
        assert 0 <= m["train/zero_variance_share"] <= 1 and 0 <= m["train/score_mean"] <= 1
        assert m["train/format_share"] == 1.0  # an empty answer tag: every completion is its answer
        assert set(m["zero_variance_by_reward"]) == {"evoenv_env_reward", "evoenv_format_reward"}
        assert 0 < m["train/reward_seconds"] < m["step_time"]
    manifest = json.loads((out / "train-manifest.json").read_text())
    assert manifest["summary"]["steps"] == 2 and manifest["config"]["train"]["num_generations"] == 2
    assert manifest["summary"]["signal"] in ("score", "none") and 0 < manifest["summary"]["reward_share"] < 1
    # resume from the last checkpoint runs the remaining steps only
    r = evoenv(
        "train",
        rows,
        "--library",
        rows.parent / "lib",
        "--model",
        tiny_model,
        "--out",
        out,
        "--config",
        rows.parent / "recipe.yaml",
        "--max-steps",
        "3",
        "--resume",
        "--json",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["steps"] == 3


@pytest.mark.slow
def test_lora_adapter_and_merged_copy(tiny_model, rows, tmp_path):
    recipe = tmp_path / "lora.yaml"
    recipe.write_text(
        RECIPE.replace("train:\n", "train:\n  lora: true\n  lora_r: 4\n  lora_alpha: 8\n  merge_lora: true\n")
    )
    out = tmp_path / "lora"
    r = evoenv(
        "train",
        rows,
        "--library",
        rows.parent / "lib",
        "--model",
        tiny_model,
        "--out",
        out,
        "--config",
        recipe,
        "--max-steps",
        "1",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "adapter_config.json").is_file() and (out / "merged" / "config.json").is_file()


def one_line(r, needle):
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr


def test_bad_inputs_fail_before_training(tiny_model, rows, tmp_path):
    bad = tmp_path / "bad.jsonl"
    row = json.loads(rows.read_text().splitlines()[0])
    bad.write_text(json.dumps({k: v for k, v in row.items() if k != "instance"}) + "\n")
    one_line(
        evoenv("train", bad, "--library", rows.parent / "lib", "--model", tiny_model, "--out", tmp_path / "a"),
        "bad.jsonl:1: row lacks instance",
    )
    bad.write_text(json.dumps(dict(row, env_id="f" * 16, env_name="gone")) + "\n")
    one_line(
        evoenv("train", bad, "--library", rows.parent / "lib", "--model", tiny_model, "--out", tmp_path / "b"),
        "is not in the library",
    )
    one_line(
        evoenv(
            "train", rows, "--library", rows.parent / "lib", "--model", tmp_path / "no-model", "--out", tmp_path / "c"
        ),
        "no such model folder",
    )
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()


@pytest.mark.slow
def test_eval_data_and_the_format_reward_are_logged_apart(tiny_model, rows, tmp_path):
    """TRL as a researcher runs it with held-out rows: `sample --split heldout` rows as its
    eval_dataset, and the format bonus a reward function of its own (logged under its name)."""
    lib = rows.parent / "lib"
    held = tmp_path / "heldout.jsonl"
    r = evoenv("sample", lib, "-o", held, "-n", "2", "-d", "1", "--split", "heldout")
    assert r.returncode == 0, r.stderr
    lines = [x for x in held.read_text().splitlines() if '"digit_share"' in x]
    held.write_text("\n".join(lines * 2) + "\n")
    assert all(json.loads(x)["seed"] >= 2**31 for x in lines)
    recipe = tmp_path / "eval.yaml"
    recipe.write_text(
        RECIPE.replace("  save_steps: 2\n", "  save_steps: 2\n  eval_steps: 1\n") + "reward:\n  format_weight: 0.25\n"
    )
    out = tmp_path / "ckpt"
    r = evoenv(
        "train",
        rows,
        "--library",
        lib,
        "--model",
        tiny_model,
        "--out",
        out,
        "--config",
        recipe,
        "--eval-data",
        held,
        "--max-steps",
        "2",
        "--json",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "`gradient_checkpointing` is deprecated" not in r.stderr  # transformers asked for the new name
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    train = [m for m in metrics if "reward" in m]
    evals = [m for m in metrics if "eval_reward" in m]
    assert [m["step"] for m in train] == [1, 2] and [m["step"] for m in evals] == [1, 2]
    for m in train:
        env, fmt = m["rewards/evoenv_env_reward/mean"], m["rewards/evoenv_format_reward/mean"]
        assert fmt == 1.0  # answer.tag "" takes the whole response: always well formed
        assert m["reward"] == pytest.approx(0.75 * env + 0.25 * fmt, abs=1e-4)
    assert "eval_rewards/evoenv_format_reward/mean" in evals[0]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["eval_rows"] == 4 and summary["eval_reward"] == round(evals[-1]["eval_reward"], 4)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x"}\n')
    one_line(
        evoenv("train", rows, "--library", lib, "--model", tiny_model, "--out", tmp_path / "z", "--eval-data", bad),
        "bad.jsonl:1: row lacks env_id, instance",
    )


@pytest.mark.slow
def test_the_console_gets_one_plain_line_per_step_and_the_raw_dicts_go_to_the_log(tiny_model, rows, tmp_path):
    """Per step: its number, its measured seconds, the score's mean and zero-variance share,
    the format share and an ETA; TRL's metric dicts only in OUT/log.txt."""
    recipe = tmp_path / "fmt.yaml"
    recipe.write_text(RECIPE + "reward:\n  format_weight: 0.25\n")
    out = tmp_path / "ckpt"
    r = evoenv(
        "train", rows, "--library", rows.parent / "lib", "--model", tiny_model, "--out", out, "--config", recipe,
        "--max-steps", "3",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    steps = [x for x in r.stderr.splitlines() if x.startswith("train step ")]
    assert len(steps) == 3, r.stderr[-3000:]
    for i, line in enumerate(steps, 1):
        assert re.fullmatch(
            rf"train step {i}/3: \d+\.\d s \| score \d\.\d{{3}} \(zero-variance \d+% of groups\) \| "
            r"format 100% \| ETA (\d+s|\d+m \d\ds)",
            line,
        ), line
    assert steps[-1].endswith("ETA 0s")
    for raw in ("frac_reward_zero_std", "rewards/evoenv_env_reward/mean", "{'loss'", "it/s]"):
        assert raw not in r.stderr, raw
    logged = [json.loads(x) for x in (out / "log.txt").read_text().splitlines()]
    assert [d["step"] for d in logged if "frac_reward_zero_std" in d] == [1, 2, 3]
    assert any("train_runtime" in d for d in logged)  # TRL's closing summary, logged too


def _train_argv(rows, tiny_model, out, *extra):
    return [
        str(EXE),
        "train",
        str(rows),
        "--library",
        str(rows.parent / "lib"),
        "--model",
        str(tiny_model),
        "--out",
        str(out),
        "--config",
        str(rows.parent / "recipe.yaml"),
        "--max-steps",
        "4",
        "--json",
        *extra,
    ]


def _steps(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


def test_a_checkpoint_a_kill_cut_short_is_dropped_and_the_last_whole_one_resumed(tmp_path):
    """The kill test's intermittent failure (CI-like load, 2026-12-06): SIGKILL landed while
    checkpoint-2 was being saved, and the rerun failed with "Can't find a valid checkpoint at
    .../checkpoint-2". transformers writes trainer_state.json last: without it (or cut short) a
    checkpoint is dropped, and the run resumes from the last whole one."""
    from evoenv_cli.stages.train import METRICS_FILE, resume_from

    folder = tmp_path / "checkpoints"
    for step, state in ((2, '{"global_step": 2}'), (4, None), (6, '{"global_st')):
        (folder / f"checkpoint-{step}").mkdir(parents=True)
        (folder / f"checkpoint-{step}" / "model.safetensors").write_bytes(b"weights")
        if state is not None:
            (folder / f"checkpoint-{step}" / "trainer_state.json").write_text(state)
    (tmp_path / METRICS_FILE).write_text("".join(json.dumps({"step": k}) + "\n" for k in range(1, 6)))
    resume_from(tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint-2"]
    assert [m["step"] for m in _steps(tmp_path)] == [1, 2]


def test_a_resume_with_no_checkpoint_to_find_does_not_import_torch(tmp_path):
    """Every stage the loop runs is resumed, train's too, and its `resume_from` looked for a
    checkpoint through transformers' get_last_checkpoint: 5 CPU-seconds of imports (torch,
    transformers, PEFT) before a scripted train child's first step, with no checkpoint there."""
    (tmp_path / "checkpoints").mkdir()
    code = (
        "import sys; from pathlib import Path; from evoenv_cli.stages.train import resume_from; "
        f"resume_from(Path({str(tmp_path)!r})); print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr[-2000:]


@pytest.fixture(scope="module")
def unkilled(tiny_model, rows, tmp_path_factory):
    """A 4-step train never killed: what each kill test's rerun is compared with (one for both)."""
    clean = tmp_path_factory.mktemp("unkilled") / "clean"
    r = subprocess.run(_train_argv(rows, tiny_model, clean), capture_output=True, text=True, env=ENV, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return clean


@pytest.mark.slow
@pytest.mark.parametrize("killed_after", [1, 3])  # before the first checkpoint (step 2), and after it
def test_a_train_killed_and_rerun_logs_each_step_once_as_an_unkilled_run_does(
    tiny_model, rows, unkilled, tmp_path, killed_after
):
    """The measured defect: a rerun after kill -9 kept the killed attempt's steps in
    metrics.jsonl beside its own, so the summary's mean train reward was wrong."""
    import signal
    import time

    clean = unkilled
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        _train_argv(rows, tiny_model, killed), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV
    )
    metrics = killed / "metrics.jsonl"
    while proc.poll() is None and not (metrics.exists() and len(metrics.read_text().splitlines()) >= killed_after):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL and not (killed / "train-manifest.json").exists()
    r = subprocess.run(
        _train_argv(rows, tiny_model, killed, "--resume"), capture_output=True, text=True, env=ENV, timeout=900
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert [m["step"] for m in _steps(killed)] == [1, 2, 3, 4]
    timeless = [{k: v for k, v in m.items() if "time" not in k and "seconds" not in k} for m in _steps(killed)]
    assert timeless == [{k: v for k, v in m.items() if "time" not in k and "seconds" not in k} for m in _steps(clean)]
    summary = json.loads((killed / "train-manifest.json").read_text())["summary"]
    assert summary["mean_reward"] == json.loads((clean / "train-manifest.json").read_text())["summary"]["mean_reward"]


@pytest.mark.slow
def test_the_loop_s_train_child_runs_the_stage_from_the_context_it_is_given(tiny_model, rows, tmp_path):
    """The loop writes the resolved Context as one JSON file and its child runs `execute` on it:
    no argv rebuilt from the recipe, no second read of the recipe file."""
    from evoenv_cli import config as cfgmod
    from evoenv_cli import stage
    from evoenv_cli.stages import train

    recipe = cfgmod.load_recipe(rows.parent / "recipe.yaml")
    recipe.train = cfgmod.override(recipe.train, max_steps=2)
    out = tmp_path / "train"
    ctx = stage.Context(
        recipe, out, library=rows.parent / "lib", resume=True, inputs={"data": rows, "model": str(tiny_model)}
    )
    context = tmp_path / "train-context.json"
    context.write_text(json.dumps(stage.context_record(train.STAGE, ctx)))
    (rows.parent / "recipe.yaml").rename(rows.parent / "recipe.yaml.away")  # the child must not need it
    try:
        r = evoenv("run-context", context)
    finally:
        (rows.parent / "recipe.yaml.away").rename(rows.parent / "recipe.yaml")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "train: 2 steps" in r.stderr
    assert [m["step"] for m in _steps(out)] == [1, 2]
    manifest = json.loads((out / "train-manifest.json").read_text())
    assert manifest["config"]["train"]["max_steps"] == 2 and manifest["summary"]["steps"] == 2


def test_a_context_record_that_is_not_one_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "ctx.json"
    bad.write_text("{not json")
    r = evoenv("run-context", bad)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and str(bad) in r.stderr
