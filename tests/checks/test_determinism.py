"""The determinism check asks generate, prompt and solve again; a repeat that ran past the call
time limit is a budget verdict, whichever machine the repeat ran on, not a change between runs."""

import pytest

from evoenv_cli.checks.context import Instance, Rejected
from evoenv_cli.checks.determinism import _past_limit
from evoenv_cli.runtime.workers import CallResult


def instance() -> Instance:
    return Instance(seed=7, difficulty=3, instance={"n": 1}, text="t", reference="1")


def test_a_repeat_past_the_call_limit_is_over_budget_not_a_change():
    with pytest.raises(Rejected) as got:
        _past_limit("solve", CallResult("timeout", error="ran past 2.0 s"), instance())
    assert got.value.stage == "budget"
    assert got.value.reason.startswith("solve at seed 7 difficulty 3 ")


@pytest.mark.parametrize("status", ["ok", "error", "crash", "invalid"])
def test_other_outcomes_are_left_to_the_determinism_comparison(status):
    assert _past_limit("generate", CallResult(status, value="1"), instance()) is None
