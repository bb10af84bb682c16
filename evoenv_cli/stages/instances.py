"""Instances of environments, made in the sandbox and turned into chat prompts: the one path
that `sample`, `evaluate` and `calibrate` share, so a prompt is built the same way for
training, for calibration and for held-out evaluation.

For every (seed, difficulty) wanted: `generate` in the sandbox, then `prompt` and `solve`.
With `SampleConfig.demonstrations = k`, the conversation first shows k demonstrations: another
instance of the same environment at the same level (seeds derived from the row's seed, in the
training range), asked the same way, and answered by the oracle in the answer tags (the
recipe's `answer:` section, like the instruction after every task). That is
how a weak policy learns the answer format honestly: a demonstration shows the format and
never the answer to the question asked. A demonstration is never the asked instance itself,
and its answer differs from the asked one wherever another instance allows it, so copying
the demonstration is not a way to score.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from evoenv_cli.config import AnswerConfig, SampleConfig
from evoenv_cli.runtime.pool import Call, CallResult, EnvFile, SandboxPool

DEMONSTRATION_TRIES = 3  # extra candidate instances per wanted demonstration


def demonstration_seed(seed: int, k: int) -> int:
    """The k-th candidate seed for a demonstration beside the instance at `seed` (training range)."""
    digest = hashlib.sha256(f"demonstration:{seed}:{k}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def user_turn(task: str, instruction: str) -> dict:
    return {"role": "user", "content": f"{task}\n\n{instruction}" if instruction else task}


def build_messages(task: str, cfg: SampleConfig, answer: AnswerConfig,
                   demonstrations: list[tuple[str, str]] = ()) -> list[dict]:
    """The conversation for one task: system prompt, demonstration turns, then the task."""
    messages = []
    if cfg.system_prompt:
        messages.append({"role": "system", "content": cfg.system_prompt})
    for demo_task, demo_answer in demonstrations:
        messages.append(user_turn(demo_task, answer.task_text))
        messages.append({"role": "assistant", "content": answer.tagged(demo_answer)})
    messages.append(user_turn(task, answer.task_text))
    return messages


@dataclass
class Prepared:
    """One instance ready to ask: its prompt text, the oracle's answer and the conversation."""

    env: EnvFile
    name: str
    seed: int
    difficulty: int
    instance: dict
    task: str
    answer: str | None  # None when solve failed (only where answers are optional)
    messages: list[dict]
    demonstration_seeds: list[int] = field(default_factory=list)


@dataclass
class Plan:
    env: EnvFile
    name: str
    pairs: list[tuple[int, int]]  # (seed, difficulty)


def _skip(env: EnvFile, seed, difficulty, what: str, r: CallResult) -> dict:
    return {"env": env.path.name, "seed": seed, "difficulty": difficulty,
            "reason": f"{what} {r.status}: {r.error}"}


def prepare(pool: SandboxPool, plans: list[Plan], cfg: SampleConfig, answer_cfg: AnswerConfig,
            need_answer: bool = True) -> tuple[list[list[Prepared]], list[dict]]:
    """Per plan, the instances that could be made (in the plan's order), and the skips
    ({"env", "seed", "difficulty", "reason"}). With `need_answer` False an instance whose
    `solve` failed is kept with answer None (evaluation scores answers with `score` anyway)."""
    skipped: list[dict] = []
    wanted = max(0, int(cfg.demonstrations or 0))
    tries = wanted + DEMONSTRATION_TRIES if wanted else 0
    jobs = []
    for p in plans:
        calls = [Call.generate(s, d) for s, d in p.pairs]
        calls += [Call.generate(demonstration_seed(s, k), d) for s, d in p.pairs for k in range(tries)]
        jobs.append((p.env, calls))
    generated = pool.run_many(jobs)
    second = []
    for p, results in zip(plans, generated):
        main, demos = results[:len(p.pairs)], results[len(p.pairs):]
        good = []
        for k, ((s, d), r) in enumerate(zip(p.pairs, main)):
            if not r.ok:
                skipped.append(_skip(p.env, s, d, "generate", r))
                continue
            candidates = [(demonstration_seed(s, j), demos[k * tries + j]) for j in range(tries)]
            good.append((s, d, r.value, [(ds, dr.value) for ds, dr in candidates if dr.ok]))
        second.append((p, good))
    calls_of = []
    for p, good in second:
        calls = []
        for _, _, inst, cands in good:
            calls += [Call.prompt(inst), Call.solve(inst)]
            for _, cinst in cands:
                calls += [Call.prompt(cinst), Call.solve(cinst)]
        calls_of.append((p.env, calls))
    answered = pool.run_many(calls_of)
    out: list[list[Prepared]] = []
    for (p, good), results in zip(second, answered):
        made, at = [], 0
        for s, d, inst, cands in good:
            pr, sr = results[at], results[at + 1]
            at += 2
            shown = []
            for ds, cinst in cands:
                cp, cs = results[at], results[at + 1]
                at += 2
                if cp.ok and cs.ok:
                    shown.append((ds, cinst, cp.value, cs.value))
            if not pr.ok:
                skipped.append(_skip(p.env, s, d, "prompt", pr))
                continue
            if not sr.ok and need_answer:
                skipped.append(_skip(p.env, s, d, "solve", sr))
                continue
            answer = sr.value if sr.ok else None
            picked = pick_demonstrations(inst, answer, shown, wanted)
            messages = build_messages(pr.value, cfg, answer_cfg, [(t, a) for _, _, t, a in picked])
            made.append(Prepared(p.env, p.name, s, d, inst, pr.value, answer, messages,
                                 [ds for ds, _, _, _ in picked]))
        out.append(made)
    return out, skipped


def pick_demonstrations(instance: dict, answer: str | None, shown: list[tuple], wanted: int) -> list[tuple]:
    """Up to `wanted` candidates (seed, instance, task, answer): never the asked instance, and
    first those whose answer differs from the asked one."""
    if not wanted:
        return []
    key = json.dumps(instance, sort_keys=True)
    others = [c for c in shown if json.dumps(c[1], sort_keys=True) != key]
    differ = [c for c in others if answer is None or c[3].strip() != answer.strip()]
    same = [c for c in others if c not in differ]
    return (differ + same)[:wanted]
