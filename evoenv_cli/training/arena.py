"""Reasoning Arena in `train` (`train.zero_variance: judge`): a GRPO group whose completions all
got the same verifier reward has zero advantage and teaches nothing, though its traces may
differ a lot in reasoning. Such groups go to a judge instead of being wasted: Swiss-style trace
tournaments against anchors (both orders), a Bradley-Terry fit, and rewards centred in each
group and shrunk so that no two traces the verifier tells apart swap order. The judge is
trusted only while its agreement with the verifier, probed each step on groups the verifier
separates, beats chance; otherwise the arena stands aside. The whole design, with each setting
and its default: docs/arena.md.

Why one module: the tournament, the Bradley-Terry fit, the trust gate and the reward shaping are
one algorithm whose steps share the group's state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import random
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoenv_cli import artifacts
from evoenv_cli.confidence import above_chance_p_value, wilson_interval
from evoenv_cli.errors import InputError
from evoenv_cli.llm.base import Backend, SamplingConfig, one_line, strip_thinking

log = logging.getLogger(__name__)

ARENA_FILE = "arena.jsonl"
POOL_FILE = "arena-pool.json"  # in each checkpoint folder: the anchors, for --resume
VERDICT_LINE = re.compile(r"^\s*VERDICT:\s*(A|B|TIE)\s*$", re.IGNORECASE)
ANY_VERDICT = re.compile(r"VERDICT\s*:", re.IGNORECASE)
RESPONSE_CHARS = 2000  # of each judge response kept in arena.jsonl
MIN_WIDTH = 1e-6  # judge rewards narrower than this would not survive float32: not given


# -- the judge's prompt and verdict --------------------------------------------------------------
def parse_verdict(text: str | None, opened: bool | None = False) -> str | None:
    """ "A", "B" or "tie" from a judge response, or None when it does not parse. Strict: after
    any thinking, the last non-empty line is `VERDICT: A`, `VERDICT: B` or `VERDICT: TIE` and
    no other line names a verdict, or the whole answer is just `A`, `B` or `TIE` (what a small
    model says)."""
    final = strip_thinking(text, opened=opened).strip()
    if final.upper() in ("A", "B", "TIE"):
        return "tie" if final.upper() == "TIE" else final.upper()
    lines = [line for line in final.splitlines() if line.strip()]
    if not lines:
        return None
    m = VERDICT_LINE.match(lines[-1])
    if m is None or any(ANY_VERDICT.search(line) for line in lines[:-1]):
        return None
    value = m.group(1).upper()
    return "tie" if value == "TIE" else value


def task_text(prompt: Any) -> str:
    """The task a trace answers: the last user turn of a chat prompt (demonstration turns come
    before it), or a plain text prompt."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        users = [u for u in users if isinstance(u, str)]
        if users:
            return users[-1]
    return str(prompt)


def clip(text: str, limit: int) -> str:
    """A trace as the judge sees it: whole, or its head and tail around a note of what is left out
    (the final answer is at the end)."""
    if len(text) <= limit:
        return text
    note = f"\n[... {len(text) - limit} characters left out ...]\n"
    head = (limit - len(note)) // 2
    return text[:head] + note + text[len(text) - (limit - len(note) - head) :]


def judge_messages(task: str, first: str, second: str, reward: float, max_chars: int) -> list[dict]:
    from evoenv_cli.prompts import template

    text = template("arena_judge.txt").format(
        task=task.strip(),
        first=clip(first, max_chars).strip() or "(empty)",
        second=clip(second, max_chars).strip() or "(empty)",
        reward=f"{reward:g}",
    )
    return [{"role": "user", "content": text}]


# -- Bradley-Terry -------------------------------------------------------------------------------
@dataclass
class BTFit:
    scores: list[float]  # log-strengths; 0 is the prior's reference trace
    iterations: int
    converged: bool


def fit_bradley_terry(
    n: int, wins: dict[tuple[int, int], float], prior: float = 1.0, max_iterations: int = 500, tolerance: float = 1e-6
) -> BTFit:
    """MAP Bradley-Terry log-strengths of `n` items from `wins[(i, j)]` (how often i beat j; a
    tie is half a win each way), by damped Newton steps on each connected part of the graph.
    Each item also plays `prior` virtual games, half won and half lost, against a fixed
    reference of log-strength 0: a prior that keeps every score finite whatever the graph
    (disconnected, or an item that only won or only lost) and makes the problem strictly
    concave, so Newton converges in a few steps. `iterations` is the most any part took."""
    if prior <= 0:
        raise ValueError("prior must be > 0 (without it a disconnected graph has no finite fit)")
    beat: list[dict[int, float]] = [{} for _ in range(n)]  # beat[i][j]: wins of i over j
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for (i, j), w in wins.items():
        if w > 0 and i != j:
            beat[i][j] = beat[i].get(j, 0.0) + w
            parent[root(i)] = root(j)
    parts: dict[int, list[int]] = {}
    for i in range(n):
        parts.setdefault(root(i), []).append(i)
    scores = [0.0] * n
    iterations, converged = 0, True
    for members in parts.values():
        if len(members) > 1:  # an item alone has only the prior: exactly its centre, 0
            it, ok = _newton(members, beat, prior, scores, max_iterations, tolerance)
            iterations, converged = max(iterations, it), converged and ok
    return BTFit(scores, iterations, converged)


def _log_sigmoid(x: float) -> float:
    return -math.log1p(math.exp(-x)) if x > -30 else x - math.log1p(math.exp(x))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x)) if x > -30 else math.exp(x) / (1 + math.exp(x))


def _newton(
    members: list[int],
    beat: list[dict[int, float]],
    prior: float,
    scores: list[float],
    max_iterations: int,
    tolerance: float,
) -> tuple[int, bool]:
    """Newton's method with backtracking on one connected part (writes into `scores`)."""
    at = {node: k for k, node in enumerate(members)}
    games = [[(at[j], w) for j, w in beat[i].items()] for i in members]  # (opponent, wins over it)
    m = len(members)

    def objective(s: list[float]) -> float:
        total = sum(prior / 2 * (_log_sigmoid(x) + _log_sigmoid(-x)) for x in s)
        return total + sum(w * _log_sigmoid(s[k] - s[o]) for k in range(m) for o, w in games[k])

    s = [0.0] * m
    moved = math.inf
    it = 0
    while it < max_iterations and moved >= tolerance:
        it += 1
        grad = [prior / 2 - prior * _sigmoid(x) for x in s]
        hess = [[0.0] * m for _ in range(m)]  # minus the Hessian: positive definite
        for k in range(m):
            p = _sigmoid(s[k])
            hess[k][k] += prior * p * (1 - p)
            for o, w in games[k]:
                q = _sigmoid(s[k] - s[o])
                grad[k] += w * (1 - q)
                grad[o] -= w * (1 - q)
                c = w * q * (1 - q)
                hess[k][k] += c
                hess[o][o] += c
                hess[k][o] -= c
                hess[o][k] -= c
        step = _solve(hess, grad)
        base, t = objective(s), 1.0
        trial = [a + d for a, d in zip(s, step)]
        while objective(trial) < base and t > 1e-8:
            t /= 2
            trial = [a + t * d for a, d in zip(s, step)]
        moved = max(abs(t * d) for d in step)
        s = trial
    for k, i in enumerate(members):
        scores[i] = s[k]
    return it, moved < tolerance


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """x with a x = b, for a symmetric positive definite a (Cholesky)."""
    m = len(b)
    low = [[0.0] * m for _ in range(m)]
    for i in range(m):
        for j in range(i + 1):
            total = a[i][j] - sum(low[i][k] * low[j][k] for k in range(j))
            low[i][j] = math.sqrt(max(total, 1e-300)) if i == j else total / low[j][j]
    y = [0.0] * m
    for i in range(m):
        y[i] = (b[i] - sum(low[i][k] * y[k] for k in range(i))) / low[i][i]
    x = [0.0] * m
    for i in reversed(range(m)):
        x[i] = (y[i] - sum(low[k][i] * x[k] for k in range(i + 1, m))) / low[i][i]
    return x


def judge_rewards(scores: list[float], width: float) -> list[float]:
    """A group's judge rewards from its Bradley-Terry scores: each trace's expected margin
    against the group's average trace, tanh((s - mean)/2), centred and scaled by width/2, so
    every value lies strictly inside (-width, width) and they sum to zero."""
    mean = sum(scores) / len(scores)
    squashed = [math.tanh((s - mean) / 2) for s in scores]
    centre = sum(squashed) / len(squashed)
    return [width / 2 * (x - centre) for x in squashed]


# -- anchors -------------------------------------------------------------------------------------
@dataclass
class Trace:
    """One completion in the arena: its id (`step:group:index`), text, verifier reward and
    Bradley-Terry score from the last fit it took part in."""

    id: str
    text: str
    reward: float
    score: float = 0.0


@dataclass
class PromptAnchors:
    traces: list[Trace] = field(default_factory=list)
    wins: dict[tuple[str, str], float] = field(default_factory=dict)  # among these traces


class AnchorPool:
    """Per prompt, a bounded set of earlier traces and the judge's results among them."""

    def __init__(self, size: int, max_prompts: int):
        self.size, self.max_prompts = size, max_prompts
        self.prompts: OrderedDict[str, PromptAnchors] = OrderedDict()

    def get(self, key: str) -> PromptAnchors:
        return self.prompts.get(key) or PromptAnchors()

    def update(self, key: str, candidates: list[Trace], wins: dict[tuple[str, str], float]) -> None:
        """Keep at most `size` of the candidates (the old anchors and the newly scored traces),
        spread evenly over their scores so later traces meet strong and weak ones, and the
        results among those kept."""
        if self.size == 0:
            return
        ranked = sorted(candidates, key=lambda t: t.score)
        if len(ranked) > self.size:
            if self.size == 1:
                picks = [len(ranked) // 2]
            else:
                picks = sorted({round(i * (len(ranked) - 1) / (self.size - 1)) for i in range(self.size)})
            ranked = [ranked[p] for p in picks]
        kept = {t.id for t in ranked}
        self.prompts[key] = PromptAnchors(
            ranked, {pair: w for pair, w in wins.items() if pair[0] in kept and pair[1] in kept}
        )
        self.prompts.move_to_end(key)
        while len(self.prompts) > self.max_prompts:
            self.prompts.popitem(last=False)

    def state(self) -> dict:
        return {
            "size": self.size,
            "prompts": [
                {
                    "key": key,
                    "traces": [vars(t) for t in p.traces],
                    "wins": [[a, b, w] for (a, b), w in sorted(p.wins.items())],
                }
                for key, p in self.prompts.items()
            ],
        }

    def load(self, state: dict) -> None:
        """Anchors saved by `state` (a checkpoint's); anything malformed is skipped."""
        for entry in state.get("prompts", []) if isinstance(state, dict) else []:
            try:
                traces = [
                    Trace(str(t["id"]), str(t["text"]), float(t["reward"]), float(t["score"])) for t in entry["traces"]
                ]
                wins = {(str(a), str(b)): float(w) for a, b, w in entry["wins"]}
                self.update(str(entry["key"]), traces, wins)
            except (KeyError, TypeError, ValueError):
                continue


# -- several processes ---------------------------------------------------------------------------
class SingleProcess:
    rank, world = 0, 1

    def gather(self, obj: Any) -> list[Any]:
        return [obj]


class AccelerateProcesses:
    """All ranks of an `accelerate launch`: each gathers every rank's object, in rank order."""

    def __init__(self, state):
        self.rank, self.world = state.process_index, state.num_processes

    def gather(self, obj: Any) -> list[Any]:
        from accelerate.utils import gather_object

        return gather_object([obj])


def processes() -> SingleProcess | AccelerateProcesses:
    try:
        from accelerate import PartialState
    except ImportError:
        return SingleProcess()
    state = PartialState()
    return AccelerateProcesses(state) if state.num_processes > 1 else SingleProcess()


# -- the arena -----------------------------------------------------------------------------------
@dataclass
class Comparison:
    group: int  # index of the judged group in the step
    a: int  # node ids in the step's graph
    b: int
    a_first: bool  # whether a is shown as solution A (the first of two orders with both_orders)


@dataclass
class ArenaStats:
    """What one batch cost and gave (logged as arena/* in metrics.jsonl)."""

    groups: int = 0
    zero_variance: int = 0  # groups whose verifier rewards were all equal
    rescued: int = 0  # of those, groups the judge gave a non-zero advantage
    judge_calls: int = 0  # requests to the judge (two a game with both_orders)
    judge_errors: int = 0  # requests that returned nothing (a game with no answer at all is dropped)
    unparseable: int = 0  # answers that did not parse (counted as ties)
    judge_seconds: float = 0.0
    bt_iterations: int = 0
    probe_calls: int = 0  # judge requests on groups the verifier separates
    agree: int = 0  # of those, verdicts naming the verifier's better trace
    disagree: int = 0  # verdicts naming its worse one (ties, unparseable and failed: neither)
    trusted: int = 0  # steps the judge's rewards were used
    off: int = 0  # steps the arena stood aside, its judge at chance (or unmeasured)

    def metrics(self) -> dict[str, float]:
        groups = max(self.groups, 1)
        return {
            "arena/zero_variance_share": self.zero_variance / groups,
            "arena/rescued_share": self.rescued / groups,
            "arena/probe_calls": float(self.probe_calls),
            "arena/judge_trusted": float(self.trusted),
            "arena/judge_calls": float(self.judge_calls),
            "arena/judge_errors": float(self.judge_errors),
            "arena/unparseable": float(self.unparseable),
            "arena/judge_seconds": self.judge_seconds,
            "arena/bt_iterations": float(self.bt_iterations),
        }


JudgeSession = Callable[[], contextlib.AbstractContextManager[Backend]]


def prompt_key(env_id: Any, seed: Any, difficulty: Any, instance: Any) -> str:
    """Which prompt a trace answers: env_id, seed and level, or the instance itself when a row
    lacks its seed."""
    if seed is not None:
        return f"{env_id}:{seed}:{difficulty}"
    text = instance if isinstance(instance, str) else json.dumps(instance, sort_keys=True, default=str)
    return f"{env_id}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def pool_key(items: list[tuple[str, str, str, float, float]], group: list[int]) -> str:
    """Whose anchors a zero-variance group meets: earlier traces of the same prompt that the
    verifier scored the same (so the judge's prompt can say both got the same score)."""
    key, _, _, tie, _ = items[group[0]]
    return f"{key}@{tie!r}"


class Arena:
    """Turns a batch's verifier rewards into rewards with the judge's rankings inside its
    zero-variance groups (`rescore`); `ArenaConfig` holds the settings."""

    def __init__(
        self,
        cfg,
        group_size: int,
        judge: JudgeSession | None = None,
        log_path: Path | None = None,
        procs: SingleProcess | AccelerateProcesses | None = None,
        owned: Backend | None = None,
    ):
        self.cfg = cfg
        self.owned = owned  # a judge backend built for this arena, closed with it
        self.group_size = group_size
        self.judge = judge
        self.judge_opens_think: bool | None = None
        self.procs = procs or SingleProcess()
        self.pool = AnchorPool(cfg.anchors, cfg.max_prompts)
        self.log = artifacts.JsonlAppender(log_path) if log_path is not None and self.procs.rank == 0 else None
        self.totals = ArenaStats()
        self.last = ArenaStats()
        self.calls = 0
        self.off_until = 0  # a judge found at chance is probed again at this step
        self._warned = False

    # -- the reward hook --------------------------------------------------------------------------
    def rescore_columns(
        self,
        rewards: list[float],
        prompts: Sequence[Any] | None,
        completions: Sequence[Any],
        env_id: Sequence[Any],
        instance: Sequence[Any],
        columns: dict[str, Any],
        ties: list[float] | None = None,
    ) -> list[float]:
        """`rescore` from what TRL hands a reward function: the rows' columns (`seed`,
        `difficulty`), `trainer_state` (the step) and `log_metric` (into metrics.jsonl)."""
        n = len(rewards)
        seeds = columns.get("seed") or [None] * n
        levels = columns.get("difficulty") or [None] * n
        keys = [prompt_key(*row) for row in zip(env_id, seeds, levels, instance, strict=True)]
        state = columns.get("trainer_state")
        step = state.global_step + 1 if state is not None else self.calls + 1
        return self.rescore(
            rewards,
            prompts if prompts is not None else [""] * n,
            completions,
            keys,
            step,
            columns.get("log_metric"),
            ties,
        )

    def rescore(
        self,
        rewards: list[float],
        prompts: Sequence[Any],
        completions: Sequence[Any],
        keys: Sequence[str],
        step: int,
        log_metric: Callable[[str, float], None] | None = None,
        ties: Sequence[float] | None = None,
    ) -> list[float]:
        """`rewards` (the verifier's, for this process's completions, in TRL's order: groups of
        `group_size` consecutive completions of one prompt over all processes) with the judge's
        rewards added inside zero-variance groups. `ties`: the values whose ties make a group
        zero-variance (default `rewards`): the environment's score, where `rewards` is the sum
        TRL forms with a format bonus, so a group that learned nothing about the task is judged
        even when its format varied, and the judge's rewards never reorder that sum."""
        from evoenv_cli.integrations.rewards import completion_text

        ties = rewards if ties is None else ties
        local = [
            (key, task_text(p), completion_text(c), float(t), float(r))
            for key, p, c, t, r in zip(keys, prompts, completions, ties, rewards, strict=True)
        ]
        parts = self.procs.gather(local)
        start = sum(len(p) for p in parts[: self.procs.rank])
        items = [x for part in parts for x in part]
        new, stats = self._rescore_all(items, step)
        self.calls += 1
        self.last = stats
        for name in vars(self.totals):
            setattr(self.totals, name, getattr(self.totals, name) + getattr(stats, name))
        if log_metric is not None:
            for name, value in {**stats.metrics(), **self.agreement_metrics()}.items():
                log_metric(name, value)
        return new[start : start + len(local)]

    # -- is the judge right? ----------------------------------------------------------------------
    def agreement(self, current: ArenaStats | None = None) -> dict:
        """The judge's agreement with the verifier over every probe so far (and `current`, a
        step not yet in the totals): the share of decisive verdicts naming the verifier's
        better trace, its 95% interval, the sign test's one-sided p-value against 1/2, and
        whether that beats `trust_alpha`."""
        t, c = self.totals, current or ArenaStats()
        agree, n = t.agree + c.agree, t.agree + c.agree + t.disagree + c.disagree
        share = agree / n if n else None
        p = above_chance_p_value(agree, n, 0.5) if n else None
        return {
            "agreement": None if share is None else round(share, 4),
            "ci95": wilson_interval(share, n),
            "decisive": n,
            "probe_calls": t.probe_calls + c.probe_calls,
            "p_value": None if p is None else round(p, 6),
            "trusted": self.cfg.trust_alpha >= 1.0 or (p is not None and p < self.cfg.trust_alpha),
        }

    def agreement_metrics(self) -> dict[str, float]:
        a = self.agreement()
        if a["agreement"] is None:
            return {}
        return {
            "arena/judge_agreement": a["agreement"],
            "arena/judge_agreement_lo": a["ci95"][0],
            "arena/judge_agreement_hi": a["ci95"][1],
            "arena/judge_p_value": a["p_value"],
        }

    def _trusted(self, items, groups, step, stats) -> bool:
        """Probe the judge on this step's groups the verifier separates (unless it sits out
        after being found at chance), then whether its agreement so far beats chance."""
        if self.cfg.trust_alpha >= 1.0:
            stats.trusted = 1
            return True
        if step < self.off_until:
            stats.off = 1
            return False
        separated = [
            idx for idx in groups if len({items[i][3] for i in idx}) > 1 and len({items[i][0] for i in idx}) == 1
        ]
        if separated and self.cfg.probe_groups:
            self._probe(items, separated[: self.cfg.probe_groups], step, stats)
        trusted = self.agreement(stats)["trusted"]
        if trusted:
            stats.trusted = 1
        else:
            stats.off = 1
            self.off_until = step + self.cfg.retest_every
        return trusted

    def _probe(self, items, separated: list[list[int]], step: int, stats: ArenaStats) -> None:
        """One pair per separated group, the verifier's best and worst trace, in both orders,
        shown as if tied at the lower score (as the judge sees a zero-variance group)."""
        nodes: list[Trace] = []
        comparisons = []
        for gi, idx in enumerate(separated):
            best = max(idx, key=lambda i: items[i][3])
            worst = min(idx, key=lambda i: items[i][3])
            low = items[worst][3]
            nodes += [
                Trace(f"probe:{step}:{gi}:best", items[best][2], low),
                Trace(f"probe:{step}:{gi}:worst", items[worst][2], low),
            ]
            comparisons.append(Comparison(gi, 2 * gi, 2 * gi + 1, True))
        orders = [(c, first) for c in comparisons for first in (True, False)]
        answers = self._ask(items, separated, nodes, orders, step)
        for (c, a_first), (text, error) in zip(orders, answers):
            stats.probe_calls += 1
            verdict = parse_verdict(text, self.judge_opens_think) if text is not None else None
            named = None if verdict in (None, "tie") else "best" if (verdict == "A") == a_first else "worst"
            stats.agree += named == "best"
            stats.disagree += named == "worst"
            self._write(
                {
                    "kind": "probe",
                    "step": step,
                    "group": c.group,
                    "key": items[separated[c.group][0]][0],
                    "shown_first": "best" if a_first else "worst",
                    "named": named,
                    "status": "error" if text is None else "ok" if verdict else "unparseable",
                    **({"error": error} if text is None else {"response": text[:RESPONSE_CHARS]}),
                }
            )

    def _rescore_all(
        self, items: list[tuple[str, str, str, float, float]], step: int
    ) -> tuple[list[float], ArenaStats]:
        rewards = [r for *_, r in items]
        stats = ArenaStats()
        g = self.group_size
        if len(items) % g:
            self._note(step, f"{len(items)} completions are not whole groups of {g}: no judging this step")
            return rewards, stats
        groups = [list(range(s, s + g)) for s in range(0, len(items), g)]
        stats.groups = len(groups)
        zero = [idx for idx in groups if len({items[i][3] for i in idx}) == 1]
        stats.zero_variance = len(zero)
        mixed = [idx for idx in zero if len({items[i][0] for i in idx}) > 1]
        if mixed:  # TRL's groups are consecutive completions of one prompt; anything else is not judged
            self._note(step, f"{len(mixed)} groups of {g} consecutive completions mix prompts: not judged")
            zero = [idx for idx in zero if idx not in mixed]
        if not self._trusted(items, groups, step, stats):
            return rewards, stats
        width = self._width(rewards)
        if zero and width < MIN_WIDTH:
            self._note(
                step,
                f"verifier rewards {width / 0.45:.2g} apart leave no room for judge rewards "
                "that keep their order: not judged",
            )
        if not zero or width < MIN_WIDTH:
            return rewards, stats
        nodes, group_nodes, anchor_nodes, fit, step_wins = self._tournament(items, zero, step, stats)
        new = list(rewards)
        for gi, idx in enumerate(zero):
            bonus = judge_rewards([fit.scores[n] for n in group_nodes[gi]], width)
            rescued = max(bonus) - min(bonus) > MIN_WIDTH
            stats.rescued += rescued
            for i, b in zip(idx, bonus):
                new[i] = rewards[i] + (b if rescued else 0.0)
            self._remember(pool_key(items, idx), group_nodes[gi] + anchor_nodes[gi], nodes, fit, step_wins)
            self._write(
                {
                    "kind": "group",
                    "step": step,
                    "group": gi,
                    "key": items[idx[0]][0],
                    "reward": items[idx[0]][3],
                    "rescued": rescued,
                    "width": width,
                    "traces": [
                        {
                            "id": nodes[n].id,
                            "score": round(fit.scores[n], 6),
                            "bonus": round(b, 8),
                            "chars": len(nodes[n].text),
                            "sha256": _sha(nodes[n].text),
                        }
                        for n, b in zip(group_nodes[gi], bonus)
                    ],
                    "anchors": [{"id": nodes[n].id, "score": round(fit.scores[n], 6)} for n in anchor_nodes[gi]],
                }
            )
        return new, stats

    def _tournament(self, items, zero, step, stats):
        """k rounds of judging over the zero-variance groups `zero`, then the final fit."""
        nodes, group_nodes, anchor_nodes = self._nodes(items, zero, step)
        history: dict[tuple[int, int], float] = {}
        for gi, idx in enumerate(zero):  # the anchors' earlier results take part in every fit
            ids = {nodes[n].id: n for n in anchor_nodes[gi]}
            for (a, b), w in self.pool.get(pool_key(items, idx)).wins.items():
                if a in ids and b in ids:
                    history[(ids[a], ids[b])] = history.get((ids[a], ids[b]), 0.0) + w
        rngs = [
            random.Random(f"evoenv-arena:{self.cfg.seed}:{step}:{gi}:{pool_key(items, idx)}")
            for gi, idx in enumerate(zero)
        ]
        faced: list[set[int]] = [set() for _ in nodes]
        step_wins: dict[tuple[int, int], float] = {}
        started = time.perf_counter()
        for round_ in range(self.cfg.comparisons):
            fit = self._fit(len(nodes), history, step_wins)
            stats.bt_iterations += fit.iterations
            planned = self._pair(round_, fit.scores, group_nodes, anchor_nodes, faced, rngs)
            if not planned:
                break
            verdicts = self._judge(items, zero, nodes, planned, step, stats)
            for c, outcome in zip(planned, verdicts):
                for winner, loser, w in {
                    "a": [(c.a, c.b, 1.0)],
                    "b": [(c.b, c.a, 1.0)],
                    "tie": [(c.a, c.b, 0.5), (c.b, c.a, 0.5)],
                }.get(outcome, []):
                    step_wins[(winner, loser)] = step_wins.get((winner, loser), 0.0) + w
        stats.judge_seconds = time.perf_counter() - started
        fit = self._fit(len(nodes), history, step_wins)
        stats.bt_iterations += fit.iterations
        return nodes, group_nodes, anchor_nodes, fit, step_wins

    def _width(self, rewards: list[float]) -> float:
        """The span judge rewards may take: `weight`, but under half the smallest gap between two
        distinct verifier rewards of the batch, so that no two traces the verifier separates swap."""
        values = sorted(set(rewards))
        return min([self.cfg.weight, *(0.45 * (b - a) for a, b in zip(values, values[1:]))])

    def _nodes(self, items, zero, step) -> tuple[list[Trace], list[list[int]], list[list[int]]]:
        """The step's graph: a node per new trace of each judged group, and per anchor of its
        prompt (a prompt judged twice in one step has its anchors twice, once per group)."""
        nodes: list[Trace] = []
        group_nodes: list[list[int]] = []
        anchor_nodes: list[list[int]] = []
        for gi, idx in enumerate(zero):
            group_nodes.append([len(nodes) + j for j in range(len(idx))])
            nodes += [Trace(f"{step}:{gi}:{j}", items[i][2], items[i][3]) for j, i in enumerate(idx)]
            anchors = self.pool.get(pool_key(items, idx)).traces
            anchor_nodes.append([len(nodes) + j for j in range(len(anchors))])
            nodes += [Trace(a.id, a.text, a.reward, a.score) for a in anchors]
        return nodes, group_nodes, anchor_nodes

    def _fit(self, n: int, history: dict, step_wins: dict) -> BTFit:
        wins = dict(history)
        for pair, w in step_wins.items():
            wins[pair] = wins.get(pair, 0.0) + w
        return fit_bradley_terry(n, wins, self.cfg.prior, self.cfg.max_iterations, self.cfg.tolerance)

    @staticmethod
    def _pair(round_: int, scores, group_nodes, anchor_nodes, faced, rngs) -> list[Comparison]:
        """One round of a Swiss tournament: each new trace meets the opponent it has not met
        whose current rating is nearest its own (the game whose outcome is least certain): in the
        first round a member of its own group (the game that orders the group directly), later
        one of its group or its prompt's anchors. Each trace starts one game a round, so a step
        has at most groups x size x k games."""
        planned = []
        for gi, (mine, theirs) in enumerate(zip(group_nodes, anchor_nodes)):
            rng = rngs[gi]
            order = mine[:]
            rng.shuffle(order)
            busy: set[int] = set()
            for node in order:
                options = [o for o in (mine if round_ == 0 else mine + theirs) if o != node and o not in faced[node]]
                if not options:
                    continue
                other = min(options, key=lambda o: (abs(scores[o] - scores[node]), o in busy, rng.random()))
                faced[node].add(other)
                faced[other].add(node)
                busy.update((node, other))
                planned.append(Comparison(gi, node, other, rng.random() < 0.5))
        return planned

    def _judge(self, items, zero, nodes, comparisons, step, stats) -> list[str | None]:
        """Each comparison's outcome: "a", "b", "tie", or None when the judge gave no verdict.
        With `both_orders` each pair is asked twice, once in each order, and a winner must win
        both (a judge that always names the first solution yields ties, not noise). This
        process asks every world-th request; the answers are gathered. Every process opens the
        judge session even with nothing to ask itself: for the policy, opening it can be a
        collective step (ZeRO-3 gathers the weights)."""
        orders = [
            (c, first)
            for c in comparisons
            for first in ((c.a_first, not c.a_first) if self.cfg.both_orders else (c.a_first,))
        ]
        answers = self._ask(items, zero, nodes, orders, step)
        per = 2 if self.cfg.both_orders else 1
        outcomes: list[str | None] = []
        errors: list[str] = []
        for n, c in enumerate(comparisons):
            asked = []
            for (_, a_first), (text, error) in zip(orders[n * per : (n + 1) * per], answers[n * per : (n + 1) * per]):
                stats.judge_calls += 1
                if text is None:
                    stats.judge_errors += 1
                    errors.append(error or "no response")
                    asked.append(
                        {"shown_first": "a" if a_first else "b", "status": "error", "winner": None, "error": error}
                    )
                    continue
                verdict = parse_verdict(text, self.judge_opens_think)
                stats.unparseable += verdict is None
                winner = "tie" if verdict in (None, "tie") else "a" if (verdict == "A") == a_first else "b"
                asked.append(
                    {
                        "shown_first": "a" if a_first else "b",
                        "status": "ok" if verdict else "unparseable",
                        "winner": winner,
                        "response": text[:RESPONSE_CHARS],
                    }
                )
            winners = {x["winner"] for x in asked if x["winner"] is not None}
            outcome = None if not winners else winners.pop() if len(winners) == 1 else "tie"
            outcomes.append(outcome)
            self._write(
                {
                    "kind": "comparison",
                    "step": step,
                    "group": c.group,
                    "a": nodes[c.a].id,
                    "b": nodes[c.b].id,
                    "winner": outcome,
                    "asked": asked,
                }
            )
        if errors:
            self._note(
                step,
                f"the judge gave no verdict for {len(errors)} of {len(orders)} requests "
                f"(those count for nothing; the verifier's rewards stand): {errors[0]}",
            )
        return outcomes

    def _ask(self, items, zero, nodes, orders, step) -> list[tuple[str | None, str | None]]:
        """(response, None) or (None, error) for each (comparison, a shown first) request."""
        mine = list(range(self.procs.rank, len(orders), self.procs.world))
        responses: list[tuple[str | None, str | None]] = [(None, "no judge")] * len(mine)
        if orders and self.judge is not None:
            conversations = []
            for c, a_first in (orders[i] for i in mine):
                first, second = (nodes[c.a], nodes[c.b]) if a_first else (nodes[c.b], nodes[c.a])
                conversations.append(
                    judge_messages(
                        items[zero[c.group][0]][1], first.text, second.text, nodes[c.a].reward, self.cfg.max_trace_chars
                    )
                )
            sampling = SamplingConfig(
                n=1, temperature=self.cfg.temperature, max_tokens=self.cfg.max_tokens, seed=self.cfg.seed
            )
            try:
                with self.judge() as backend:
                    self.judge_opens_think = getattr(backend, "opens_think", None)  # the thinking rule's input
                    gens = (
                        backend.generate(conversations, sampling, prompt_ids=[step * 1_000_000 + i for i in mine])
                        if mine
                        else []
                    )
                if len(gens) != len(mine):
                    raise RuntimeError(f"the judge returned {len(gens)} generations for {len(mine)} prompts")
                responses = [
                    (None, g.error or "no completion")
                    if not g.ok or not g.completions or g.completions[0].finish_reason == "error"
                    else (g.completions[0].text, None)
                    for g in gens
                ]
            except Exception as exc:  # a failing judge never costs the verifier's rewards
                responses = [(None, one_line(exc))] * len(mine)
        gathered = self.procs.gather(responses)
        return [gathered[i % self.procs.world][i // self.procs.world] for i in range(len(orders))]

    def _remember(
        self, key: str, members: list[int], nodes: list[Trace], fit: BTFit, step_wins: dict[tuple[int, int], float]
    ) -> None:
        """Offer a judged group's traces to its prompt's anchors, with this step's results (a
        prompt judged twice in one step keeps what the first time added)."""
        current = self.pool.get(key)
        traces = {t.id: t for t in current.traces}
        for n in members:
            traces[nodes[n].id] = Trace(nodes[n].id, nodes[n].text, nodes[n].reward, fit.scores[n])
        inside = set(members)
        pairs = dict(current.wins)
        for (i, j), w in step_wins.items():
            if i in inside and j in inside:
                pair = (nodes[i].id, nodes[j].id)
                pairs[pair] = pairs.get(pair, 0.0) + w
        self.pool.update(key, list(traces.values()), pairs)

    # -- records ----------------------------------------------------------------------------------
    def _write(self, record: dict) -> None:
        if self.log is not None:
            self.log.append(record)

    def _note(self, step: int, message: str) -> None:
        self._write({"kind": "error", "step": step, "error": message})
        if not self._warned and self.procs.rank == 0:
            log.warning(f"arena: {message} (said once; every case is in {ARENA_FILE})")
            self._warned = True

    def summary(self) -> dict:
        """The run's totals, for the train manifest."""
        t = self.totals
        return {
            "groups": t.groups,
            "zero_variance": t.zero_variance,
            "rescued": t.rescued,
            "judge_calls": t.judge_calls,
            "judge_errors": t.judge_errors,
            "unparseable": t.unparseable,
            "judge_seconds": round(t.judge_seconds, 3),
            "prompts_with_anchors": len(self.pool.prompts),
            "steps_trusted": t.trusted,
            "steps_off": t.off,
            "judge_agreement": self.agreement(),
        }

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
            self.log = None
        if self.owned is not None:
            self.owned.close()
            self.owned = None

    def save(self, folder: Path) -> None:
        """The anchors, into a checkpoint folder (by the main process)."""
        if self.procs.rank == 0 and folder.is_dir():
            artifacts.write_json_atomic(folder / POOL_FILE, self.pool.state())

    def restore(self, folder: Path | None) -> bool:
        """The anchors saved in a checkpoint folder, if there are any; whether they were found."""
        path = folder / POOL_FILE if folder is not None else None
        if path is None or not path.is_file():
            return False
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        self.pool.load(state)
        return True

    def callback(self):
        """A TrainerCallback that saves the anchors into each checkpoint."""
        from transformers import TrainerCallback

        arena = self

        class ArenaCheckpoint(TrainerCallback):
            def on_save(self, args, state, control, **kwargs):
                arena.save(Path(args.output_dir) / f"checkpoint-{state.global_step}")

        return ArenaCheckpoint()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]


# -- judges --------------------------------------------------------------------------------------
def check_judge(judge_cfg) -> None:
    """What can be known about the judge before training starts (an InputError otherwise)."""
    from evoenv_cli.llm.base import BackendError, check_backend

    if judge_cfg.model is None:
        if judge_cfg.kind != "hf":
            raise BackendError(
                f"train.arena.judge: the {judge_cfg.kind} backend needs a model; leave model "
                "null (with kind hf) to judge with the policy being trained"
            )
        return
    try:
        check_backend(judge_cfg.kind, judge_cfg.model)
    except InputError as exc:  # BackendError, or a model folder that is not there
        raise BackendError(f"train.arena.judge: {exc}") from None


def backend_judge(backend: Backend) -> JudgeSession:
    """A judge session over a backend that lives for the whole run."""
    return lambda: contextlib.nullcontext(backend)


def policy_judge(trainer, batch_size: int = 16, chat_template_kwargs: dict | None = None) -> JudgeSession:
    """The policy itself as the judge: the trainer's own model with its current weights, seen
    through an `hf` backend for the length of one judging (unwrapped and gathered the way TRL
    generates with it, in eval mode, gradients off; training mode is restored after)."""

    @contextlib.contextmanager
    def session():
        import torch
        from trl.models import unwrap_model_for_generation

        from evoenv_cli.llm.hf import HFBackend

        dist = getattr(trainer, "_dist", None)
        with (
            unwrap_model_for_generation(
                trainer.model_wrapped,
                trainer.accelerator,
                gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
                gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
            ) as model,
            torch.no_grad(),
            dist.summon_full_params(trainer.model_wrapped, recurse=False) if dist else contextlib.nullcontext(),
        ):
            was_training = model.training
            model.eval()
            try:
                yield HFBackend.over(
                    model,
                    trainer.processing_class,
                    "policy",
                    batch_size=batch_size,
                    chat_template_kwargs=chat_template_kwargs,
                )
            finally:
                if was_training:
                    model.train()

    return session


def build(trainer, train_cfg, out: Path, resume: bool, judge: Backend | None = None) -> Arena:
    """The arena of a training run, hooked into `trainer` (anchors saved with its checkpoints;
    on `resume`, those of the checkpoint it resumes from restored). The judge: `judge` when
    given, else the recipe's `arena.judge` when it names a model (built here, closed with the
    arena), else the policy being trained."""
    from evoenv_cli.llm.base import backend_from_config

    cfg = train_cfg.arena
    procs = processes()
    log_path = out / ARENA_FILE
    if not resume and procs.rank == 0:
        log_path.unlink(missing_ok=True)
    owned = None
    if judge is None and cfg.judge.model is not None:
        judge_cfg = cfg.judge
        if judge_cfg.kind == "hf" and judge_cfg.device == "auto" and procs.world > 1:
            judge_cfg = dataclasses.replace(judge_cfg, device=str(trainer.accelerator.device))
        judge = owned = backend_from_config(judge_cfg)
    if judge is not None:
        session = backend_judge(judge)
    else:
        session = policy_judge(
            trainer,
            int(cfg.judge.options.get("batch_size", 16)),
            cfg.judge.chat_template_kwargs or train_cfg.chat_template_kwargs,
        )
    arena = Arena(cfg, train_cfg.num_generations, session, log_path, procs, owned=owned)
    trainer.add_callback(arena.callback())
    if resume:
        arena.restore(pool_folder(out))
    return arena


def pool_folder(out: Path) -> Path | None:
    """The checkpoint `--resume` continues from (its anchors come back with it)."""
    from transformers.trainer_utils import get_last_checkpoint

    folder = out / "checkpoints"
    last = get_last_checkpoint(str(folder)) if folder.is_dir() else None
    return Path(last) if last else None
