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
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from evoenv_cli.envfile import EnvFile
from evoenv_cli.runtime.workers import Call, SandboxWorkers

MAX_MAPPINGS = 6
MAX_ORDER_TRIES = 64  # pairings of fields tried (each recasts a whole instance) before giving up
MAX_FIELDS = 64  # an instance with more top-level fields is compared as it is only, never re-paired


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
    if len(template) > MAX_FIELDS:
        return []
    want = [coarse(v) for v in template.values()]
    have = [coarse(v) for v in instance.values()]
    if sorted(want) != sorted(have):
        return []
    out = []
    for order in itertools.islice(_shape_orders(want, have), MAX_ORDER_TRIES):
        try:
            recast_fields(template, instance, order)
        except Mismatch:
            continue
        out.append(order)
        if len(out) >= MAX_MAPPINGS:
            break
    return out


def _shape_orders(want: list[str], have: list[str]) -> Iterator[tuple[int, ...]]:
    """The injective maps of `want`'s positions to `have`'s positions of the same shape, in
    lexicographic order (as permutations filtered by shape would give them), built directly:
    enumerating every permutation is factorial in the number of fields. `want`'s shapes must
    all be available in `have` (then no partial map is a dead end)."""
    order: list[int] = []
    used = [False] * len(have)

    def place(k: int) -> Iterator[tuple[int, ...]]:
        if k == len(want):
            yield tuple(order)
            return
        for i, shape in enumerate(have):
            if not used[i] and shape == want[k]:
                used[i] = True
                order.append(i)
                yield from place(k + 1)
                order.pop()
                used[i] = False

    return place(0)


def recast_fields(template: dict, instance: dict, order: tuple[int, ...]) -> dict:
    values = list(instance.values())
    return {k: recast(template[k], values[i]) for k, i in zip(template, order)}


@dataclass
class Sample:
    """An environment's instances at the behaviour seeds, with its own answers to them."""

    env: EnvFile
    instances: list[dict]
    answers: list[str] = field(default_factory=list)
    decoding: str = ""  # how a decoded view (see decoded_views) was derived from its sample
    _views: list | None = field(default=None, repr=False, compare=False)

    @property
    def bucket(self) -> tuple[str, ...]:
        return bucket(self.instances[0])


def answers(pool: SandboxWorkers, sample: Sample) -> bool:
    """Fill in the sample's own answers; False when its solve fails on its own instances."""
    if sample.answers:
        return True
    results = pool.run(sample.env, [Call.solve(i) for i in sample.instances], stop_on_failure=True)
    if not all(r.ok for r in results):
        return False
    sample.answers = [r.value.strip() for r in results]
    return True


def agreement(pool: SandboxWorkers, candidate: Sample, member: Sample) -> float:
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


# -- layouts: the same values under other keys, zipped or unzipped, with story fields around ----
MAX_LAYOUT_MAPPINGS = 6  # column pairings tried per member
LAYOUT_SCREEN = 2  # instances a pairing must agree on before it is tried on all of them
MAX_COLUMNS = 10  # an instance with more columns than this is not compared by layout


def _scalar(value) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _records(value) -> list | None:
    """The field names (a dict record) or the width (a tuple-like list of 2-4 scalars) shared
    by every item of a non-empty list of records; None when `value` is not one."""
    if not isinstance(value, list) or not value:
        return None
    first = value[0]
    if isinstance(first, dict) and first:
        keys = list(first)
        if all(isinstance(x, dict) and list(x) == keys and all(map(_scalar, x.values())) for x in value):
            return keys
        return None
    if isinstance(first, list) and 2 <= len(first) <= 4:
        if all(isinstance(x, list) and len(x) == len(first) and all(map(_scalar, x)) for x in value):
            return [len(first)]
    return None


@dataclass(frozen=True)
class Layout:
    """How an instance's top-level fields split into columns: a list of records is unzipped
    into one column per record field, anything else is one column."""

    slots: tuple[tuple[str, tuple | None], ...]  # (key, record fields or (width,)) per field

    def groups(self) -> list[int]:
        """The slot each column belongs to (the columns of one list of records share one)."""
        return [g for g, (_, fields) in enumerate(self.slots) for _ in range(_span(fields))]

    @property
    def width(self) -> int:
        return sum(_span(fields) for _, fields in self.slots)

    def build(self, columns: list) -> dict:
        """An instance in this layout from its columns (zipped lists must have one length)."""
        out, k = {}, 0
        for key, fields in self.slots:
            if fields is None:
                out[key] = columns[k]
                k += 1
                continue
            n = fields[0] if isinstance(fields[0], int) else len(fields)
            cols = columns[k : k + n]
            k += n
            if any(not isinstance(c, list) or len(c) != len(cols[0]) for c in cols):
                raise Mismatch("zipped columns of different lengths")
            rows = zip(*cols)
            out[key] = [list(r) for r in rows] if isinstance(fields[0], int) else [dict(zip(fields, r)) for r in rows]
        return out


def _span(fields: tuple | None) -> int:
    return 1 if fields is None else (fields[0] if isinstance(fields[0], int) else len(fields))


def columns(instance: dict) -> tuple[Layout, list]:
    """An instance's layout and its columns (see Layout)."""
    slots, cols = [], []
    for key, value in instance.items():
        fields = _records(value)
        if fields is None:
            slots.append((key, None))
            cols.append(value)
        elif isinstance(value[0], dict):
            slots.append((key, tuple(fields)))
            cols += [[x[f] for x in value] for f in fields]
        else:
            slots.append((key, (fields[0],)))
            cols += [[x[i] for x in value] for i in range(fields[0])]
    return Layout(tuple(slots)), cols


def column_shape(value) -> str:
    """coarse(), except that a list of scalars of mixed kinds (registers and constants) is one shape."""
    if isinstance(value, list) and value and all(map(_scalar, value)):
        kinds = {coarse(x) for x in value}
        if len(kinds) > 1:
            return "L(*)"
    return coarse(value)


def _recast_column(template, value):
    if column_shape(template) == "L(*)":
        if isinstance(value, list) and all(map(_scalar, value)):
            return list(value)
        raise Mismatch("mixed column")
    return recast(template, value)


def _fill(template, length: int | None):
    """A template column kept for a field the member lacks (a story field): as it is, or,
    when it counts 0.., 1.. along records of another number, counted again."""
    if length is None or not isinstance(template, list) or len(template) == length:
        return template
    if template and all(type(x) is int for x in template):
        start = template[0]
        if template == list(range(start, start + len(template))):
            return list(range(start, start + length))
    return template


def informative(sample: Sample) -> list[int] | None:
    """The member's columns that vary over its instances (a constant one, a unit or a fixed
    label, says nothing about the task and may be dropped); None when its instances do not
    all have one layout or have too many columns."""
    split = [columns(i) for i in sample.instances]
    layout = split[0][0]
    if any(lay != layout for lay, _ in split) or layout.width > MAX_COLUMNS:
        return None
    return [c for c in range(layout.width) if any(cols[c] != split[0][1][c] for _, cols in split)]


def layout_key(sample: Sample) -> tuple[str, ...] | None:
    """The sorted shapes of a member's informative columns: what a candidate must have among its own."""
    keep = informative(sample)
    if not keep:
        return None
    cols = columns(sample.instances[0])[1]
    return tuple(sorted(column_shape(cols[c]) for c in keep))


def sub_keys(sample: Sample) -> set[tuple[str, ...]]:
    """Every sorted sub-multiset of a candidate's column shapes: the layout keys of the members
    whose informative columns it could take."""
    lay, cols = columns(sample.instances[0])
    if lay.width > MAX_COLUMNS:
        return set()
    shapes = [column_shape(c) for c in cols]
    return {
        tuple(sorted(shapes[i] for i in chosen))
        for r in range(1, len(shapes) + 1)
        for chosen in itertools.combinations(range(len(shapes)), r)
    }


def _pairings(template_cols: list, member_cols: list, keep: list[int]) -> Iterator[tuple[int, ...]]:
    """Injective maps of the member's informative columns onto template columns of the same
    shape, as a tuple giving, per template column, the member column or -1 (a story field)."""
    shapes_t = [column_shape(c) for c in template_cols]
    shapes_m = [column_shape(member_cols[c]) for c in keep]
    if Counter(shapes_m) - Counter(shapes_t):  # a member column no template column can take
        return
    for spots in _shape_orders(shapes_m, shapes_t):
        order = [-1] * len(template_cols)
        for t, m in zip(spots, keep):
            order[t] = m
        yield tuple(order)


def recast_layout(template: dict, instance: dict, order: tuple[int, ...]) -> dict:
    """`instance` in `template`'s layout, its columns placed by `order`; story fields from the template."""
    lay, tcols = columns(template)
    mcols = columns(instance)[1]
    placed = [None if m < 0 else _recast_column(t, mcols[m]) for t, m in zip(tcols, order)]
    groups = lay.groups()
    length = {g: len(c) for g, c, m in zip(groups, placed, order) if m >= 0 and isinstance(c, list)}
    filled = [c if m >= 0 else _fill(t, length.get(g)) for c, t, m, g in zip(placed, tcols, order, groups)]
    return lay.build(filled)


def layout_agreement(pool: SandboxWorkers, candidate: Sample, member: Sample) -> float:
    """`agreement` across layouts: the member's informative columns paired with the
    candidate's columns of the same shape in any order, records zipped or unzipped as the
    candidate keeps them, the candidate's other fields (its story) kept from its own instance
    at the same seed and level. The same guard holds: its solve must give the member's answer
    and its score accept it."""
    keep = informative(member)
    if not keep or not candidate.instances or not member.answers or echoes(member):
        return 0.0
    matched = len(candidate.instances) == len(member.instances)
    templates = [candidate.instances[k if matched else 0] for k in range(len(member.instances))]
    template_cols = columns(templates[0])[1]
    if len(template_cols) > MAX_COLUMNS:
        return 0.0
    best, tried = 0.0, 0
    for order in _pairings(template_cols, columns(member.instances[0])[1], keep):
        try:
            recast = [recast_layout(t, inst, order) for t, inst in zip(templates, member.instances)]
        except (Mismatch, IndexError):
            continue
        tried += 1
        if _agree(pool, candidate, recast[:LAYOUT_SCREEN], member.answers[:LAYOUT_SCREEN]) == LAYOUT_SCREEN:
            same = _agree(pool, candidate, recast, member.answers)
            best = max(best, same / len(member.answers))
        if best == 1.0 or tried >= MAX_LAYOUT_MAPPINGS:
            break
    return best


def _renderings(value) -> set[str]:
    """The ways a solve commonly writes a field's value as its answer."""
    if isinstance(value, list) and all(_scalar(v) for v in value):
        items = [str(v) for v in value]
        return {" ".join(items), ",".join(items), ", ".join(items), json.dumps(value)}
    return {str(value), json.dumps(value)}


def echoes(member: Sample) -> bool:
    """The member's answers are, on most instances, one of its own instance's fields written
    out (a planted environment's solve returns the solution it stored). Paired across layouts,
    that field is copied into the candidate, whose own echoing solve then "agrees" whatever either
    computes, and any valid answer its score accepts (a Hamiltonian path is a vertex cover) makes
    two unrelated planted tasks look like one."""
    hits = 0
    for inst, answer in zip(member.instances, member.answers):
        hits += any(answer in _renderings(v) for v in inst.values())
    return hits * 2 > len(member.answers)


def _agree(pool: SandboxWorkers, candidate: Sample, instances: list[dict], answers: list[str]) -> int:
    """On how many of `instances` the candidate's solve gives `answers` and its score accepts them."""
    calls = [c for inst, a in zip(instances, answers) for c in (Call.solve(inst), Call.score(inst, a))]
    results = pool.run(candidate.env, calls, stop_on_failure=False)
    return sum(
        1
        for k, a in enumerate(answers)
        if results[2 * k].ok
        and results[2 * k].value.strip() == a
        and results[2 * k + 1].ok
        and results[2 * k + 1].value >= 1.0
    )
