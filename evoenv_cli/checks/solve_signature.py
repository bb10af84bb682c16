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
from evoenv_cli.runtime.workers import Call, SandboxPool

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


def layout_agreement(pool: SandboxPool, candidate: Sample, member: Sample) -> float:
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


def _agree(pool: SandboxPool, candidate: Sample, instances: list[dict], answers: list[str]) -> int:
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


# -- decoded views: the same instances with one field decoded ------------------------------------
# A re-encoding keeps the task and changes how its instance is written: a list sent as its
# differences (delta), as (value, count) runs, or two fields joined into one (with a separator,
# end to end, or as one record). Fed the other's instances the encoded environment's solve reads
# them wrongly, so the signals above miss it; fed a *decoded* view of them, the other's solve
# answers the same. The views are derived from the shapes of a sample's own fields (whatever
# decodings those shapes admit, consistently over all its instances), never per task; each costs
# time linear in the instance (a run-length expansion is capped) and at most MAX_VIEWS are kept.
MAX_VIEWS = 8  # decoded views of one sample
MAX_EXPANDED = 4096  # items a run-length expansion may produce (longer: not a view)
MAX_SEPARATORS = 2  # separator values tried per field
MAX_DECODED_TRIES = 12  # (view, member) comparisons per candidate, each screened on LAYOUT_SCREEN instances


def _ints(value) -> bool:
    return isinstance(value, list) and all(type(x) is int for x in value)


def _prefix_sums(value) -> list:
    if not _ints(value) or not value:
        raise Mismatch("prefix sums")
    return [list(itertools.accumulate(value))]


def _expand(pairs, count_at: int) -> list:
    out: list = []
    for pair in pairs:
        count, item = pair[count_at], pair[1 - count_at]
        if type(count) is not int or count < 1 or not _scalar(item) or len(out) + count > MAX_EXPANDED:
            raise Mismatch("run length")
        out += [item] * count
    return out


def _runs(count_at: int):
    """(value, count) runs, as a list of pairs ([v, k] or {"v": .., "k": ..}), expanded."""

    def decode(value) -> list:
        if not isinstance(value, list) or not value:
            raise Mismatch("runs")
        pairs = [list(x.values()) if isinstance(x, dict) else x for x in value]
        if not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            raise Mismatch("runs")
        out = _expand(pairs, count_at)
        return ["".join(out) if all(isinstance(x, str) and len(x) == 1 for x in out) else out]

    return decode


def _flat_runs(count_at: int):
    """Runs written flat: v, k, v, k, ..."""

    def decode(value) -> list:
        if not isinstance(value, list) or not value or len(value) % 2:
            raise Mismatch("flat runs")
        return [_expand([value[i : i + 2] for i in range(0, len(value), 2)], count_at)]

    return decode


def _split_on(separator):
    """A field that joins two with a separator occurring exactly once: the two parts."""

    def decode(value) -> list:
        if isinstance(value, str) and isinstance(separator, str):
            if value.count(separator) != 1:
                raise Mismatch("separator")
            return value.split(separator)
        if isinstance(value, list):
            at = [i for i, x in enumerate(value) if type(x) is type(separator) and x == separator]
            if len(at) != 1:
                raise Mismatch("separator")
            return [value[: at[0]], value[at[0] + 1 :]]
        raise Mismatch("separator")

    return decode


def _halves(value) -> list:
    """Two equally long lists written end to end."""
    if not isinstance(value, list) or not value or len(value) % 2 or not all(map(_scalar, value)):
        raise Mismatch("halves")
    half = len(value) // 2
    return [value[:half], value[half:]]


def _pair_of_fields(value) -> list:
    """A field that is a record of fields (a dict of them, or a list of exactly two lists)."""
    if isinstance(value, dict) and len(value) >= 2:
        return list(value.values())
    if isinstance(value, list) and len(value) == 2 and all(isinstance(x, (list, dict)) for x in value):
        return list(value)
    raise Mismatch("record of fields")


def _separators(value) -> list:
    """Values that could join two fields in `value`: a character that is not a letter or digit
    occurring exactly once in a string; in a list, an item occurring exactly once that is of
    another kind than the rest, or the only one below zero (or at it) among positive items."""
    if isinstance(value, str):
        counts = Counter(value)
        return sorted(c for c, n in counts.items() if n == 1 and not c.isalnum())[:MAX_SEPARATORS]
    if not isinstance(value, list) or len(value) < 3 or not all(map(_scalar, value)):
        return []
    kinds = Counter(coarse(x) for x in value)
    once = [x for x, n in Counter(map(json.dumps, value)).items() if n == 1]
    out = []
    for text in once:
        x = json.loads(text)
        rest_ints = kinds["n"] == len(value) - (coarse(x) == "n")
        if kinds[coarse(x)] == 1 or (type(x) is int and rest_ints and x <= 0 and _positive_but(value, x)):
            out.append(x)
    return out[:MAX_SEPARATORS]


def _positive_but(value: list, x: int) -> bool:
    return all(y > 0 for y in value if y != x) if x == 0 else all(y >= 0 for y in value if y != x)


def _decoders(value) -> list[tuple[str, object]]:
    """The decodings `value`'s shape admits: (name, decode)."""
    out: list[tuple[str, object]] = []
    if _ints(value) and value:
        out.append(("prefix_sums", _prefix_sums))
    if isinstance(value, list) and value:
        first = list(value[0].values()) if isinstance(value[0], dict) else value[0]
        if isinstance(first, list) and len(first) == 2:
            out += [(f"runs_count_{'first' if k == 0 else 'last'}", _runs(k)) for k in (1, 0) if type(first[k]) is int]
        elif all(map(_scalar, value)) and len(value) % 2 == 0:
            out += [(f"flat_runs_count_{'first' if k == 0 else 'last'}", _flat_runs(k)) for k in (1, 0)]
            out.append(("halves", _halves))
    out += [(f"split_on_{json.dumps(s)}", _split_on(s)) for s in _separators(value)]
    if isinstance(value, dict) or (isinstance(value, list) and len(value) == 2):
        out.append(("fields_of", _pair_of_fields))
    return out


def _decode_field(instance: dict, key: str, decode) -> dict:
    out = {}
    for k, v in instance.items():
        if k != key:
            out[k] = v
            continue
        parts = decode(v)
        for j, part in enumerate(parts):
            out[k if j == 0 else f"{k}#{j + 1}"] = part
    return out


def decoded_views(sample: Sample) -> list[Sample]:
    """At most MAX_VIEWS samples like `sample` (same environment, same answers) whose instances
    have one field decoded, each decoding one that the field's shape in the first instance
    admits and that applies to every instance (a delta-encoded list's prefix sums, runs expanded,
    a joined field split). Computed once per sample."""
    if sample._views is not None:
        return sample._views
    views: list[Sample] = []
    keys = list(sample.instances[0]) if sample.instances else []
    if not keys or len(keys) > MAX_COLUMNS or any(list(i) != keys for i in sample.instances):
        sample._views = views
        return views
    for key in keys:
        for name, decode in _decoders(sample.instances[0][key]):
            if len(views) >= MAX_VIEWS:
                break
            try:
                decoded = [_decode_field(i, key, decode) for i in sample.instances]
            except (Mismatch, TypeError, ValueError):
                continue
            if decoded != sample.instances:
                views.append(Sample(sample.env, decoded, sample.answers, f"{name}({key})"))
    sample._views = views
    return views


def view_keys(view: Sample) -> set[tuple[str, ...]]:
    """The index keys a view is found under: its bucket, and its layout key when it has one."""
    keys = {("bucket", *view.bucket)}
    key = layout_key(view)
    if key is not None:
        keys.add(("layout", *key))
    return keys


def runner_keys(sample: Sample) -> set[tuple[str, ...]]:
    """The view keys a sample's solve can take: its own bucket, and every sub-multiset of its
    column shapes (see sub_keys)."""
    return {("bucket", *sample.bucket)} | {("layout", *k) for k in sub_keys(sample)}


def view_agreement(pool: SandboxPool, runner: Sample, view: Sample) -> float:
    """`runner`'s solve on a decoded view of another sample's instances: the share of its
    answers it gives (and its score accepts). Fed field by field when the view has the
    runner's shape (first on LAYOUT_SCREEN instances), then across layouts (which screens
    each pairing itself) when that did not agree."""
    share = 0.0
    if view.bucket == runner.bucket:
        screen = Sample(view.env, view.instances[:LAYOUT_SCREEN], view.answers[:LAYOUT_SCREEN], view.decoding)
        if agreement(pool, runner, screen) == 1.0:
            share = agreement(pool, runner, view)
    if share < 1.0 and layout_key(view) in sub_keys(runner):
        share = max(share, layout_agreement(pool, runner, view))
    return share
