"""A behaviour signature by execution, for `evoenv dedupe`: does one environment's `solve`
give another's answers on the other's instances? A re-skin (the same algorithm under a new
story, new names and new instance keys) has little code or prompt text in common with its
original, but fed the original's instances, recast into its own instance layout, its oracle
answers the same.

Instances are recast structurally: the keys of a dict are dropped (it is the sequence of its
values), a list keeps its items, a string may stand for a list of one-character strings; the
top-level fields are matched in every order their shapes allow (a few). Environments whose
instances have different shapes are never compared, and everything of the environments runs
in the sandbox; recasting is pure data work in this process.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from evoenv_cli.envfile import EnvFile
from evoenv_cli.runtime.pool import Call, SandboxPool

MAX_MAPPINGS = 6


class Mismatch(Exception):
    """A value cannot take the shape of a template."""


def coarse(value) -> str:
    """A shape that forgets keys, lengths and the difference between a string and a list of
    strings: what a recast can bridge."""
    if isinstance(value, bool):
        return "b"
    if isinstance(value, int):
        return "n"
    if isinstance(value, float):
        return "f"
    if isinstance(value, str):
        return "t"
    if value is None:
        return "-"
    items = list(value.values()) if isinstance(value, dict) else value if isinstance(value, list) else None
    if items is None:
        return "?"
    if not items:
        return "L"
    first = coarse(items[0])
    if first == "t" and all(isinstance(x, str) for x in items):
        return "t"
    return f"L({first})"


def bucket(instance: dict) -> tuple[str, ...]:
    """The shape key environments are compared within: the sorted coarse shapes of the
    top-level fields."""
    return tuple(sorted(coarse(v) for v in instance.values()))


def recast(template, value):
    """`value` in the layout of `template` (one of the receiving environment's own instances)."""
    if isinstance(template, bool) or isinstance(value, bool):
        if isinstance(template, bool) and isinstance(value, bool):
            return value
        raise Mismatch("bool")
    if isinstance(template, int):
        if isinstance(value, int):
            return value
        raise Mismatch("int")
    if isinstance(template, float):
        if isinstance(value, (int, float)):
            return float(value)
        raise Mismatch("float")
    if isinstance(template, str):
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(x, str) and len(x) == 1 for x in value):
            return "".join(value)
        raise Mismatch("str")
    if template is None:
        if value is None:
            return None
        raise Mismatch("none")
    items = list(value.values()) if isinstance(value, dict) else value
    if isinstance(template, dict):
        if not isinstance(items, list) or len(items) != len(template):
            raise Mismatch("record")
        return {k: recast(t, v) for (k, t), v in zip(template.items(), items)}
    if isinstance(template, list):
        if isinstance(value, str):
            items = list(value)
        if not isinstance(items, list):
            raise Mismatch("list")
        if not template:
            return list(items)
        return [recast(template[0], x) for x in items]
    raise Mismatch("shape")


def field_orders(template: dict, instance: dict) -> list[tuple[int, ...]]:
    """The ways (at most MAX_MAPPINGS) to pair `template`'s top-level fields with `instance`'s
    (by position) so that each pair has the same coarse shape and the instance recasts."""
    keys, values = list(template), list(instance.values())
    if len(keys) != len(values) or sorted(coarse(template[k]) for k in keys) != sorted(coarse(v) for v in values):
        return []
    out = []
    for order in itertools.permutations(range(len(values))):
        if any(coarse(template[k]) != coarse(values[i]) for k, i in zip(keys, order)):
            continue
        try:
            recast_fields(template, instance, order)
        except Mismatch:
            continue
        out.append(order)
        if len(out) >= MAX_MAPPINGS:
            break
    return out


def recast_fields(template: dict, instance: dict, order: tuple[int, ...]) -> dict:
    values = list(instance.values())
    return {k: recast(template[k], values[i]) for k, i in zip(template, order)}


@dataclass
class Sample:
    """An environment's instances at the behaviour seeds, with its own answers to them."""

    env: EnvFile
    instances: list[dict]
    answers: list[str] = field(default_factory=list)

    @property
    def bucket(self) -> tuple[str, ...]:
        return bucket(self.instances[0])


def answers(pool: SandboxPool, sample: Sample) -> bool:
    """Fill in the sample's own answers; False when its solve fails on its own instances."""
    if sample.answers:
        return True
    results = pool.run(sample.env, [Call.solve(i) for i in sample.instances], stop_on_failure=True)
    if not all(r.ok for r in results):
        return False
    sample.answers = [r.value.strip() for r in results]
    return True


def agreement(pool: SandboxPool, candidate: Sample, member: Sample) -> float:
    """The best share, over the ways of pairing fields, of `member`'s instances on which the
    candidate's solve gives the member's own answer and the candidate's score accepts it.
    (The score matters: a planted environment's solve often just returns the solution its
    instance stores, so any instance of the same layout gets "its" answer back.)"""
    if not candidate.instances or not member.answers:
        return 0.0
    template = candidate.instances[0]
    best = 0.0
    # Instances under the candidate's own top-level keys are first fed as they are: a recast
    # takes the shape of the template's first items, and an instance whose lists or records
    # vary in layout (a program of mixed instructions, registers that grow with the level)
    # does not recast into one level's layout although the candidate takes it as it is.
    verbatim = [None] if list(template) == list(member.instances[0]) else []
    for order in verbatim + field_orders(template, member.instances[0]):
        calls, kept = [], []
        for inst, answer in zip(member.instances, member.answers):
            try:
                recast_instance = dict(inst) if order is None else recast_fields(template, inst, order)
            except Mismatch:
                continue
            calls += [Call.solve(recast_instance), Call.score(recast_instance, answer)]
            kept.append(answer)
        results = pool.run(candidate.env, calls, stop_on_failure=False)
        same = sum(
            1
            for k, answer in enumerate(kept)
            if results[2 * k].ok
            and results[2 * k].value.strip() == answer
            and results[2 * k + 1].ok
            and results[2 * k + 1].value >= 1.0
        )
        best = max(best, same / len(member.answers))
        if best == 1.0:
            break
    return best
