"""What `evoenv train` asks of TRL, accelerate and the loop's launcher on a GPU box, checked
here without one: the arguments GRPOConfig gets (TRL 1.16 field names), the accelerate configs
shipped in the package, the launcher line, the per-rank temp files and the checkpoint cleanup.
The real multi-rank run is in test_train_ranks.py."""

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from evoenv_cli import artifacts
from evoenv_cli import loop as iterate
from evoenv_cli.config import TrainConfig
from evoenv_cli.errors import InputError
from evoenv_cli.stage import Context, Result, Round
from evoenv_cli.stages import train as stage

EXE = Path(sys.executable).with_name("evoenv")


def fields_of_grpo_config() -> set[str]:
    from trl import GRPOConfig

    return set(GRPOConfig.__dataclass_fields__)


def test_on_the_cpu_the_policy_loads_in_float32_on_one_device(tmp_path):
    args = stage.grpo_args(TrainConfig(), tmp_path)
    assert args["model_init_kwargs"] == {"dtype": "float32", "device_map": None}
    assert args["mask_truncated_completions"] is True
    assert args["save_total_limit"] == 1
    assert set(args) <= fields_of_grpo_config()  # every name is one TRL 1.16 knows


def test_on_a_gpu_bf16_compute_over_the_weights_precision_needs_pinned_to_one_card(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    for name in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP"):
        monkeypatch.delenv(name, raising=False)
    args = stage.grpo_args(TrainConfig(), tmp_path)
    assert args["bf16"] is True and args["use_cpu"] is False  # bf16 autocast ...
    # ... over fp32 master weights: full fine-tuning in pure bf16 drops AdamW's small steps
    assert args["model_init_kwargs"] == {"dtype": "float32", "device_map": {"": 0}}
    lora = TrainConfig(lora=True)
    assert stage.grpo_args(lora, tmp_path)["model_init_kwargs"]["dtype"] == "bfloat16"  # the base is never written
    synced = TrainConfig(lora=True, use_vllm=True)
    assert stage.grpo_args(synced, tmp_path)["model_init_kwargs"]["dtype"] == "float32"  # merged at every sync
    assert stage.grpo_args(TrainConfig(bf16=False), tmp_path)["model_init_kwargs"]["dtype"] == "float32"
    monkeypatch.setenv("WORLD_SIZE", "8")  # under accelerate launch: each rank's accelerator places it
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")  # DeepSpeed keeps its own fp32 masters
    assert stage.grpo_args(TrainConfig(), tmp_path)["model_init_kwargs"] == {"dtype": "bfloat16", "device_map": None}


def test_ranks_wait_at_collectives_for_long_generation_within_a_bound(tmp_path):
    from transformers import TrainingArguments

    assert TrainingArguments.__dataclass_fields__["ddp_timeout"].default == 1800  # what it was
    assert stage.grpo_args(TrainConfig(), tmp_path)["ddp_timeout"] == 7200
    assert stage.grpo_args(TrainConfig(ddp_timeout=600), tmp_path)["ddp_timeout"] == 600
    from evoenv_cli import config as cfgmod

    recipe = tmp_path / "r.yaml"
    recipe.write_text("train:\n  ddp_timeout: 100000\n")
    with pytest.raises(InputError, match="ddp_timeout"):
        cfgmod.load_recipe(recipe)


def test_colocated_vllm_gets_a_context_from_the_rows(tiny_model, tmp_path):
    from transformers import AutoTokenizer

    from evoenv_cli.llm.base import prompt_tokens

    rows = [
        {"prompt": [{"role": "user", "content": "2 + 2?"}]},
        {"prompt": [{"role": "user", "content": "a much longer question " * 20}]},
    ]
    cfg = TrainConfig(use_vllm=True, max_completion_length=300)
    tok = AutoTokenizer.from_pretrained(tiny_model)
    longest = prompt_tokens(tok, rows[1]["prompt"])
    derived = stage.vllm_context(str(tiny_model), rows, cfg)
    assert derived == longest + 300 and longest > prompt_tokens(tok, rows[0]["prompt"])
    data = tmp_path / "rows.jsonl"  # as `run` calls it: the prompts read from the file as they come
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert stage.vllm_context(str(tiny_model), artifacts.read_jsonl(data), cfg) == derived
    args = stage.grpo_args(cfg, tmp_path, vllm_max_model_length=derived)
    assert args["vllm_max_model_length"] == derived and "vllm_max_model_length" in fields_of_grpo_config()
    given = TrainConfig(use_vllm=True, vllm_max_model_length=4096)
    assert stage.vllm_context(str(tiny_model), rows, given) is None
    assert stage.grpo_args(given, tmp_path)["vllm_max_model_length"] == 4096
    server = TrainConfig(use_vllm=True, vllm_mode="server")
    assert stage.vllm_context(str(tiny_model), rows, server) is None
    assert "vllm_max_model_length" not in stage.grpo_args(server, tmp_path)


def test_step_rewards_drain_joins_every_ranks_window():
    class Reward:
        def details(self, completions, env_id, instance, env_name, completion_ids=None):
            return [{"reward": float(c), "score": float(c), "answer": str(c)} for c in completions]

    step = stage.StepRewards(Reward())
    step(completions=[1, 0], env_id=["a", "b"], instance=[{}, {}], env_name=["A", "B"])
    other_window = stage.SignalWindow(groups=3, completions=3, score_sum=1.0, formatted=3)
    other_rank = ({"A": [(0.0, 0.0), (0.0, 0.0), (1.0, 1.0)]}, other_window)
    joined, signal = step.drain(lambda mine: mine + [other_rank])  # as gather_object: a list per rank
    assert joined["A"] == {"n": 4, "reward_mean": 0.5, "reward_std": 0.5, "pass_rate": 0.5}
    assert joined["B"]["n"] == 1
    # the signal covers both ranks' completions too: 2 here, 3 there, 2 of 5 scored 1.0
    assert signal["train/score_mean"] == 0.4
    assert step.drain() == ({}, {})


@pytest.mark.parametrize("name", ["zero2", "zero3", "fsdp"])
def test_shipped_accelerate_configs_load_in_accelerate(name):
    from accelerate.commands.config.config_args import load_config_from_file

    from evoenv_cli.accelerate_configs import config_path

    path = config_path(name)
    assert path.is_file() and path.parent.name == "accelerate_configs"
    cfg = load_config_from_file(str(path))
    assert cfg.num_processes == -1  # train_launch gives it (accelerate refuses to guess)
    assert cfg.mixed_precision == "bf16"
    expected = {"zero2": "DEEPSPEED", "zero3": "DEEPSPEED", "fsdp": "FSDP"}[name]
    assert str(cfg.distributed_type).endswith(expected)
    trl = Path(__import__("trl").__file__).parent / "accelerate_configs"
    theirs = yaml.safe_load((trl / f"{'fsdp2' if name == 'fsdp' else name}.yaml").read_text())
    ours = yaml.safe_load(path.read_text())
    assert {k: v for k, v in theirs.items() if k != "num_processes"} == ours


def loop(tmp_path: Path, train: str = "", launch: str = "") -> iterate.Loop:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"train:\n{train or '  lora: false'}\niterate:\n  train_launch: '{launch}'\n")
    spec = iterate.cfgmod.load_recipe(recipe)
    return iterate.Loop(tmp_path / "run", recipe, "m", spec.iterate, ROOT / "seeds")


def test_the_loop_launches_accelerate_with_the_chosen_config(tmp_path, monkeypatch):
    real = importlib.util.find_spec  # the words, whether or not this venv has DeepSpeed (checked below)
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: object() if n == "deepspeed" else real(n, *a))
    words = loop(tmp_path, "  accelerate_config: zero3", "accelerate launch --num_processes 8").train_launch()
    assert Path(words[0]).name == "accelerate" and words[1:3] == ["launch", "--config_file"]
    assert Path(words[3]).name == "zero3.yaml" and Path(words[3]).is_file()
    assert words[4:] == ["--num_processes", "8"]
    with pytest.raises(InputError, match="needs iterate.train_launch"):
        loop(tmp_path, "  accelerate_config: zero3").train_launch()
    with pytest.raises(InputError, match="neither one of zero2, zero3, fsdp"):
        loop(tmp_path, "  accelerate_config: zero4", "accelerate launch").train_launch()
    assert loop(tmp_path).train_launch() == [sys.executable]


def test_the_launchs_dependencies_are_named_with_their_install_lines(tmp_path, monkeypatch):
    """A ZeRO launch without DeepSpeed, or train.use_vllm without vLLM, is one line naming
    the install (plan.launch_dependencies, which iterate checks before the first stage)."""
    from evoenv_cli.plan import launch_dependencies

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n in ("deepspeed", "vllm") else real(n, *a))

    def missing(train: str, launch: str = "") -> list[str]:
        return launch_dependencies(iterate.cfgmod.load_recipe(loop(tmp_path, train, launch).recipe))

    assert missing("  accelerate_config: zero3", "accelerate launch") == [
        "training runs DeepSpeed ZeRO (zero3) and deepspeed is not installed: pip install 'evoenv[deepspeed]'"
    ]
    assert "deepspeed" in missing("  lora: false", "accelerate launch --use_deepspeed --zero_stage 2")[0]
    user = tmp_path / "mine.yaml"
    user.write_text("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 1\n")
    assert "(zero1)" in missing(f"  accelerate_config: {user}", "accelerate launch")[0]
    assert missing("  use_vllm: true") == [
        "train.use_vllm (vllm_mode colocate) needs vLLM and it is not installed: pip install vllm"
    ]
    assert missing("  accelerate_config: fsdp", "accelerate launch") == []  # torch's own FSDP


def test_iterate_refuses_a_missing_training_dependency_before_the_first_stage(tmp_path):
    """On this CPU box vLLM is not installed: iterate stops at once, exit 2, one line, and no
    stage ran (round 1 has no folder)."""
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    text = (ROOT / "tests" / "recipes" / "tiny.yaml").read_text().replace("train:\n", "train:\n  use_vllm: true\n")
    text = text.replace("recipes/bench/", str(ROOT / "recipes" / "bench") + "/")
    (tmp_path / "r.yaml").write_text(text)
    run = tmp_path / "run"
    argv = [str(EXE), "iterate", "--rounds", "1", "--recipe", str(tmp_path / "r.yaml"), "--run", str(run)]
    done = subprocess.run(
        [*argv, "--model", str(tmp_path / "m"), "--seeds", str(ROOT / "seeds")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "train.use_vllm (vllm_mode colocate) needs vLLM" in done.stderr and "Traceback" not in done.stderr
    assert not (run / "round-01").exists()


def test_one_training_process_is_pinned_to_one_gpu(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert loop(tmp_path).train_env()["CUDA_VISIBLE_DEVICES"] == "0"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert loop(tmp_path).train_env()["CUDA_VISIBLE_DEVICES"] == "3"
    assert loop(tmp_path, launch="accelerate launch --num_processes=1").train_env()["CUDA_VISIBLE_DEVICES"] == "3"
    assert loop(tmp_path, launch="accelerate launch --num_processes 2").train_env()["CUDA_VISIBLE_DEVICES"] == "3,5"
    assert iterate.launch_processes("accelerate launch") is None  # accelerate takes every GPU


def train_step(lp: iterate.Loop, rows: int = 1) -> Result:
    """The loop's train step of round 1 (its record through `loop.wired`), after a sample that
    wrote `rows` rows."""
    d = lp.run_dir / "round-01"
    data = d / "sample" / "train.jsonl"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text("{}\n" * rows)
    rnd = Round(1, d, "m", lp.spec, lp.cfg, lp.seeds, lp.env_pool, print, recipe_file=lp.recipe)
    rnd.add(Result("sample", "rows", data.parent, data, {"rows": rows}))
    return iterate.wired(lp, stage.STAGE, rnd, iterate.RoundBook.open(d, "round 1"))


def test_a_lora_loop_merges_the_adapter_for_the_next_round(tmp_path, monkeypatch):
    """The child gets the resolved Context as one JSON file (run-context): a LoRA loop's says
    merge_lora, so the next round's policy is a whole model."""
    argv = []

    def launched(a: list, log: Path, env: dict) -> int:  # the child's part: it writes its marker
        argv.extend(a)
        artifacts.write_json_atomic(log.parent / stage.STAGE.marker, {"summary": {"steps": 1}})
        return 0

    monkeypatch.setattr(iterate, "stream", launched)

    def merge_lora(*extra: str) -> bool:
        argv.clear()
        shutil.rmtree(tmp_path / "run", ignore_errors=True)
        done = train_step(loop(tmp_path, *extra))
        assert argv[-2] == "run-context" and done.summary == {"steps": 1} and done.kind == "checkpoint"
        return json.loads(Path(argv[-1]).read_text())["recipe"]["train"]["merge_lora"]

    assert merge_lora("  lora: true") is True
    assert merge_lora() is False


def test_a_finished_rounds_checkpoints_go_an_unfinished_ones_stay(tmp_path):
    train = tmp_path / "train"
    (train / "checkpoints" / "checkpoint-2").mkdir(parents=True)
    stage.drop_checkpoints(train)
    assert (train / "checkpoints").is_dir()  # no marker yet: resuming needs them
    (train / "train-manifest.json").write_text("{}")
    stage.drop_checkpoints(train)
    assert not (train / "checkpoints").exists() and (train / "train-manifest.json").exists()


def test_the_loops_train_step_drops_a_finished_rounds_checkpoints_and_skips_a_round_with_no_rows(tmp_path):
    """A train a kill stopped after its marker and before its checkpoints went: the rerun's step
    reads it back and drops them (its record's `finish`). A sample with no row: nothing trained,
    the policy carried over, and no child started."""
    lp = loop(tmp_path)
    train = lp.run_dir / "round-01" / "train"
    (train / "checkpoints" / "checkpoint-2").mkdir(parents=True)
    artifacts.write_json_atomic(train / stage.STAGE.marker, {"summary": {"steps": 2}})
    done = train_step(lp)
    assert done.summary == {"steps": 2} and not (train / "checkpoints").exists()
    shutil.rmtree(lp.run_dir)
    skipped = train_step(lp, rows=0)
    assert (
        skipped.policy == "m"
        and skipped.summary["skipped"]
        and not (lp.run_dir / "round-01" / "train-context.json").exists()
    )


def test_each_rank_writes_its_own_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "x.json"
    assert artifacts._tmp_path(target).name == ".x.json.tmp"
    monkeypatch.setenv("WORLD_SIZE", "2")
    names = set()
    for rank in ("0", "1"):
        monkeypatch.setenv("RANK", rank)
        names.add(artifacts._tmp_path(target).name)
        artifacts.write_json_atomic(target, {"rank": rank})
    assert names == {".x.json.rank0.tmp", ".x.json.rank1.tmp"}
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_the_rows_are_checked_as_they_are_read_and_the_check_is_handed_to_the_run(tmp_path, monkeypatch):
    """train's check reads its rows file once, row by row (count and the answer tags kept, not
    the rows), names the file and row of the first problem, and its run reads none again."""
    lib = artifacts.EnvLibrary.open(ROOT / "seeds")
    env = lib.files[0]
    row = {"prompt": [{"role": "user", "content": "q"}], "env_id": env.env_id, "instance": "{}"}
    data = tmp_path / "rows.jsonl"
    data.write_text("\n".join(json.dumps({**row, "answer_tag": t}) for t in ("answer", "answer", "final")) + "\n")
    checked = stage.check_rows(data, lib)
    assert (checked.count, checked.answer_tags) == (3, frozenset({"answer", "final"}))
    data.write_text(json.dumps(row) + "\n" + json.dumps({**row, "env_id": 7}) + "\n")
    with pytest.raises(InputError, match=r"rows.jsonl:2: env_id must be a string, not int"):
        stage.check_rows(data, lib)
    data.write_text(json.dumps(row) + "\n")
    reads = []
    real = artifacts.read_jsonl
    monkeypatch.setattr(artifacts, "read_jsonl", lambda path: reads.append(path) or real(path))
    ctx = Context(None, tmp_path / "out", inputs={"data": data, "model": "m", "eval_data": None})
    stage.checked_rows(ctx, lib, "data", "eval_data")
    assert reads == [data] and ctx.inputs["checked"] == {"data": stage.RowsChecked(data, 1, frozenset())}


def test_the_format_column_reads_the_answers_the_environment_column_extracted(tmp_path):
    """TRL calls the environment's column, then the format column, on the same list: the format
    column takes which completions had an answer from the first (each answer extracted once),
    equal to extracting again; another batch, or another tag, is extracted anew."""
    from evoenv_cli.integrations.rewards import EnvReward, FormatReward

    class Counted(FormatReward):
        calls = 0

        def __call__(self, *args, **kwargs):
            Counted.calls += 1
            return super().__call__(*args, **kwargs)

    env = artifacts.EnvLibrary.open(ROOT / "seeds").files[0]
    completions = ["<answer>5</answer>", "no tags", "<think>x</think><answer>3</answer>", "<answer>"]
    columns = dict(env_id=[env.env_id] * 4, instance=[{}] * 4)
    reward = EnvReward([env], answer_tag="answer", workers=1, rows_rule=False, recheck_share=0)
    try:
        fmt = Counted("answer", rows_rule=False)
        step = stage.StepRewards(reward, format_reward=fmt, format_weight=0.1)
        timed = stage.TimedFormat(fmt, step)
        step(completions=completions, **columns)
        assert timed(completions=completions) == FormatReward("answer", rows_rule=False)(completions=completions)
        assert Counted.calls == 0 and timed(completions=list(completions)) == [1.0, 0.0, 1.0, 0.0]
        assert Counted.calls == 1
        other = stage.StepRewards(reward, format_reward=Counted("final", rows_rule=False), format_weight=0.1)
        other(completions=completions, **columns)
        assert other.formats(completions) is None  # another tag: not the same extraction
    finally:
        reward.close()
