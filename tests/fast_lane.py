"""The fast lane's guard (a pytest plugin conftest.py loads): `make test-fast` runs every test
not marked slow, and stays fast only while no unmarked test grows slow. Each phase of an
unmarked test (setup, where a module fixture's cost lands; call; teardown) must finish within a
budget, or the test fails with a message that says to mark it slow.

The budget is EVOENV_FAST_BUDGET_S seconds (default 10; 0 turns the guard off) times the
machine's load per core when that is over 1, so a loaded CI box stretches it instead of
failing honest tests: a test that is slow on a quiet machine is still caught there.
"""

from __future__ import annotations

import os

import pytest

BUDGET_ENV = "EVOENV_FAST_BUDGET_S"
BUDGET_S = 10.0


def budget() -> float:
    """Seconds one phase of an unmarked test may take now; 0 when the guard is off."""
    raw = os.environ.get(BUDGET_ENV, "")
    try:
        base = float(raw) if raw.strip() else BUDGET_S
    except ValueError:
        raise pytest.UsageError(f"${BUDGET_ENV}={raw!r} is not a number of seconds") from None
    if base <= 0:
        return 0.0
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        load = 1.0
    return base * max(1.0, load)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.passed or item.get_closest_marker("slow") is not None:
        return
    limit = budget()
    if limit and call.duration > limit:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid}: {call.when} took {call.duration:.1f} s, over the fast lane's budget of {limit:.1f} s "
            f"({BUDGET_ENV} or {BUDGET_S:.0f} s, times the load per core over 1): mark it @pytest.mark.slow "
            f"(or set {BUDGET_ENV}=0 to turn the guard off)"
        )
