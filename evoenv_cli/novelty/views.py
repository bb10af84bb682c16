"""Decoded views of a sample's instances, for `evoenv dedupe` (issue 42, rule 8).

A re-encoding keeps the task and changes how its instance is written: a list sent as its
differences (delta), as (value, count) runs, or two fields joined into one (with a separator,
end to end, or as one record). Fed the other's instances the encoded environment's solve reads
them wrongly, so the behaviour signature (checks/solve_signature.py) misses it; fed a *decoded*
view of them, the other's solve answers the same. The views are derived from the shapes of a
sample's own fields (whatever decodings those shapes admit, consistently over all its
instances), never per task; each costs time linear in the instance (a run-length expansion is
capped) and at most MAX_VIEWS are kept. novelty/index.py tries them after the plain and layout
signatures found nothing, in both directions.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter

from evoenv_cli.checks.solve_signature import (
    LAYOUT_SCREEN,
    MAX_COLUMNS,
    Mismatch,
    Sample,
    _scalar,
    agreement,
    coarse,
    layout_agreement,
    layout_key,
    sub_keys,
)
from evoenv_cli.runtime.workers import SandboxWorkers

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


def view_agreement(pool: SandboxWorkers, runner: Sample, view: Sample) -> float:
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
