"""Recipes: one YAML file with a section per stage, mapped onto one dataclass per stage.
Flags given on the command line override the recipe; the resolved config goes in manifests.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from evoenv_cli.artifacts import InputError
from evoenv_cli.runtime.pool import Limits

T = TypeVar("T")

DEFAULT_ANSWER_INSTRUCTION = (
    "Reason step by step, then give your final answer, in exactly the form asked above, "
    "between <answer> and </answer> at the very end of your response."
)


@dataclass
class RuntimeConfig:
    """Where and how environment code runs."""

    sandbox: str = "auto"  # auto | bwrap | process
    workers: int = 2
    limits: Limits = field(default_factory=Limits)


@dataclass
class SampleConfig:
    per_env: int = 16
    seed: int = 0
    difficulty: int | None = None  # fixed level; None spreads rows over 1..10
    difficulty_from: str | None = None  # "index": calibrated levels from the library's index
    format: str = "trl"  # trl | verl | openrlhf
    system_prompt: str | None = None
    answer_instruction: str = DEFAULT_ANSWER_INSTRUCTION


@dataclass
class ValidateConfig:
    """The execution contract: how much evidence each check gathers and what it tolerates."""

    seeds_per_level: int = 3  # run/reference/probes use seeds 0..n-1 at every level
    levels: list[int] = field(default_factory=lambda: list(range(1, 11)))
    determinism_pairs: int = 10
    diversity_seeds: int = 8
    diversity_levels: list[int] = field(default_factory=lambda: [1, 5, 10])
    min_distinct_share: float = 0.5
    max_probe_accept_share: float = 0.1  # fixed probes: empty, garbage, "0", "true", ...
    max_near_miss_accept_share: float = 0.25  # near misses and other instances' answers
    max_constant_share: float = 0.5
    max_leak_share: float = 0.5
    min_leak_excess: float = 0.25  # over how often other instances' answers appear in a prompt
    huge_probe_chars: int = 1_000_000
    huge_probe_instances: int = 2
    budget_generate_s: float = 0.5
    budget_prompt_s: float = 0.5
    budget_solve_s: float = 1.0
    budget_score_s: float = 0.5
    budget_instance_bytes: int = 32768
    budget_output_chars: int = 10_000
    max_source_bytes: int = 100_000


@dataclass
class RewardConfig:
    """How a completion becomes a reward: answer extraction, then the environment's score."""

    answer_tag: str = "answer"  # the last <answer>...</answer> block is the final answer
    format_weight: float = 0.0


@dataclass
class Recipe:
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    sample: SampleConfig = field(default_factory=SampleConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    validate: ValidateConfig = field(default_factory=ValidateConfig)
    extra: dict[str, Any] = field(default_factory=dict)  # sections of stages not built yet


def _build(cls: type[T], data: dict, where: str) -> T:
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a mapping")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        if key not in fields:
            hint = difflib.get_close_matches(key, list(fields), n=1)
            more = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise InputError(f"{where}: unknown key {key!r}{more}")
        default = fields[key].default_factory() if fields[key].default_factory is not dataclasses.MISSING else None
        if dataclasses.is_dataclass(default) and isinstance(value, dict):
            value = _build(type(default), value, f"{where}.{key}")
        kwargs[key] = value
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise InputError(f"{where}: {exc}") from None


LATER_SECTIONS = ("synthesize", "review", "calibrate", "dedupe", "compose",
                  "train", "evaluate", "iterate", "model")
KNOWN_SECTIONS = {"runtime": RuntimeConfig, "sample": SampleConfig, "reward": RewardConfig,
                  "validate": ValidateConfig}


def load_recipe(path: str | Path | None) -> Recipe:
    """A recipe from YAML (None gives the defaults); unknown keys are an InputError."""
    if path is None:
        return Recipe()
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such recipe file")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise InputError(f"{p}{where}: not valid YAML") from None
    if not isinstance(data, dict):
        raise InputError(f"{p}: expected a mapping of stage sections")
    recipe = Recipe()
    for section, body in data.items():
        if section in KNOWN_SECTIONS:
            setattr(recipe, section, _build(KNOWN_SECTIONS[section], body or {}, f"{p}: {section}"))
        elif section in LATER_SECTIONS:
            recipe.extra[section] = body
        else:
            names = list(KNOWN_SECTIONS) + list(LATER_SECTIONS)
            hint = difflib.get_close_matches(str(section), names, n=1)
            more = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise InputError(f"{p}: unknown section {section!r}{more}")
    return recipe


def override(obj: T, **flags: Any) -> T:
    """A copy of a config dataclass with the flags the user actually gave (not None)."""
    given = {k: v for k, v in flags.items() if v is not None}
    return dataclasses.replace(obj, **given)


def to_dict(obj: Any) -> Any:
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj
