"""The scoring entry point trainers call: rows written by `evoenv sample` plus model
completions in, rewards out. The final answer is extracted here (by default the last
<answer>...</answer> block); the environment's own `score` runs in the sandbox.

`EnvReward(library)` is a TRL reward function (`GRPOTrainer(reward_funcs=[EnvReward(lib)])`):
TRL passes the dataset's columns (`env_id`, `instance`, ...) as keyword arguments;
`FormatReward` is the format bonus as a reward function of its own, so TRL logs it apart.
The answer rule has one home, the row: `sample` writes the answer tag and format weight each
row's prompt was made with (`answer_tag`, `format_weight`; in verl's `extra_info`, in
OpenRLHF's label), and every entry point below scores a row by its own rule. A reward's own
`answer_tag`/`format_weight` only serve rows that carry none (rows written before rows carried
it); $EVOENV_ANSWER_TAG and $EVOENV_FORMAT_WEIGHT override the rows, with a warning.
Entry points for trainers that name a reward function by import path, each scoring through
the process's one `EnvReward` over `$EVOENV_LIBRARY` (built on first use, so every Ray worker
process builds its own sandbox pool once):

- `env_reward`: TRL, same arguments as `EnvReward`.
- `compute_score(data_source, solution_str, ground_truth, extra_info)`: verl's custom reward
  function (`reward.custom_reward_function.path=pkg://evoenv_cli.integrations.rewards`); it scores
  through the environment named in `extra_info`, so every valid answer of a planted
  environment scores 1, not only `ground_truth`.
- `reward_func(queries, prompts, labels)`: OpenRLHF's `--reward.remote_url` file (this one);
  each query is prompt + response, and the prompt is cut off before the answer is extracted.
  `evoenv serve-reward` serves the same over HTTP.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import threading
import warnings
from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from evoenv_cli import row_formats
from evoenv_cli.envfile import EnvFile
from evoenv_cli.integrations.reward_audit import RewardAudit
from evoenv_cli.integrations.score_budget import ScoreBudgets
from evoenv_cli.runtime.workers import Call, Limits, SandboxWorkers
from evoenv_cli.thinking import answer_part, cut_at_length

_PATTERNS: dict[str, re.Pattern] = {}


def extract_answer(
    text: Any, tag: str = "answer", *, opened: bool | None = False, truncated: bool = False
) -> str | None:
    """The content of the last <tag>...</tag> block after the reasoning, stripped; None when
    there is none. The thinking rule is `thinking.answer_part`'s: only the part after the last
    `</think>` counts; a response whose `<think>` never closes (in it, or in the prompt when
    `opened`) has no answer, nor has a response cut at the length limit (`truncated`) by a model
    whose template is unknown (`opened` None) before any `</think>`. An empty tag takes the
    whole final part (for models trained without answer tags)."""
    if not isinstance(text, str):
        return None
    text = answer_part(text, opened=opened, truncated=truncated)
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


def completion_cuts(completions: list[Any], completion_ids: list | None, end_ids: Collection[int] | None) -> list[bool]:
    """Per completion TRL scored, whether the generator cut it at the length limit (read from
    `completion_ids` when the reward knows the end tokens; else none is known cut)."""
    if completion_ids is None or not end_ids:
        return [False] * len(completions)
    return [cut_at_length(ids, end_ids) for ids in completion_ids]


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
        parts = [
            m.get("content", "")
            for m in completion
            if isinstance(m, dict) and m.get("role", "assistant") == "assistant"
        ]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


# the row fields that carry the answer rule, and the variables that override them
RULE_FIELDS = row_formats.RULE_FIELDS
RULE_ENV = {"answer_tag": "EVOENV_ANSWER_TAG", "format_weight": "EVOENV_FORMAT_WEIGHT"}
_warned: set[tuple[str, str, str]] = set()
_warned_lock = threading.Lock()


class AnswerRuleOverride(UserWarning):
    """An environment variable replaced the answer rule a row was made with."""


def answer_rule(tag: Any = None, weight: Any = None, *, default_tag: str = "answer", default_weight: float = 0.0):
    """(answer tag, format weight) to score a row with: the row's own (what its prompt asked
    for), else the defaults. $EVOENV_ANSWER_TAG / $EVOENV_FORMAT_WEIGHT win over both, and say
    so once per process for each (variable, replaced value, new value): an override that
    silently disagreed with the prompts would train against the wrong extractor."""
    rule = {
        "answer_tag": tag if isinstance(tag, str) else default_tag,
        "format_weight": float(weight) if isinstance(weight, (int, float)) and not isinstance(weight, bool) else None,
    }
    if rule["format_weight"] is None:
        rule["format_weight"] = float(default_weight)
    for key, var in RULE_ENV.items():
        raw = os.environ.get(var)
        if raw is None:
            continue
        try:
            value = raw if key == "answer_tag" else float(raw)
        except ValueError:
            raise ValueError(f"${var}={raw!r} is not a number") from None
        if value == rule[key]:
            continue
        seen = (var, repr(rule[key]), repr(value))
        with _warned_lock:
            first = seen not in _warned
            _warned.add(seen)
        if first:
            warnings.warn(
                f"${var}={raw!r} overrides the {key} the rows were made with ({rule[key]!r}); "
                f"unset it to score each row by its own {key}",
                AnswerRuleOverride,
                stacklevel=3,
            )
        rule[key] = value
    return rule["answer_tag"], rule["format_weight"]


class EnvReward:
    """Rewards for completions of evoenv rows, scored by their environments in the sandbox.
    Each row is scored by the answer rule it carries (`answer_rule`); `answer_tag` and
    `format_weight` here are for rows that carry none."""

    __name__ = "evoenv_env_reward"  # TRL logs rewards under the function's name

    def __init__(
        self,
        library: str | Path | list[EnvFile],
        *,
        answer_tag: str = "answer",
        format_weight: float = 0.0,
        sandbox: str = "auto",
        workers: int = 2,
        limits: Limits | None = None,
        pool: SandboxWorkers | None = None,
        recheck_share: float = 0.02,
        recheck_seed: int = 0,
        quarantine_log: Path | None = None,
        rows_rule: bool = True,
        quarantine_after_timeouts: int = 3,
    ):
        """`pool`: a program's shared sandbox pool (a `runtime.session.Runtime`'s) to score on,
        left open by `close`; without one, the reward starts its own on first use. The re-checks
        always run in workers of their own (one call each), in the same jail and under the same
        limits as the pool that pays the rewards. `rows_rule` False: every row is scored by this
        reward's own tag and weight (evoenv train, whose recipe is the rule), never the rows'.
        Every score call runs under a CPU budget measured from the environment's reference
        (`score_budget.py`); an environment whose score runs out of it on
        `quarantine_after_timeouts` completions is quarantined from the next request on."""
        if isinstance(library, (str, Path)):
            from evoenv_cli.artifacts import EnvLibrary

            envs = EnvLibrary.open(library).files
        else:
            envs = list(library)
        self.envs = {e.env_id: e for e in envs}
        self.by_name = {e.name: e for e in envs}
        self.answer_tag = answer_tag
        self.format_weight = format_weight
        # the thinking rule's inputs, set by a trainer that knows its tokenizer: whether the chat
        # template opens <think> in the prompt, and the ids that end a completion (so one that
        # stops without them was cut at the length limit)
        self.opens_think: bool | None = None  # None: not known (a trainer outside evoenv)
        self.end_ids: Collection[int] | None = None
        self.rows_rule = rows_rule
        self._pool_args = dict(limits=limits, sandbox_mode=sandbox, workers=workers)
        self._pool: SandboxWorkers | None = pool
        self._borrowed = pool is not None
        self._calls_closed = 0  # calls made on an own pool already closed
        self._lock = threading.Lock()
        self.stats: Counter = Counter()
        # a share of the rewards scored again in fresh workers; a disagreement quarantines
        if pool is not None:  # the borrowed pool's jail and limits, not this call's defaults
            sandbox, limits = pool.plan.requested or pool.plan.mode, pool.limits
        self.audit = RewardAudit(recheck_share, seed=recheck_seed, sandbox=sandbox, limits=limits, log=quarantine_log)
        self.budgets = ScoreBudgets(self.audit.fresh, (limits or Limits()).score_s)
        self.quarantine_after_timeouts = quarantine_after_timeouts
        self.score_timeouts: Counter = Counter()  # per env_id, completions whose score ran out of time

    @property
    def pool(self) -> SandboxWorkers:
        with self._lock:
            if self._pool is None:
                self._pool = SandboxWorkers(**self._pool_args)
            return self._pool

    @property
    def sandbox_calls(self) -> int:
        """Calls into environment code on the reward's pool so far (a borrowed pool's count
        includes its other users'), plus the re-checks and the budgets' measurements in fresh workers."""
        own = self._pool.calls if self._pool is not None else 0
        return self._calls_closed + own + self.audit.checked + self.budgets.measure_calls

    def close(self) -> None:
        if self._pool is not None and not self._borrowed:
            self._calls_closed += self._pool.calls
            self._pool.close()
            self._pool = None
        self.audit.close()

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
        read = row_formats.get("trl").read
        rows = [read(r, f"row {i}") for i, r in enumerate(rows)]
        return self(
            completions=completions,
            env_id=[r.get("env_id") for r in rows],
            instance=[r.get("instance") for r in rows],
            env_name=[r.get("env_name") for r in rows],
            **{k: [r.get(k) for r in rows] for k in RULE_FIELDS},
        )

    def rules(self, n: int, answer_tag: list | None = None, format_weight: list | None = None) -> list[tuple]:
        """The (tag, weight) each of n rows is scored by, from their columns where given."""
        if not self.rows_rule:
            return [(self.answer_tag, self.format_weight)] * n
        tags = answer_tag if answer_tag is not None else [None] * n
        weights = format_weight if format_weight is not None else [None] * n
        return [
            answer_rule(t, w, default_tag=self.answer_tag, default_weight=self.format_weight)
            for t, w in zip(tags, weights)
        ]

    def details(
        self,
        completions: list[Any],
        env_id: list[str],
        instance: list[Any],
        env_name: list[str] | None = None,
        completion_ids: list | None = None,
        answer_tag: list | None = None,
        format_weight: list | None = None,
        *,
        cuts: list[bool] | None = None,
        opened: bool | None = None,
    ) -> list[dict]:
        """Per completion: the extracted answer, the environment's score, and the reward, by
        each row's answer rule (`answer_tag`, `format_weight`: the rows' columns; None or a
        missing entry: the reward's own). A row whose env_id, env_name or instance has the
        wrong type (or an instance that is not a JSON object) scores 0 with status "bad_row";
        an env_id not in the library raises. Which completions were cut at the length limit:
        `cuts`, or read from `completion_ids` (TRL's); `opened`: the template opened <think>
        (default: this reward's setting)."""
        texts = [completion_text(c) for c in completions]
        rules = self.rules(len(texts), answer_tag, format_weight)
        if cuts is None:
            cuts = completion_cuts(completions, completion_ids, self.end_ids)
        opened = self.opens_think if opened is None else opened
        answers = [extract_answer(t, tag, opened=opened, truncated=cut) for t, (tag, _), cut in zip(texts, rules, cuts)]
        jobs: dict[str, tuple[EnvFile, list[tuple[dict, str]], list[int]]] = {}
        statuses = ["no_answer" if a is None else "" for a in answers]
        for i, (eid, inst, ans) in enumerate(zip(env_id, instance, answers)):
            name = env_name[i] if env_name else None
            inst = row_instance(inst)
            if not isinstance(eid, str) or not (name is None or isinstance(name, str)) or inst is None:
                answers[i], statuses[i] = None, "bad_row"
                continue
            if ans is None:
                continue
            env = self.resolve(eid, name)
            if env.env_id in self.audit.quarantined:
                statuses[i] = "quarantined"
                continue
            job = jobs.setdefault(env.env_id, (env, [], []))
            job[1].append((inst, ans))
            job[2].append(i)
        scores: list[float | None] = [None] * len(texts)
        order = [(env, self.budgets.calls(env, items), idx) for env, items, idx in jobs.values()]
        scored = []  # (index, env, instance, answer, score) of the calls that returned a score
        for (env, calls, idx), results in zip(
            order, self._retry_timeouts(order, self.pool.run_many([(e, c) for e, c, _ in order]))
        ):
            for i, c, r in zip(idx, calls, results):
                scores[i] = r.value if r.ok else 0.0
                statuses[i] = "scored" if r.ok else f"score_{r.status}"
                if r.ok:
                    scored.append((i, env, c.args[0], c.args[1], r.value))
            self._count_timeouts(env, calls, results)
        items = [(env, inst, ans, s) for _, env, inst, ans, s in scored]
        repeats = self.audit.check_repeats(items)
        if self.audit.recheck(self.audit.sample(items)) or repeats:
            for i, (eid, ans) in enumerate(zip(env_id, answers)):  # this batch's rewards from it too
                if (
                    ans is not None
                    and self.resolve(eid, env_name[i] if env_name else None).env_id in self.audit.quarantined
                ):
                    scores[i], statuses[i] = 0.0, "quarantined"
        out = []
        for i in range(len(texts)):
            s = scores[i] or 0.0
            fmt = 1.0 if answers[i] is not None and statuses[i] != "quarantined" else 0.0
            w = rules[i][1]
            reward = (1.0 - w) * s + w * fmt
            self.stats[statuses[i]] += 1
            out.append({"answer": answers[i], "score": s, "status": statuses[i], "reward": reward})
        return out

    def _retry_timeouts(self, order: list, batches: list[list]) -> list[list]:
        """Each call that ran out of its budget, run once more (same worker pool, same budget)
        before it counts: a budget of a millisecond or two is met by an honest score on every
        warm call, but a cold one (its first regular expression compiled, a garbage collection,
        page faults on a loaded host) can spend more, once. A runaway score runs out again, so
        it costs twice its budget; a correct answer is paid, and no honest environment is
        quarantined for its host's noise (seen in CI: one of 20 honest calls timed out)."""
        again = []
        for (env, calls, _), results in zip(order, batches):
            late = [k for k, r in enumerate(results) if r.status == "timeout" and calls[k].budget_s is not None]
            if late:
                again.append((env, calls, results, late))
        if not again:
            return batches
        retried_all = self.pool.run_many([(env, [calls[k] for k in late]) for env, calls, _, late in again])
        for (_, _, results, late), retried in zip(again, retried_all):
            for k, r in zip(late, retried):
                results[k] = r
        return batches

    def _count_timeouts(self, env: EnvFile, calls: list[Call], results: list) -> None:
        """Quarantine an environment (from the next request on: this one's scores stand) once its
        score has run out of time on `quarantine_after_timeouts` completions."""
        late = [(c, r) for c, r in zip(calls, results) if r.status == "timeout"]
        if not late:
            return
        with self._lock:
            self.score_timeouts[env.env_id] += len(late)
            count = self.score_timeouts[env.env_id]
        if count >= self.quarantine_after_timeouts:
            call, r = late[-1]
            budget = self.budgets.budgets[env.env_id]
            reason = (
                f"score ran out of time on {count} completions (budget {budget.base_s * 1000:.1f} ms CPU, "
                f"{self.budgets.factor:g}x its reference's {budget.reference_s * 1000:.2f} ms): {r.error}"
            )
            self.audit.quarantine(env, reason, call.args[0], call.args[1])

    def __call__(
        self,
        prompts: list[Any] | None = None,
        completions: list[Any] | None = None,
        env_id: list[str] | None = None,
        instance: list[Any] | None = None,
        env_name: list[str] | None = None,
        answer_tag: list | None = None,
        format_weight: list | None = None,
        **kwargs: Any,
    ) -> list[float]:
        if completions is None or env_id is None or instance is None:
            raise ValueError("EnvReward needs completions, env_id and instance (columns of evoenv rows)")
        details = self.details(
            completions, env_id, instance, env_name, kwargs.get("completion_ids"), answer_tag, format_weight
        )
        return [d["reward"] for d in details]


class FormatReward:
    """1.0 for a completion with an extractable final answer, else 0.0: the format bonus as a
    reward function of its own (TRL logs each reward function under its `__name__`). The tag
    is each row's own (its `answer_tag` column) where the rows carry it."""

    __name__ = "evoenv_format_reward"

    def __init__(self, answer_tag: str = "answer", rows_rule: bool = True):
        self.answer_tag = answer_tag
        self.opens_think: bool | None = None  # as EnvReward's
        self.end_ids: Collection[int] | None = None
        self.rows_rule = rows_rule  # False: this tag for every row (evoenv train's recipe)

    def __call__(
        self,
        prompts: list[Any] | None = None,
        completions: list[Any] | None = None,
        answer_tag: list | None = None,
        **kwargs: Any,
    ) -> list[float]:
        if completions is None:
            raise ValueError("FormatReward needs completions")
        cuts = completion_cuts(completions, kwargs.get("completion_ids"), self.end_ids)
        if not self.rows_rule:
            tags = [self.answer_tag] * len(completions)
        else:
            given = answer_tag if answer_tag is not None else [None] * len(completions)
            tags = [answer_rule(t, default_tag=self.answer_tag)[0] for t in given]
        return [
            0.0 if extract_answer(completion_text(c), tag, opened=self.opens_think, truncated=cut) is None else 1.0
            for c, tag, cut in zip(completions, tags, cuts)
        ]


# -- one EnvReward per process, for trainers that import a function by path ---------------------
SETTINGS_ENV = {
    "library": "EVOENV_LIBRARY",
    **RULE_ENV,
    "sandbox": "EVOENV_SANDBOX",
    "workers": "EVOENV_WORKERS",
}
_shared: dict[tuple, EnvReward] = {}
_shared_lock = threading.Lock()


@atexit.register
def _close_shared() -> None:
    """The shared rewards' workers and scratch folders go with the process."""
    with _shared_lock:
        for reward in _shared.values():
            reward.close()
        _shared.clear()


def shared_reward(
    library: str | Path | None = None, *, answer_tag: str | None = None, format_weight: float | None = None
) -> EnvReward:
    """This process's EnvReward for a library: built on first use and kept, so a trainer's
    reward worker (a Ray actor, a thread pool) builds its sandbox pool once. Unset arguments
    come from the environment: EVOENV_LIBRARY, EVOENV_SANDBOX (auto), EVOENV_WORKERS (2).
    `answer_tag`/`format_weight` (default answer, 0) serve only rows that carry no answer rule;
    EVOENV_ANSWER_TAG / EVOENV_FORMAT_WEIGHT override the rows' (see `answer_rule`)."""
    env = os.environ
    library = library or env.get(SETTINGS_ENV["library"])
    if not library:
        raise RuntimeError(
            "no environment library: set EVOENV_LIBRARY to the library the rows "
            "came from (on Ray, in runtime_env's env_vars) or pass library="
        )
    tag = answer_tag if answer_tag is not None else "answer"
    weight = float(format_weight if format_weight is not None else 0.0)
    sandbox = env.get(SETTINGS_ENV["sandbox"], "auto")
    workers = int(env.get(SETTINGS_ENV["workers"], 2))
    key = (str(Path(library).resolve()), tag, weight, sandbox, workers)
    with _shared_lock:
        if key not in _shared:
            _shared[key] = EnvReward(library, answer_tag=tag, format_weight=weight, sandbox=sandbox, workers=workers)
        return _shared[key]


def env_reward(prompts=None, completions=None, env_id=None, instance=None, **kwargs) -> list[float]:
    """TRL reward function over the library named by $EVOENV_LIBRARY."""
    if "solution_str" in kwargs:
        raise ValueError(
            "env_reward is TRL's reward function; verl calls "
            "evoenv_cli.integrations.rewards.compute_score (reward.custom_reward_function.name=compute_score)"
        )
    return shared_reward()(prompts=prompts, completions=completions, env_id=env_id, instance=instance, **kwargs)


# -- verl ----------------------------------------------------------------------------------------
def compute_score(
    data_source: str | None = None,
    solution_str: str | None = None,
    ground_truth: Any = None,
    extra_info: dict | None = None,
    *,
    library: str | None = None,
    answer_tag: str | None = None,
    format_weight: float | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """verl's custom reward function: the response scored by the environment that
    `extra_info` names (env_id, env_name, instance, as `evoenv sample --format verl` writes
    them), in the sandbox, by the answer rule `extra_info` carries (answer_tag, format_weight).
    `ground_truth` is one reference answer and is not what decides: a planted environment
    accepts all its valid answers. `library` may come from verl's `reward_kwargs`, otherwise
    from the environment; `answer_tag` and `format_weight` there serve rows without a rule.
    Returns {"score": reward, "acc": the environment's score, "answered": 1.0 or 0.0}."""
    info = row_formats.get("verl").read(extra_info, f"compute_score: extra_info of a {data_source!r} row")
    reward = shared_reward(library, answer_tag=answer_tag, format_weight=format_weight)
    d = reward.details(
        [solution_str if isinstance(solution_str, str) else ""],
        [info["env_id"]],
        [info["instance"]],
        [info.get("env_name")],
        answer_tag=[info.get("answer_tag")],
        format_weight=[info.get("format_weight")],
    )[0]
    return {"score": float(d["reward"]), "acc": float(d["score"]), "answered": 0.0 if d["answer"] is None else 1.0}


# -- OpenRLHF ------------------------------------------------------------------------------------
PROMPT_TAIL_CHARS = 200


def response_of(query: str, prompt: str) -> str | None:
    """The response part of an OpenRLHF query (the decoded prompt + response): after the prompt
    when the query starts with it, else after the first place its last characters appear
    (decoding may differ at the start, e.g. a BOS token); None when the prompt is not found,
    so that the instruction's own "<answer> and </answer>" is never taken for an answer."""
    if not isinstance(query, str):
        return None
    if not isinstance(prompt, str) or not prompt:
        return query
    if query.startswith(prompt):
        return query[len(prompt) :]
    tail = prompt[-PROMPT_TAIL_CHARS:]
    at = query.find(tail)
    return None if at < 0 else query[at + len(tail) :]


def score_queries(
    queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], reward: EnvReward | None = None
) -> dict[str, Any]:
    """OpenRLHF's reward call as plain lists: {"rewards", "scores", "extra_logs"} with the
    reward (format bonus included), the environment's score, and per query whether an answer
    was found and whether the prompt was found."""
    if not (len(queries) == len(prompts) == len(labels)):
        raise ValueError(
            f"queries, prompts and labels differ in length ({len(queries)}, {len(prompts)}, {len(labels)})"
        )
    read = row_formats.get("openrlhf").read  # a label: a JSON string (or the object) as sample writes it
    parsed = [read(x, f"label {i}") for i, x in enumerate(labels)]
    reward = reward or shared_reward()
    for label in parsed:  # a row from another library is an error even when it has no answer
        reward.resolve(label["env_id"], label.get("env_name"))
    responses = [response_of(q, p) for q, p in zip(queries, prompts)]
    found = [i for i, r in enumerate(responses) if r is not None]
    details = (
        reward.details(
            [responses[i] for i in found],
            [parsed[i]["env_id"] for i in found],
            [parsed[i]["instance"] for i in found],
            [parsed[i].get("env_name") for i in found],
            **{k: [parsed[i].get(k) for i in found] for k in RULE_FIELDS},
        )
        if found
        else []
    )
    rewards, scores = [0.0] * len(queries), [0.0] * len(queries)
    answered, prompt_found = [0.0] * len(queries), [0.0] * len(queries)
    for i, d in zip(found, details):
        rewards[i], scores[i] = float(d["reward"]), float(d["score"])
        answered[i], prompt_found[i] = (0.0 if d["answer"] is None else 1.0), 1.0
    return {
        "rewards": rewards,
        "scores": scores,
        "extra_logs": {"evoenv_answered": answered, "evoenv_prompt_found": prompt_found},
    }


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's custom reward function (`--reward.remote_url` pointing at this file), over
    $EVOENV_LIBRARY: {"rewards": tensor, "scores": tensor (the environment's score, in [0, 1],
    for dynamic filtering), "extra_logs": {name: tensor}}."""
    import torch

    out = score_queries(queries, prompts, labels)
    return {
        "rewards": torch.tensor(out["rewards"], dtype=torch.float),
        "scores": torch.tensor(out["scores"], dtype=torch.float),
        "extra_logs": {k: torch.tensor(v, dtype=torch.float) for k, v in out["extra_logs"].items()},
    }
