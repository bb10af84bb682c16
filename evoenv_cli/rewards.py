"""The scoring entry point trainers call: rows written by `evoenv sample` plus model
completions in, rewards out. The final answer is extracted here (by default the last
<answer>...</answer> block); the environment's own `score` runs in the sandbox.

`EnvReward(library)` is a TRL reward function (`GRPOTrainer(reward_funcs=[EnvReward(lib)])`):
TRL passes the dataset's columns (`env_id`, `instance`, ...) as keyword arguments.
`env_reward` is the same, built on first use from the `EVOENV_LIBRARY` environment variable,
for configs that name a reward function by import path.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evoenv_cli.llm.base import final_text
from evoenv_cli.runtime.pool import Call, EnvFile, Limits, SandboxPool

_PATTERNS: dict[str, re.Pattern] = {}


def extract_answer(text: Any, tag: str = "answer") -> str | None:
    """The content of the last <tag>...</tag> block after the reasoning, stripped; None when
    there is none. Only the part after the last `</think>` counts (an `<answer>` mentioned
    while reasoning is not the answer), and a response whose `<think>` never closes has no
    answer. An empty tag takes the whole final part (for models trained without answer tags)."""
    if not isinstance(text, str):
        return None
    text = final_text(text)
    if text is None:
        return None
    if not tag:
        return text.strip()
    pattern = _PATTERNS.get(tag)
    if pattern is None:
        t = re.escape(tag)
        pattern = _PATTERNS[tag] = re.compile(rf"<{t}>(.*?)</{t}>", re.DOTALL | re.IGNORECASE)
    last = None
    for m in pattern.finditer(text):
        last = m
    return None if last is None else last.group(1).strip()


def row_instance(value: Any) -> dict | None:
    """A row's `instance` (the JSON text `sample` writes, or the dict itself) as a dict, or
    None when it is anything else: rows are data, and a bad one must not stop a batch."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def completion_text(completion: Any) -> str:
    """TRL gives a string (standard prompts) or a list of messages (chat prompts)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    if isinstance(completion, Sequence):
        parts = [m.get("content", "") for m in completion if isinstance(m, dict) and m.get("role", "assistant") == "assistant"]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


class EnvReward:
    """Rewards for completions of evoenv rows, scored by their environments in the sandbox."""

    __name__ = "evoenv_env_reward"  # TRL logs rewards under the function's name

    def __init__(self, library: str | Path | list[EnvFile], *, answer_tag: str = "answer",
                 format_weight: float = 0.0, sandbox: str = "auto", workers: int = 2,
                 limits: Limits | None = None):
        if isinstance(library, (str, Path)):
            from evoenv_cli.artifacts import EnvLibrary

            envs = EnvLibrary.open(library).files
        else:
            envs = list(library)
        self.envs = {e.env_id: e for e in envs}
        self.by_name = {e.name: e for e in envs}
        self.answer_tag = answer_tag
        self.format_weight = format_weight
        self._pool_args = dict(limits=limits, sandbox_mode=sandbox, workers=workers)
        self._pool: SandboxPool | None = None
        self._lock = threading.Lock()
        self.stats: Counter = Counter()

    @property
    def pool(self) -> SandboxPool:
        with self._lock:
            if self._pool is None:
                self._pool = SandboxPool(**self._pool_args)
            return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def resolve(self, env_id: str, env_name: str | None = None) -> EnvFile:
        env = self.envs.get(env_id)
        if env is None and env_name:
            env = self.by_name.get(env_name)
        if env is None:
            raise KeyError(f"environment {env_id} ({env_name or '?'}) is not in the reward's library")
        return env

    def score_rows(self, rows: list[dict], completions: list[Any]) -> list[float]:
        """Rewards for `completions` of `rows`; a row that is not an object or lacks a field
        gets reward 0 (status "bad_row"), like one with fields of the wrong type."""
        rows = [r if isinstance(r, dict) else {} for r in rows]
        return self(completions=completions, env_id=[r.get("env_id") for r in rows],
                    instance=[r.get("instance") for r in rows],
                    env_name=[r.get("env_name") for r in rows])

    def details(self, completions: list[Any], env_id: list[str], instance: list[Any],
                env_name: list[str] | None = None) -> list[dict]:
        """Per completion: the extracted answer, the environment's score, and the reward. A row
        whose env_id, env_name or instance has the wrong type (or an instance that is not a
        JSON object) scores 0 with status "bad_row"; an env_id not in the library raises."""
        texts = [completion_text(c) for c in completions]
        answers = [extract_answer(t, self.answer_tag) for t in texts]
        statuses = ["no_answer" if a is None else "" for a in answers]
        jobs: dict[str, tuple[EnvFile, list[Call], list[int]]] = {}
        for i, (eid, inst, ans) in enumerate(zip(env_id, instance, answers)):
            name = env_name[i] if env_name else None
            inst = row_instance(inst)
            if not isinstance(eid, str) or not (name is None or isinstance(name, str)) or inst is None:
                answers[i], statuses[i] = None, "bad_row"
                continue
            if ans is None:
                continue
            env = self.resolve(eid, name)
            job = jobs.setdefault(env.env_id, (env, [], []))
            job[1].append(Call.score(inst, ans))
            job[2].append(i)
        scores: list[float | None] = [None] * len(texts)
        order = list(jobs.values())
        for (_, _, idx), results in zip(order, self.pool.run_many([(e, c) for e, c, _ in order])):
            for i, r in zip(idx, results):
                scores[i] = r.value if r.ok else 0.0
                statuses[i] = "scored" if r.ok else f"score_{r.status}"
        out = []
        for i in range(len(texts)):
            s = scores[i] or 0.0
            fmt = 1.0 if answers[i] is not None else 0.0
            reward = (1.0 - self.format_weight) * s + self.format_weight * fmt
            self.stats[statuses[i]] += 1
            out.append({"answer": answers[i], "score": s, "status": statuses[i], "reward": reward})
        return out

    def __call__(self, prompts: list[Any] | None = None, completions: list[Any] | None = None,
                 env_id: list[str] | None = None, instance: list[Any] | None = None,
                 env_name: list[str] | None = None, **kwargs: Any) -> list[float]:
        if completions is None or env_id is None or instance is None:
            raise ValueError("EnvReward needs completions, env_id and instance (columns of evoenv rows)")
        return [d["reward"] for d in self.details(completions, env_id, instance, env_name)]


_default: EnvReward | None = None


def env_reward(prompts=None, completions=None, env_id=None, instance=None, **kwargs) -> list[float]:
    """TRL reward function over the library named by $EVOENV_LIBRARY."""
    global _default
    if _default is None:
        library = os.environ.get("EVOENV_LIBRARY")
        if not library:
            raise RuntimeError("set EVOENV_LIBRARY to the environment library the rows came from")
        _default = EnvReward(library)
    return _default(prompts=prompts, completions=completions, env_id=env_id, instance=instance, **kwargs)
