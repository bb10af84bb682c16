"""Instances of environments turned into chat conversations: the one path that `sample`,
`evaluate` and `calibrate` share, so a prompt is built the same way for training, for
calibration and for held-out evaluation. The instances themselves are made in the sandbox by
`runtime.instances.make_instances`, the path every stage makes instances by; what is here
needs the sample config (system prompt, answer instruction, demonstrations), which the
runtime layer does not know.

With `SampleConfig.demonstrations = k`, the conversation first shows k demonstrations: another
instance of the same environment at the same level (seeds derived from the row's seed, in the
training range), asked the same way, and answered by the oracle in the answer tags (the
recipe's `answer:` section, like the instruction after every task). That is
how a weak policy learns the answer format honestly: a demonstration shows the format and
never the answer to the question asked. A demonstration is never the asked instance itself,
its answer is never the asked one and its task never writes the asked answer (a row with no
such candidate is asked without one), so copying the demonstration is not a way to score.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from evoenv_cli.artifacts import EnvLibrary
from evoenv_cli.checks.probes import whole_token_in
from evoenv_cli.config import AnswerConfig, SampleConfig
from evoenv_cli.envfile import EnvFile
from evoenv_cli.runtime import contract
from evoenv_cli.runtime.instances import ALL, Order, make_instances
from evoenv_cli.runtime.workers import SandboxWorkers

DEMONSTRATION_TRIES = 3  # extra candidate instances per wanted demonstration


def demonstration_seed(seed: int, k: int) -> int:
    """The k-th candidate seed for a demonstration beside the instance at `seed` (training range)."""
    digest = hashlib.sha256(f"demonstration:{seed}:{k}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def user_turn(task: str, instruction: str) -> dict:
    return {"role": "user", "content": f"{task}\n\n{instruction}" if instruction else task}


EXAMPLE = "An answer to another problem of this kind, in that form: "


def build_messages(
    task: str,
    cfg: SampleConfig,
    answer: AnswerConfig,
    demonstrations: list[tuple[str, str]] = (),
    example: str | None = None,
) -> list[dict]:
    """The conversation for one task: system prompt, demonstration turns, then the task;
    `example`: a demonstration's answer alone, tagged, after the task's instruction (what is
    left of a demonstration too long to show whole)."""
    messages = []
    if cfg.system_prompt:
        messages.append({"role": "system", "content": cfg.system_prompt})
    for demo_task, demo_answer in demonstrations:
        messages.append(user_turn(demo_task, answer.task_text))
        messages.append({"role": "assistant", "content": answer.tagged(demo_answer)})
    turn = user_turn(task, answer.task_text)
    if example is not None:
        turn["content"] += f"\n{EXAMPLE}{answer.tagged(example)}"
    messages.append(turn)
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
class Draw:
    """The instances asked of one environment: (seed, difficulty) pairs."""

    env: EnvFile
    name: str
    pairs: list[tuple[int, int]]  # (seed, difficulty)


def prepare(
    pool: SandboxWorkers, plans: list[Draw], cfg: SampleConfig, answer_cfg: AnswerConfig, need_answer: bool = True
) -> tuple[list[list[Prepared]], list[dict]]:
    """Per plan, the instances that could be made (in the plan's order), and the skips
    ({"env", "seed", "difficulty", "reason"}). With `need_answer` False an instance whose
    `solve` failed is kept with answer None (evaluation scores answers with `score` anyway)."""
    wanted = max(0, int(cfg.demonstrations or 0))
    tries = wanted + DEMONSTRATION_TRIES if wanted else 0
    orders = []
    for p in plans:  # the asked instances first, so a failing environment loses demonstrations first
        orders.append(Order(p.env, p.pairs))
        orders.append(Order(p.env, [(demonstration_seed(s, k), d) for s, d in p.pairs for k in range(tries)]))
    made = make_instances(pool, orders)
    needed = ALL if need_answer else ("generate", "prompt")
    failed_generate: list[dict] = []  # reported before failed prompts and solves, as they ran
    failed_asked: list[dict] = []
    out: list[list[Prepared]] = []
    for n, p in enumerate(plans):
        asked, demos = made[2 * n], made[2 * n + 1]
        ready = []
        for k, m in enumerate(asked):
            if why := m.failure(needed):
                skip = {"env": p.env.path.name, "seed": m.seed, "difficulty": m.difficulty, "reason": why}
                (failed_asked if m.instance is not None else failed_generate).append(skip)
                continue
            shown = [
                (c.seed, c.instance, c.task, c.answer)
                for c in demos[k * tries : (k + 1) * tries]
                if c.failure() is None
            ]
            picked = pick_demonstrations(m.instance, m.answer, shown, wanted)
            messages = build_messages(m.task, cfg, answer_cfg, [(t, a) for _, _, t, a in picked])
            if cfg.max_prompt_chars is not None and prompt_chars(messages) > cfg.max_prompt_chars:
                # too long with its demonstration: the demonstration's answer alone keeps the
                # form in sight (without it the starter model wrote no answer tags on 4 of 5
                # composites, measured 2026-12-04), else the bare task
                picked, messages = picked[:1], build_messages(m.task, cfg, answer_cfg, example=_answer_of(picked))
                if prompt_chars(messages) > cfg.max_prompt_chars:
                    picked, messages = [], build_messages(m.task, cfg, answer_cfg)
                if prompt_chars(messages) > cfg.max_prompt_chars:
                    why = f"prompt of {prompt_chars(messages)} characters > sample.max_prompt_chars"
                    failed_asked.append(
                        {"env": p.env.path.name, "seed": m.seed, "difficulty": m.difficulty, "reason": why}
                    )
                    continue
            ready.append(
                Prepared(
                    p.env,
                    p.name,
                    m.seed,
                    m.difficulty,
                    m.instance,
                    m.task,
                    m.answer,
                    messages,
                    [ds for ds, _, _, _ in picked],
                )
            )
        out.append(ready)
    return out, failed_generate + failed_asked


def _answer_of(picked: list[tuple]) -> str | None:
    """The first picked demonstration's answer (None without one)."""
    return picked[0][3] if picked else None


def prompt_chars(messages: list[dict]) -> int:
    return sum(len(m["content"]) for m in messages)


def without_demonstrations(messages: list[dict]) -> list[dict]:
    """The conversation asked bare: its system prompt and the last (asked) turn only."""
    return [m for m in messages[:-1] if m["role"] == "system"] + messages[-1:]


def pick_demonstrations(instance: dict, answer: str | None, shown: list[tuple], wanted: int) -> list[tuple]:
    """Up to `wanted` candidates (seed, instance, task, answer): never the asked instance, never
    one whose answer is the asked one, nor one whose task writes the asked answer (an environment
    that keeps the last instance it made could state it in the next demonstration). None left:
    the row is asked without demonstrations."""
    if not wanted:
        return []
    key = json.dumps(instance, sort_keys=True)
    others = [c for c in shown if json.dumps(c[1], sort_keys=True) != key]
    if answer is None:
        return others[:wanted]
    return [c for c in others if c[3].strip() != answer.strip() and not whole_token_in(answer, c[2])][:wanted]


def levels_for(env: EnvFile, library: EnvLibrary, cfg: SampleConfig) -> list[int]:
    """The level rule, one for the whole loop (`sample`, `evaluate`, and the rotation that
    keeps a pool member's levels): `--difficulty` when given; else, with `difficulty_from:
    index`, the levels calibration measured in band, none at all when it measured the
    environment and found none (it is not drawn: a level out of reach or at chance teaches
    nothing), and every level only for an environment never calibrated."""
    if cfg.difficulty is not None:
        return [cfg.difficulty]
    if cfg.difficulty_from == "index":
        calibration = (library.index.get(env.env_id) or {}).get("calibration") or {}
        levels = [lv for lv in calibration.get("levels") or [] if type(lv) is int and lv in contract.LEVELS]
        if levels or calibration.get("curve"):
            return sorted(set(levels))
    return list(contract.LEVELS)


def draw_levels(levels: list[int], count: int) -> list[int]:
    """`count` levels drawn from `levels` for rows or items 0..count-1: spread evenly, each
    level about equally often, low to high, so two draws of any size reach every level that
    fits (sample and evaluate draw the same way)."""
    return [levels[i * len(levels) // count] for i in range(count)] if levels else []
