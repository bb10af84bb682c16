"""Where a pool member came from: one table, read by the stages that write a member's `origin`
into a library index, the loop's newcomer line, and the report's tables and figures.

An index records the key (`origin: compose`); everything a person reads says the label or the
phrase. A new origin is one row here (tests/test_one_home.py fails where a label, a phrase or a
key compared by hand appears anywhere else)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Origin:
    key: str  # as written in a library index's `origin` field
    label: str  # the report's one word for it (tables, the pool figure's legend)
    phrase: str  # "where it came from", in the newcomer line and the report's newcomers table
    color: str  # the report's figures


SEED = Origin("seed", "seed", "a seed the run started from", "#8C8C8C")
COMPOSE = Origin("compose", "composite", "composed by an operator", "#DD8452")
SYNTHESIZE = Origin("synthesize", "synthesized", "written by the policy", "#4C72B0")
OFFERED = Origin("offered", "offered", "offered by a person", "#55A868")

ORIGINS = {o.key: o for o in (SEED, COMPOSE, SYNTHESIZE, OFFERED)}  # the pool figure stacks in this order
UNKNOWN_COLOR = "#333333"


def label(key) -> str:
    """The report's word for an index's origin; an origin this table does not know is shown as
    written (or 'unknown' when there is none)."""
    known = ORIGINS.get(key)
    return known.label if known else (str(key) if key else "unknown")


def by_label(word: str) -> Origin | None:
    return next((o for o in ORIGINS.values() if o.label == word), None)


def color(word: str) -> str:
    """A figure's color for a label (what the report's numbers carry)."""
    known = by_label(word)
    return known.color if known else UNKNOWN_COLOR


def phrase(record: dict) -> str:
    """Where a newcomer that no operator composed came from (a record without an origin was
    written by the policy: the loop's sources before offered files existed)."""
    return ORIGINS.get(record.get("origin") or SYNTHESIZE.key, SYNTHESIZE).phrase
