"""A call that ran past the call time limit is over budget whichever check met it: `run` on a
first call, `determinism` on a repeat (and on the repeats the pool skipped after it), so a file's
verdict does not depend on which call a loaded machine pushed past the limit first."""

import pytest

from evoenv_cli.checks.context import Instance, Rejected, failed, reject_failed, reject_timeouts
from evoenv_cli.runtime.instances import Made
from evoenv_cli.runtime.workers import Call, CallResult, EnvFile


def instance() -> Instance:
    return Instance(seed=7, difficulty=3, instance={"n": 1}, text="t", reference="1")


@pytest.mark.parametrize("check", ["run", "determinism"])
def test_a_call_past_the_limit_is_over_budget_whichever_check_met_it(check):
    got = failed(check, "solve", CallResult("timeout", error="time limit exceeded"), 7, 3)
    assert got.stage == "budget"
    assert got.reason.startswith("solve at seed 7 difficulty 3 timed out")


@pytest.mark.parametrize("status", ["error", "crash", "invalid", "skipped"])
def test_other_failures_keep_the_check_that_met_them(status):
    assert failed("run", "generate", CallResult(status, error="boom"), 7, 3).stage == "run"


def test_a_made_instance_s_first_failed_call_decides(tmp_path):
    env = tmp_path / "e.py"
    env.write_text("NAME = 'e'\n")
    made = Made(EnvFile.from_path(env), 7, 3)
    made.results = {"generate": CallResult("ok", {"n": 1}), "prompt": CallResult("ok", "t")}
    reject_failed("run", made, ("generate", "prompt"))  # nothing failed: no verdict
    made.results["solve"] = CallResult("timeout", error="time limit exceeded")
    made.results["score"] = CallResult("skipped", error="after a timeout")
    with pytest.raises(Rejected) as got:
        reject_failed("run", made, ("generate", "prompt", "solve", "score"))
    assert got.value.stage == "budget"


def test_a_repeat_skipped_after_a_timeout_is_not_a_change_between_runs():
    """The pool skips an environment's calls after one that timed out. Comparing in order read
    an earlier instance's skipped repeat first and judged it a change: the whole batch is read
    for a timeout before any value is compared."""
    a, b = instance(), Instance(seed=8, difficulty=9, instance={"n": 2}, text="u", reference="2")
    calls = [Call.prompt(a.instance), Call.solve(a.instance), Call.prompt(b.instance), Call.solve(b.instance)]
    first = [CallResult("ok", "t"), CallResult("ok", "1"), CallResult("ok", "u"), CallResult("timeout", error="late")]
    repeat = [CallResult("skipped", error="skipped")] * 4
    reject_timeouts(zip(calls, [first[0]] + repeat[1:], [a, a, b, b]))  # skips alone: left to the comparison
    with pytest.raises(Rejected) as got:
        reject_timeouts(zip(calls + calls, first + repeat, [a, a, b, b] * 2))
    assert got.value.stage == "budget" and got.value.reason.startswith("solve at seed 8 difficulty 9 timed out")
