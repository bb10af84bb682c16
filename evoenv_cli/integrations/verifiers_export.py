"""`evoenv export verifiers`: an environment library as a PrimeIntellect verifiers v1 taskset
package, so `vf-eval` (and prime-rl) can run an evoenv library like any verifiers environment.

The package holds the library's files and rows from `sample` (fixed at export, so every run
asks the same tasks); its taskset yields one single-turn `vf.Task` per row, and the task's one
`@vf.reward` scores the reply through evoenv's `EnvReward`: answer extraction, then the
environment's own `score` in evoenv's sandbox. evoenv must be installed where it runs.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from evoenv_cli import artifacts
from evoenv_cli.artifacts import EnvLibrary
from evoenv_cli.errors import InputError

PACKAGE_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

PYPROJECT = """[project]
name = "{dist}"
version = "0.1.0"
description = "{description}"
requires-python = ">=3.11"
# evoenv itself must be installed in the same environment (pip install -e path/to/evoenv):
# the reward scores through it. It is not listed because another project holds its name on PyPI.
dependencies = ["verifiers>=0.4,<0.5"]

[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[tool.setuptools]
packages = ["{package}"]

[tool.setuptools.package-data]
{package} = ["tasks.jsonl", "library/*.py"]
"""

INIT = """from {package}.taskset import EvoenvTaskset

__all__ = ["EvoenvTaskset"]
"""

TASKSET = '''"""{description}

Written by `evoenv export verifiers`. Each task is a row `evoenv sample` wrote (tasks.jsonl);
the reward extracts the final answer from the reply and scores it with the environment's own
`score` in evoenv's sandbox (library/ holds the environment files).
"""

import asyncio
import json
from pathlib import Path

import verifiers.v1 as vf

HERE = Path(__file__).parent
LIBRARY = HERE / "library"
TASKS = HERE / "tasks.jsonl"


class EvoenvData(vf.TaskData):
    env_id: str
    """sha256 of the environment's source (16 hex), as evoenv names it."""
    env_name: str
    instance: str
    """The instance as JSON, as the environment generated it."""
    answer: str
    """The oracle's reference answer (for reading traces; the environment's score decides)."""
    seed: int
    difficulty: int


class EvoenvTaskConfig(vf.TaskConfig):
    answer_tag: str = {answer_tag!r}
    """The last <tag>...</tag> block of the reply is the final answer."""
    format_weight: float = 0.0
    """Weight of a well-formed answer in the reward (the rest is the environment's score)."""


def score_reply(reply, data, config):
    from evoenv_cli.integrations.rewards import shared_reward

    reward = shared_reward(LIBRARY, answer_tag=config.answer_tag, format_weight=config.format_weight)
    return reward.details([reply], [data.env_id], [data.instance], [data.env_name])[0]


class EvoenvTask(vf.Task[EvoenvData, vf.State, EvoenvTaskConfig]):
    @property
    def key(self) -> str:
        return f"{{self.data.env_name}}:{{self.data.seed}}:{{self.data.difficulty}}"

    @vf.stop
    async def single_turn(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def env_score(self, trace: vf.Trace) -> float:
        details = await asyncio.to_thread(score_reply, trace.last_reply, self.data, self.config)
        return float(details["reward"])

    @vf.metric
    async def answered(self, trace: vf.Trace) -> float:
        from evoenv_cli.integrations.rewards import extract_answer

        return 0.0 if extract_answer(trace.last_reply, self.config.answer_tag) is None else 1.0


class EvoenvTasksetConfig(vf.TasksetConfig):
    task: EvoenvTaskConfig = EvoenvTaskConfig()


class EvoenvTaskset(vf.Taskset[EvoenvTask, EvoenvTasksetConfig]):
    def load(self):
        with TASKS.open(encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                data = EvoenvData(
                    prompt=row["prompt"], env_id=row["env_id"], env_name=row["env_name"],
                    instance=row["instance"], answer=row["answer"], seed=row["seed"],
                    difficulty=row["difficulty"], name=row["env_name"],
                )
                yield EvoenvTask(data, self.config.task)
'''


def check_package(package: str) -> None:
    if not PACKAGE_PATTERN.match(package):
        raise InputError(
            f"--name {package!r}: a package name is lowercase letters, digits and _ "
            "(it is what `vf-eval` is given, e.g. evoenv_pool)"
        )


def write_package(out: Path, package: str, library: EnvLibrary, rows: list[dict], answer_tag: str = "answer") -> Path:
    """Write the package into `out` (a new or empty folder); returns the package folder."""
    check_package(package)
    if not rows:
        raise InputError(f"{library.root}: sampling gave no rows to export")
    if out.exists() and any(out.iterdir()):
        raise InputError(f"{out}: already holds files; pass an empty or new folder")
    description = f"evoenv library {library.root.name}: {len(library.files)} environments, {len(rows)} tasks"
    pkg = out / package
    (pkg / "library").mkdir(parents=True)
    for env in library.files:
        shutil.copyfile(env.path, pkg / "library" / env.path.name)
    artifacts.write_jsonl_atomic(pkg / "tasks.jsonl", rows)
    artifacts.write_text_atomic(pkg / "__init__.py", INIT.format(package=package))
    artifacts.write_text_atomic(pkg / "taskset.py", TASKSET.format(description=description, answer_tag=answer_tag))
    artifacts.write_text_atomic(
        out / "pyproject.toml",
        PYPROJECT.format(dist=package.replace("_", "-"), package=package, description=description),
    )
    return pkg
