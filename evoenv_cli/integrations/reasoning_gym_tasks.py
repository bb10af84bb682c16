"""The one place evoenv talks to reasoning-gym (open-thought/reasoning-gym, the `[rg]` extra):
task specs such as `rg:chain_sum:32:max_terms=2`, items generated offline at fixed seeds, and
each task's own `score_answer`.

reasoning-gym is trusted library code, installed like any dependency, so `evaluate --bench rg:`
generates and scores its items here, in the parent. (Imported *environment files* that call
reasoning-gym still run in the sandbox like every environment.)
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from evoenv_cli.errors import InputError
from evoenv_cli.runtime.contract import trusted_regions
from evoenv_cli.runtime.import_template import (  # the template the sandbox trusts, and its parts
    environment_name,
    render_environment,
    requirement,
    version,
)

PREFIX = "rg:"
DEFAULT_SIZE = 50
INSTALL_HINT = "pip install -e '.[rg]' (or: pip install reasoning-gym)"


@dataclass
class TaskSpec:
    """`rg:TASK[:N[:KEY=VALUE,...]]`: a reasoning-gym task, how many items, its config."""

    spec: str
    task: str
    size: int = DEFAULT_SIZE
    config: dict[str, Any] = field(default_factory=dict)


def is_spec(text: str) -> bool:
    return str(text).startswith(PREFIX)


def _value(text: str) -> Any:
    """A config value: JSON where it parses (numbers, true/false, null, lists), else a string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_spec(spec: str) -> TaskSpec:
    """`rg:chain_sum`, `rg:chain_sum:32`, `rg:chain_sum:32:min_terms=2,max_terms=2`."""
    body = spec[len(PREFIX) :] if is_spec(spec) else spec
    parts = body.split(":", 2)
    task = parts[0].strip()
    if not task:
        raise InputError(f"{spec}: expected rg:TASK[:N[:KEY=VALUE,...]]")
    size = DEFAULT_SIZE
    if len(parts) > 1 and parts[1].strip():
        try:
            size = int(parts[1])
        except ValueError:
            size = 0
        if size < 1:
            raise InputError(f"{spec}: the item count N must be a positive integer (got {parts[1]!r})")
    config: dict[str, Any] = {}
    if len(parts) > 2 and parts[2].strip():
        for pair in parts[2].split(","):
            key, eq, value = pair.partition("=")
            if not eq or not key.strip():
                raise InputError(f"{spec}: config entries are KEY=VALUE separated by commas (got {pair!r})")
            config[key.strip()] = _value(value.strip())
    for reserved in ("seed", "size"):
        if reserved in config:
            raise InputError(f"{spec}: {reserved} is set by evoenv (N, and the evaluate/sample seed), not in the spec")
    return TaskSpec(spec, task, size, config)


def load_library():
    """reasoning_gym, imported on first use; an InputError saying how to install it."""
    try:
        import reasoning_gym
    except ImportError:
        raise InputError(f"reasoning-gym is not installed: {INSTALL_HINT}") from None
    return reasoning_gym


def task_names() -> list[str]:
    return sorted(load_library().factory.DATASETS)


def check_task(task: str, where: str | None = None) -> None:
    names = task_names()
    if task not in names:
        hint = difflib.get_close_matches(task, names, n=1)
        more = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise InputError(f"{where or task}: no reasoning-gym task named {task!r}{more}")


def create(task: str, size: int, seed: int, config: dict[str, Any], where: str | None = None):
    """The task's ProceduralDataset; a bad config is an InputError naming the spec."""
    rg = load_library()
    check_task(task, where)
    try:
        return rg.create_dataset(task, size=size, seed=seed, **config)
    except (TypeError, ValueError, AssertionError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise InputError(f"{where or task}: reasoning-gym rejects this config: {detail}") from None


@dataclass
class Items:
    """Generated items of one task spec, with the task's own scorer."""

    spec: TaskSpec
    seed: int
    entries: list[dict]
    dataset: Any

    def score(self, answer: str | None, index: int) -> tuple[float, str | None]:
        """(score in [0, 1], error): the task's score_answer on entry `index`. A scorer that
        raises or returns something other than a finite number in [0, 1] scores 0 with the
        reason."""
        try:
            value = self.dataset.score_answer(answer, self.entries[index])
        except Exception as exc:  # a reasoning-gym bug on an odd answer is that sample's 0
            return 0.0, " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return 0.0, f"score_answer returned {value!r}"
        if not 0.0 <= value <= 1.0:
            return 0.0, f"score_answer returned {value!r}, outside [0, 1]"
        return float(value), None

    def record(self) -> dict:
        return {
            "task": self.spec.task,
            "size": self.spec.size,
            "seed": self.seed,
            "config": self.spec.config,
            "reasoning_gym": version(),
        }


def generate(spec: TaskSpec, seed: int) -> Items:
    """`spec.size` items at the dataset seed `seed` (item i comes from seed + i, as
    reasoning-gym seeds them), each with a string question and answer."""
    dataset = create(spec.task, spec.size, seed, spec.config, where=spec.spec)
    entries = []
    for i in range(spec.size):
        entry = dataset[i]
        question, answer = entry.get("question"), entry.get("answer")
        if not isinstance(question, str) or not question.strip():
            raise InputError(f"{spec.spec}: item {i} has no question")
        if answer is not None and not isinstance(answer, str):
            entry = {**entry, "answer": str(answer)}
        entries.append(entry)
    return Items(spec, seed, entries, dataset)


# -- reasoning-gym tasks as environment files (`evoenv import reasoning-gym`) --------------------
LEVEL_COUNT = 10


def curriculum_levels(task: str) -> dict[str, dict]:
    """evoenv's difficulties 1..10 spread over the task's curriculum levels (its easiest at 1,
    its hardest at 10), as create_dataset keyword arguments; the default config at every level
    for a task without a curriculum."""
    import dataclasses

    factory = load_library().factory
    check_task(task)
    if not factory.has_curriculum(task):
        return {str(d): {} for d in range(1, LEVEL_COUNT + 1)}
    curriculum = factory.create_curriculum(task)
    top = max(len(a.levels) for a in curriculum.attributes.values()) - 1
    levels = {}
    for d in range(1, LEVEL_COUNT + 1):
        curriculum.set_global_level(round((d - 1) * top / (LEVEL_COUNT - 1)))
        config = dataclasses.asdict(curriculum.generate_configuration({"size": 1, "seed": 0}))
        config = {k: v for k, v in config.items() if k not in ("seed", "size")}
        try:  # as JSON literals in the file: tuples become lists, which the configs iterate alike
            levels[str(d)] = json.loads(json.dumps(config, allow_nan=False))
        except (TypeError, ValueError):
            raise InputError(f"{task}: its curriculum config is not plain data (JSON literals)") from None
    return levels


def import_environment(task: str) -> tuple[str, str]:
    """(file name, source) of the environment file for one task."""
    return f"{environment_name(task)}.py", render_environment(task, curriculum_levels(task), [requirement()])


__all__ = [
    "DEFAULT_SIZE",
    "Items",
    "PREFIX",
    "TaskSpec",
    "check_task",
    "create",
    "generate",
    "import_environment",
    "is_spec",
    "load_library",
    "parse_spec",
    "render_environment",
    "requirement",
    "task_names",
    "trusted_regions",
    "version",
]
