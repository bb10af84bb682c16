"""Row formats: the trainers `evoenv sample` writes rows for, one record each, registered here.

A record says how an evoenv row is written in its trainer's form (`write`) and how the reward
entry point for that trainer recovers the evoenv fields (which environment, which instance, the
answer rule the prompt was made with) from what the trainer passes back for one row (`read`).
Config's `sample.format` choices, `sample --format`, `stages.sample.to_format` and the entry
points in `rewards.py` all read this registry, so a new trainer's rows are one `register` call
here plus the entry point that trainer calls. It sits in the bottom layer (no evoenv import) so
that config can offer its names.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# the answer rule every row carries (answer.tag, reward.format_weight), which rewards read from it
RULE_FIELDS = ("answer_tag", "format_weight")
# what a reward needs back to score a row besides the answer: its environment, instance and rule
SCORED_FIELDS = ("env_id", "env_name", "instance", "seed", "difficulty", *RULE_FIELDS)


@dataclass(frozen=True)
class RowFormat:
    """One trainer's rows. `write(row, index, split)`: the evoenv row (as `sample` makes it)
    in this trainer's form. `read(carried, where)`: the evoenv fields (env_id, instance,
    env_name, answer_tag, format_weight, ...) out of what the trainer hands its reward function
    for one row; a ValueError that starts with `where` when that is not an evoenv row."""

    name: str
    trainer: str  # who reads these rows, in one line
    write: Callable[[dict, int, str], dict]
    read: Callable[[Any, str], dict]


FORMATS: dict[str, RowFormat] = {}


def register(fmt: RowFormat) -> RowFormat:
    """Add a row format; a name already taken is a ValueError."""
    if fmt.name in FORMATS:
        raise ValueError(f"row format {fmt.name!r} is already registered")
    FORMATS[fmt.name] = fmt
    return fmt


def get(name: str) -> RowFormat:
    if name not in FORMATS:
        raise ValueError(name)
    return FORMATS[name]


# -- TRL: the row itself; GRPOTrainer passes every column to the reward as a keyword argument --
def _write_trl(row: dict, index: int, split: str) -> dict:
    return row


def _read_trl(columns: Any, where: str) -> dict:
    """The row's own columns; one that is not an object has none, and scores 0 as a bad row."""
    return columns if isinstance(columns, dict) else {}


# -- verl: every column kept; the reward reads the instance and the rule from `extra_info` ------
def _write_verl(row: dict, index: int, split: str) -> dict:
    return {
        "data_source": row["data_source"],
        "prompt": row["prompt"],
        "ability": "reasoning",
        "reward_model": {"style": "rule", "ground_truth": row["answer"]},
        "extra_info": {**{k: row[k] for k in SCORED_FIELDS}, "index": index, "split": split},
    }


def _read_verl(extra_info: Any, where: str) -> dict:
    info = extra_info if isinstance(extra_info, dict) else {}
    if info.get("env_id") is None or info.get("instance") is None:
        raise ValueError(f"{where} lacks env_id/instance; write the rows with `evoenv sample --format verl`")
    return info


# -- OpenRLHF: only input, label and datasource survive, so the label is a JSON string carrying
# everything the reward needs, the answer rule included ------------------------------------------
def _write_openrlhf(row: dict, index: int, split: str) -> dict:
    label = {k: row[k] for k in ("env_id", "env_name", "instance", "answer", "seed", "difficulty", *RULE_FIELDS)}
    return {"input": row["prompt"], "label": json.dumps(label, ensure_ascii=False), "datasource": row["data_source"]}


def _read_openrlhf(label: Any, where: str) -> dict:
    if isinstance(label, str):
        try:
            label = json.loads(label)
        except ValueError:
            raise ValueError(f"{where} is not JSON; write rows with `evoenv sample --format openrlhf`") from None
    if not isinstance(label, dict) or "env_id" not in label or "instance" not in label:
        raise ValueError(
            f"{where} is not an evoenv label (env_id, instance); write rows with `evoenv sample --format openrlhf`"
        )
    return label


register(RowFormat("trl", "TRL's GRPOTrainer (rewards.EnvReward, rewards.env_reward)", _write_trl, _read_trl))
register(RowFormat("verl", "verl (rewards.compute_score reads extra_info)", _write_verl, _read_verl))
register(
    RowFormat(
        "openrlhf", "OpenRLHF (rewards.reward_func and serve-reward read the label)", _write_openrlhf, _read_openrlhf
    )
)
