"""Row formats are records in `row_formats.FORMATS`: config's `sample.format` choices,
`sample.to_format` and the reward entry points' readers all come from there, so a new trainer's
rows are one `register` call (plus the entry point that trainer calls). Here every registered
format round-trips real rows (written by `sample` in the real sandbox) back to the fields a
reward scores by, and a format registered by the test is offered by config, written by sample,
read back and scored by the rule its rows carry."""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any

import pytest
from conftest import SEEDS

from evoenv_cli import config, row_formats
from evoenv_cli.artifacts import EnvLibrary
from evoenv_cli.config import AnswerConfig, SampleConfig, check_values
from evoenv_cli.errors import InputError
from evoenv_cli.integrations import rewards
from evoenv_cli.runtime.workers import SandboxWorkers
from evoenv_cli.stages import sample

# what each trainer hands its reward function back of a row written in its format
CARRIED = {
    "trl": lambda written: written,  # GRPOTrainer passes every column as a keyword argument
    "verl": lambda written: written["extra_info"],  # compute_score(..., extra_info)
    "openrlhf": lambda written: written["label"],  # reward_func(queries, prompts, labels)
}


@pytest.fixture(autouse=True)
def no_rule_variables(monkeypatch):
    for var in rewards.RULE_ENV.values():
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    """One row per seed environment, made with a recipe's rule: tag `final`, format weight 0.2."""
    with SandboxWorkers() as pool:
        report = sample.run(
            EnvLibrary.open(SEEDS), SampleConfig(per_env=1, difficulty=2), pool, AnswerConfig(tag="final"), 0.2
        )
    assert len(report.rows) == len(list(SEEDS.glob("*.py")))
    return report.rows


def test_config_and_sample_offer_exactly_the_registered_formats(rows):
    assert tuple(row_formats.FORMATS) == ("trl", "verl", "openrlhf")
    assert tuple(config.ROW_FORMATS) == tuple(sample.FORMATS) == tuple(row_formats.FORMATS)
    assert set(CARRIED) == set(row_formats.FORMATS)  # a new format's round trip belongs above
    with pytest.raises(ValueError, match="parquet"):
        sample.to_format(rows[0], "parquet", 0)
    with pytest.raises(InputError, match="must be one of trl, verl, openrlhf"):
        check_values(SampleConfig(format="parquet"), "sample")


@pytest.mark.parametrize("name", ["trl", "verl", "openrlhf"])
def test_each_format_reads_back_what_it_wrote(rows, name):
    fmt = row_formats.FORMATS[name]
    for i, row in enumerate(rows):
        back = fmt.read(CARRIED[name](sample.to_format(row, name, i, "heldout")), f"row {i}")
        assert {k: back[k] for k in row_formats.SCORED_FIELDS} == {k: row[k] for k in row_formats.SCORED_FIELDS}
        assert back["answer_tag"] == "final" and back["format_weight"] == 0.2


def test_readers_name_what_is_not_an_evoenv_row():
    read = {name: f.read for name, f in row_formats.FORMATS.items()}
    assert read["trl"]("not a row", "row 0") == {}  # scored 0 as a bad row, as TRL's columns always were
    with pytest.raises(ValueError, match=r"^extra_info 3 lacks env_id/instance; .*--format verl"):
        read["verl"]({"index": 3}, "extra_info 3")
    with pytest.raises(ValueError, match=r"^label 1 is not JSON; .*--format openrlhf"):
        read["openrlhf"]("{not json", "label 1")
    with pytest.raises(ValueError, match=r"^label 2 is not an evoenv label"):
        read["openrlhf"](json.dumps({"env_id": "x"}), "label 2")


# A real extra format: rows for a trainer that keeps OpenAI-style `messages` and one `metadata`
# string column (as many JSONL fine-tuning loaders do), handing the metadata back to its reward.
def _write_messages(row: dict, index: int, split: str) -> dict:
    meta = {k: row[k] for k in ("answer", *row_formats.SCORED_FIELDS)}
    return {"messages": row["prompt"], "metadata": json.dumps({**meta, "index": index, "split": split})}


def _read_messages(metadata: Any, where: str) -> dict:
    try:
        meta = json.loads(metadata)
    except (TypeError, ValueError):
        raise ValueError(f"{where} is not JSON; write rows with `evoenv sample --format messages`") from None
    if not isinstance(meta, dict) or "env_id" not in meta or "instance" not in meta:
        raise ValueError(f"{where} is not evoenv metadata (env_id, instance)")
    return meta


@contextmanager
def registered(fmt: row_formats.RowFormat):
    row_formats.register(fmt)
    try:
        yield fmt
    finally:
        del row_formats.FORMATS[fmt.name]


def test_a_registered_format_is_offered_written_read_and_scored(rows):
    fmt = row_formats.RowFormat("messages", "a messages + metadata JSONL trainer", _write_messages, _read_messages)
    with registered(fmt):
        with pytest.raises(ValueError, match="already registered"):
            row_formats.register(fmt)
        check_values(SampleConfig(format="messages"), "sample")  # config offers it: no InputError
        written = [sample.to_format(r, "messages", i) for i, r in enumerate(rows)]
        assert [w["messages"] for w in written] == [r["prompt"] for r in rows]
        back = [row_formats.get("messages").read(w["metadata"], f"row {i}") for i, w in enumerate(written)]
        reward = rewards.EnvReward(SEEDS, workers=1)
        try:
            right = [f"so <final>{b['answer']}</final>" for b in back]
            assert reward.score_rows(back, right) == [1.0] * len(rows)
            # scored by the rule the row carries: the default tag finds no answer, a wrong one
            # in the row's tag earns the row's format weight alone
            assert reward.score_rows(back, [f"<answer>{b['answer']}</answer>" for b in back]) == [0.0] * len(rows)
            assert reward.score_rows(back, ["<final>surely wrong</final>"] * len(rows)) == [pytest.approx(0.2)] * len(
                rows
            )
        finally:
            reward.close()
    assert "messages" not in row_formats.FORMATS
    with pytest.raises(InputError, match="must be one of trl, verl, openrlhf"):
        check_values(SampleConfig(format="messages"), "sample")
