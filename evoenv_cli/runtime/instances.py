"""Instances of environments made in the sandbox: `generate` at each wanted (seed, difficulty),
then `prompt` and `solve` on every instance that came back. This is the one place stages make
instances (sample, evaluate, calibrate, review, dedupe, validate), so a failed call is
labelled the same way everywhere (`describe_failure`) and every stage pays for the same calls.

What an instance means to a stage (a chat prompt, a review sample, a behaviour signature)
stays in the stage; this module only runs the calls and keeps their results.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from evoenv_cli.envfile import EnvFile
from evoenv_cli.runtime.workers import Call, CallResult, SandboxWorkers, describe_failure

ASKED = ("prompt", "solve")  # what an instance is asked after `generate`, in this order
ALL = ("generate", *ASKED)
_ASK = {"prompt": Call.prompt, "solve": Call.solve}
_NOT_ASKED = CallResult("skipped", None, "skipped after a failed call")


def instance_seed(base: int, env_name: str, i: int, split: str = "train") -> int:
    """A stable 31-bit seed per (split, base, env, row); held-out seeds set bit 31."""
    digest = hashlib.sha256(f"{base}:{env_name}:{i}".encode()).digest()
    value = int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
    return value | 0x80000000 if split == "heldout" else value


@dataclass
class Order:
    """Instances wanted of one environment, and what each is asked once generated."""

    env: EnvFile
    pairs: list[tuple[int, int]]  # (seed, difficulty)
    ask: tuple[str, ...] = ASKED

    def __post_init__(self) -> None:
        unknown = [fn for fn in self.ask if fn not in _ASK]
        if unknown:
            raise ValueError(f"an instance can be asked {', '.join(ASKED)}, not {', '.join(unknown)}")


@dataclass
class Made:
    """One wanted instance and what its calls returned: `generate`, then each asked call (none
    when generate failed)."""

    env: EnvFile
    seed: int
    difficulty: int
    results: dict[str, CallResult] = field(default_factory=dict)

    def value(self, fn: str) -> Any:
        r = self.results.get(fn)
        return r.value if r is not None and r.ok else None

    @property
    def instance(self) -> dict | None:
        return self.value("generate")

    @property
    def task(self) -> str | None:
        return self.value("prompt")

    @property
    def answer(self) -> str | None:
        return self.value("solve")

    def failed_call(self, needed: Iterable[str] = ALL) -> tuple[str, CallResult] | None:
        """The first failed call among `needed` (its function and result); None when they all
        succeeded."""
        needed = set(needed)
        return next(((fn, r) for fn, r in self.results.items() if fn in needed and not r.ok), None)

    def failure(self, needed: Iterable[str] = ALL) -> str | None:
        """The first failed call among `needed`, labelled; None when they all succeeded."""
        bad = self.failed_call(needed)
        return describe_failure(bad[0], bad[1], self.seed, self.difficulty) if bad else None


def make_instances(pool: SandboxWorkers, orders: list[Order], stop_on_failure: bool = False) -> list[list[Made]]:
    """Per order, one `Made` per pair, in the pairs' order. Per environment (orders for one
    environment sharing one batch list, in the order given) its generates run first, then the
    asked calls of every instance that was generated; the environments side by side, each
    keeping its worker from its generates to its asks (`WorkerSet.per_env`).

    With `stop_on_failure` (for a caller that rejects on the first failure) an environment's
    calls after its first failed one are skipped, and once one of its generates failed none of
    its instances is asked anything, so a broken environment costs one time limit, not many."""
    made = [[Made(o.env, s, d) for s, d in o.pairs] for o in orders]
    envs: dict[EnvFile, list[int]] = {}
    for k, o in enumerate(orders):
        envs.setdefault(o.env, []).append(k)

    def one(job: tuple[EnvFile, list[int]]) -> None:
        env, ks = job
        mine = [m for k in ks for m in made[k]]
        generated = pool.run(env, [Call.generate(m.seed, m.difficulty) for m in mine], stop_on_failure)
        for m, r in zip(mine, generated):
            m.results["generate"] = r
        wanted = [(m, fn) for k in ks for m in made[k] if m.results["generate"].ok for fn in orders[k].ask]
        if stop_on_failure and any(not m.results["generate"].ok for m in mine):
            for m, fn in wanted:
                m.results[fn] = _NOT_ASKED
            wanted = []
        if wanted:
            for (m, fn), r in zip(wanted, pool.run(env, [_ASK[fn](m.instance) for m, fn in wanted], stop_on_failure)):
                m.results[fn] = r
        if len(envs) > 1:
            pool.retire(env)  # the next environment takes its worker, not one still at work

    pool.per_env(one, list(envs.items()))
    return made


def ask_instances(
    pool: SandboxWorkers, env: EnvFile, instances: list[dict], ask: tuple[str, ...] = ASKED
) -> list[Made]:
    """`ask` of instances that were generated elsewhere (a composite's parts, which its own
    `generate` made): one `Made` each, its `generate` result the instance given."""
    unknown = [fn for fn in ask if fn not in _ASK]
    if unknown:
        raise ValueError(f"an instance can be asked {', '.join(ASKED)}, not {', '.join(unknown)}")
    made = []
    for inst in instances:
        m = Made(env, -1, -1)
        m.results["generate"] = CallResult("ok", inst, None, 0.0)
        made.append(m)
    results = pool.run(env, [_ASK[fn](inst) for inst in instances for fn in ask])
    for k, m in enumerate(made):
        for j, fn in enumerate(ask):
            m.results[fn] = results[k * len(ask) + j]
    return made


def first_failure(made: Iterable[Made], needed: Iterable[str] = ALL) -> str | None:
    """The failure a caller that rejects on any reports: the first failed generate, else the
    first failed asked call, in the order they ran."""
    made, needed = list(made), tuple(needed)
    for m in made:
        if "generate" in needed and (why := m.failure(("generate",))):
            return why
    asked = tuple(fn for fn in needed if fn != "generate")
    for m in made:
        if why := m.failure(asked):
            return why
    return None
