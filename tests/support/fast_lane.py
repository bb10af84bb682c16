"""The fast lane's guard (a pytest plugin conftest.py loads): `make test-fast` runs every test
not marked slow, and stays fast only while no unmarked test grows slow. Each phase of an
unmarked test (setup, where a module fixture's cost lands; call; teardown) must keep within a
budget, or the test fails with a message that says to mark it slow.

The budget is EVOENV_FAST_BUDGET_S (default 10; 0 turns the guard off), measured two ways so
that a loaded CI box does not fail honest tests:
- CPU seconds, the test process's and its finished subprocesses' (load does not inflate them):
  at most the budget;
- wall seconds, for a test that waits rather than computes: at most WALL_FACTOR times the
  budget, stretched by the machine's load per core when that is over 1.
"""

from __future__ import annotations

import os
import resource
import time

import pytest

BUDGET_ENV = "EVOENV_FAST_BUDGET_S"
BUDGET_S = 10.0
WALL_FACTOR = 3.0
_START = pytest.StashKey[tuple[float, float]]()
_SPENT = pytest.StashKey[dict[str, tuple[float, float]]]()


def budget() -> float:
    """CPU seconds one phase of an unmarked test may use; 0 when the guard is off."""
    raw = os.environ.get(BUDGET_ENV, "")
    try:
        base = float(raw) if raw.strip() else BUDGET_S
    except ValueError:
        raise pytest.UsageError(f"${BUDGET_ENV}={raw!r} is not a number of seconds") from None
    return max(base, 0.0)


def wall_budget() -> float:
    """Wall seconds one phase may take now: WALL_FACTOR x the budget x the load per core (over 1)."""
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        load = 1.0
    return budget() * WALL_FACTOR * max(1.0, load)


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _measured(item: pytest.Item, when: str):
    start = (_cpu(), time.monotonic())
    yield
    spent = item.stash.setdefault(_SPENT, {})
    spent[when] = (_cpu() - start[0], time.monotonic() - start[1])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _measured(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _measured(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield from _measured(item, "teardown")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.passed or item.get_closest_marker("slow") is not None or not budget():
        return
    cpu, wall = item.stash.get(_SPENT, {}).get(call.when, (0.0, call.duration))
    limit, wall_limit = budget(), wall_budget()
    over = (
        f"used {cpu:.1f} CPU seconds, over the fast lane's budget of {limit:.1f}"
        if cpu > limit
        else f"took {wall:.1f} s, over the fast lane's wall budget of {wall_limit:.1f} s "
        f"({WALL_FACTOR:.0f} x {limit:.1f} s x the load per core)"
        if wall > wall_limit
        else None
    )
    if over:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid}: {call.when} {over}: mark it @pytest.mark.slow "
            f"(the budget is ${BUDGET_ENV}, default {BUDGET_S:.0f}; 0 turns the guard off)"
        )
