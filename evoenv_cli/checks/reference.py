"""The `reference` check: the oracle's own answers score 1.0."""

from __future__ import annotations

from evoenv_cli.checks.context import Checker, Rejected
from evoenv_cli.checks.registry import Check, register


def check_reference(checker: Checker) -> None:
    """The oracle's own answers score 1.0."""
    insts = checker.insts
    bad = [(i, r.value) for i, r in zip(insts, checker.ref_scores) if r.value != 1.0]
    checker.m["reference_pass_share"] = round(1 - len(bad) / len(insts), 4)
    if bad:
        i, v = bad[0]
        raise Rejected(
            "reference",
            f"score(instance, solve(instance)) = {v} at seed {i.seed} "
            f"difficulty {i.difficulty} ({len(bad)}/{len(insts)} instances), expected 1.0",
        )


register(Check("reference", "the oracle's own answers score 1.0", check_reference, 60))
