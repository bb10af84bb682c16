"""verl drives evoenv as it does any custom reward: its own RLHFDataset reads `sample`'s
parquet, its own loader (`load_reward_manager`) imports `pkg://evoenv_cli.integrations.rewards` /
`compute_score`, and its naive reward manager calls it on a tokenized response. verl 0.9 is
installed with --no-deps (`make setup`; it pins an older transformers), so what it imports on
this path is the real code."""

import json

import numpy as np
import pytest
from conftest import SEEDS

from evoenv_cli.integrations import rewards

# verl's own loader and reward manager: the module's fixture and its teardown (12 CPU-seconds in
# the full suite) are past the fast lane's budget, so the whole module is slow (issue 23's list)
pytestmark = pytest.mark.slow

PLANTED = "graph_coloring_planted"


def _other_coloring(reference: str) -> str:
    """A different valid coloring: the planted one with its three colors rotated."""
    return " ".join(str((int(c) + 1) % 3) for c in reference.split())


@pytest.fixture(scope="module")
def verl_rows(tmp_path_factory):
    import subprocess
    import sys
    from pathlib import Path

    d = tmp_path_factory.mktemp("verl")
    lib = d / "lib"
    lib.mkdir()
    (lib / f"{PLANTED}.py").write_bytes((SEEDS / f"{PLANTED}.py").read_bytes())
    exe = Path(sys.executable).with_name("evoenv")
    for split in ("train", "heldout"):
        r = subprocess.run(
            [
                exe,
                "sample",
                lib,
                "--out",
                d / f"{split}.parquet",
                "-n",
                "4",
                "--format",
                "verl",
                "--split",
                split,
                "--difficulty",
                "2",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr
    return d, lib


def rlhf_dataset(path, tokenizer):
    """verl's own training dataset over a parquet file, as data.train_files / val_files load it."""
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    conf = OmegaConf.create(
        {"max_prompt_length": 8192, "filter_overlong_prompts_workers": 1, "cache_dir": str(path.parent / "cache")}
    )
    return RLHFDataset(data_files=[str(path)], tokenizer=tokenizer, config=conf)


def test_rlhf_dataset_reads_sample_parquet(verl_rows, tiny_model):
    from transformers import AutoTokenizer

    d, _ = verl_rows
    tok = AutoTokenizer.from_pretrained(tiny_model)
    train, val = rlhf_dataset(d / "train.parquet", tok), rlhf_dataset(d / "heldout.parquet", tok)
    assert len(train) == len(val) == 4
    item = train[0]
    assert item["data_source"] == f"evoenv/{PLANTED}" and item["reward_model"]["style"] == "rule"
    assert item["extra_info"]["split"] == "train" and item["extra_info"]["seed"] < 2**31
    assert val[0]["extra_info"]["split"] == "heldout" and val[0]["extra_info"]["seed"] >= 2**31
    assert json.loads(item["extra_info"]["instance"])["colors"] == 3


@pytest.mark.slow
def test_compute_score_through_verls_own_loader_and_reward_manager(verl_rows, tiny_model):
    import torch
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl import DataProto
    from verl.trainer.ppo.reward import load_reward_manager

    d, lib = verl_rows
    tok = AutoTokenizer.from_pretrained(tiny_model)
    rows = rlhf_dataset(d / "train.parquet", tok)
    config = OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": "pkg://evoenv_cli.integrations.rewards",
                    "name": "compute_score",
                    "reward_kwargs": {"library": str(lib)},
                },
                "reward_manager": {"source": "register", "name": "naive"},
            }
        }
    )
    manager = load_reward_manager(config, tok)

    def score(item, text):
        prompt = tok("a prompt", return_tensors="pt")["input_ids"][0]
        response = tok(text, return_tensors="pt")["input_ids"][0]
        mask = torch.ones(len(prompt) + len(response), dtype=torch.long)
        data = DataProto.from_dict(
            tensors={"prompts": prompt[None], "responses": response[None], "attention_mask": mask[None]},
            non_tensors={k: np.array([item[k]], dtype=object) for k in ("data_source", "reward_model", "extra_info")},
        )
        return manager.loop.run_until_complete(manager.run_single(data))

    item = rows[0]
    reference = item["reward_model"]["ground_truth"]
    other = _other_coloring(reference)
    assert other != reference
    right = score(item, f"thinking <answer>{reference}</answer>")
    valid = score(item, f"<answer>{other}</answer>")  # not the ground truth, still a proper coloring
    wrong = score(item, "<answer>0 0 0 0 0 0 0 0</answer>")
    none = score(item, reference)
    assert right["reward_score"] == valid["reward_score"] == 1.0
    assert valid["reward_extra_info"]["acc"] == 1.0 and valid["reward_extra_info"]["answered"] == 1.0
    assert wrong["reward_score"] == 0.0 and none["reward_extra_info"]["answered"] == 0.0


def test_compute_score_with_verls_exact_keywords(monkeypatch, tmp_path):
    from evoenv_cli.artifacts import EnvLibrary
    from evoenv_cli.config import SampleConfig
    from evoenv_cli.runtime.workers import SandboxWorkers
    from evoenv_cli.stages import sample

    lib = EnvLibrary.open(SEEDS)
    with SandboxWorkers() as pool:
        rows = [
            sample.to_format(r, "verl", i)
            for i, r in enumerate(sample.run(lib, SampleConfig(per_env=2, difficulty=3), pool).rows)
        ]
    monkeypatch.setenv("EVOENV_LIBRARY", str(SEEDS))
    monkeypatch.setenv("EVOENV_FORMAT_WEIGHT", "0.1")
    for row in rows:
        truth = row["reward_model"]["ground_truth"]
        got = rewards.compute_score(
            data_source=row["data_source"],
            solution_str=f"<answer>{truth}</answer>",
            ground_truth=truth,
            extra_info={**row["extra_info"], "num_turns": None, "rollout_reward_scores": {}},
        )
        assert got == {"score": 1.0, "acc": 1.0, "answered": 1.0}
    planted = next(r for r in rows if r["data_source"] == f"evoenv/{PLANTED}")
    truth = planted["reward_model"]["ground_truth"]
    got = rewards.compute_score(
        data_source=planted["data_source"],
        solution_str=f"<answer>{_other_coloring(truth)}</answer>",
        ground_truth=truth,
        extra_info=planted["extra_info"],
    )
    assert got["acc"] == 1.0
    junk = rewards.compute_score(
        data_source=planted["data_source"],
        solution_str="<answer>no</answer>",
        ground_truth=truth,
        extra_info=planted["extra_info"],
    )
    assert junk == {"score": pytest.approx(0.1), "acc": 0.0, "answered": 1.0}  # the format bonus alone
    with pytest.raises(ValueError, match="lacks env_id/instance"):
        rewards.compute_score(data_source="openai/gsm8k", solution_str="x", ground_truth="1", extra_info={})
    with pytest.raises(ValueError, match="compute_score"):
        rewards.env_reward(data_source="evoenv/x", solution_str="x", ground_truth="1", extra_info={})
