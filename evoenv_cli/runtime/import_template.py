"""The one environment source, besides the standard-library contract, that the sandbox lets
import a package: `evoenv import reasoning-gym`'s template for a task. The runtime decides trust
by comparing a source with this template (runtime.contract.trusted_regions), so the template
lives in the runtime, below every stage and integration; reasoning_gym_tasks renders files
from it. Standard library only: nothing here imports reasoning-gym.
"""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "reasoning-gym"
MODULE = "reasoning_gym"

TEMPLATE = '''"""reasoning-gym's {task} task as an evoenv environment, written by `evoenv import
reasoning-gym`: an instance is reasoning_gym.create_dataset's item at the instance's seed, with
the task's curriculum configuration for the difficulty (LEVELS), and an answer is scored by the
task's own score_answer. evoenv lets this exact template, and nothing else, import the declared
packages (REQUIRES) in its sandbox.
"""

import reasoning_gym

NAME = {name!r}
TAGS = ["reasoning-gym", {task!r}]
ANSWER_TYPE = "str"
TASK = {task!r}
REQUIRES = {requires!r}
LEVELS = {levels}


def _level(difficulty):
    return max(1, min(10, int(difficulty)))


def _item(seed, difficulty):
    dataset = reasoning_gym.create_dataset(TASK, size=1, seed=int(seed), **LEVELS[str(_level(difficulty))])
    return dataset, dataset[0]


def generate(seed: int, difficulty: int) -> dict:
    _, entry = _item(seed, difficulty)
    return {{"seed": int(seed), "difficulty": _level(difficulty), "question": entry["question"],
             "answer": str(entry["answer"])}}


def prompt(instance: dict) -> str:
    return instance["question"]


def solve(instance: dict) -> str:
    return instance["answer"]


def score(instance: dict, answer: str) -> float:
    try:
        dataset, entry = _item(instance["seed"], instance["difficulty"])
        value = float(dataset.score_answer(answer, entry))
    except Exception:
        return 0.0
    return value if 0.0 <= value <= 1.0 else 0.0
'''


def requirement() -> str:
    """The one pinned requirement imported environments declare: the installed reasoning-gym."""
    return f"{DISTRIBUTION}=={version()}"


def environment_name(task: str) -> str:
    return "rg_" + task


def render_environment(task: str, levels: dict[str, dict], requires: list[str]) -> str:
    """The one source `evoenv import` writes for these values (and the one it trusts)."""
    lines = "".join(f"    {k!r}: {v!r},\n" for k, v in levels.items())
    return TEMPLATE.format(
        task=task, name=environment_name(task), requires=requires, levels="{\n" + lines + "}" if levels else "{}"
    )


def version() -> str | None:
    try:
        return metadata.version("reasoning-gym")
    except metadata.PackageNotFoundError:
        return None
