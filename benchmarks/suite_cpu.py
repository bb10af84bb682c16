"""Where the suite's CPU goes, per test: a pytest plugin for `make test-cpu` (issue 43).

`make test` runs on 2 cores kept 98% busy, so its wall time is its CPU time halved, and only
less CPU shortens it. A test's own `getrusage` misses much of its CPU: Ray's nodes (`ray start`
detaches them), servers started in sessions of their own and jailed workers killed before their
parent reaps them are never charged to it. Measured on 2026-12-07 (2-core AMD EPYC, `c7e1b35`):
`time` counted 2,265 of the 3,071 CPU-seconds the machine was busy, and rusage charged the Ray
cluster test 51 CPU-seconds where its cgroup charged 216.

So each xdist worker moves itself, at its first test, into a cgroup of its own (cgroup v1
`cpuacct`, else a cgroup v2 folder, whose cpu.stat counts CPU without any controller), and every process a test starts is
born in it, detached or not. A test's CPU is the cgroup's usage before and after it. One JSON
line per test goes to $EVOENV_TEST_CPU_OUT/<worker pid>.jsonl; `python benchmarks/suite_cpu.py
FOLDER` prints the costliest tests and modules. Where no cgroup can be made (no root, a
read-only /sys/fs/cgroup) it says so once and charges rusage (self and reaped children).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

_state: dict = {}


def _make_cgroup() -> Path | None:
    """A cgroup holding this process (its children are born in it), or None."""
    candidates = (
        ("/sys/fs/cgroup/cpuacct", "cpuacct.usage"),  # cgroup v1
        ("/sys/fs/cgroup/unified", "cpu.stat"),  # v2 beside v1 (hybrid)
        ("/sys/fs/cgroup", "cpu.stat"),  # v2 alone: cpu.stat's usage_usec needs no controller
    )
    for root, usage in candidates:
        folder = Path(root) / f"evoenv-test-cpu-{os.getpid()}"
        try:
            folder.mkdir(exist_ok=True)
            (folder / "cgroup.procs").write_text(str(os.getpid()))
            if (folder / usage).exists():
                return folder / usage
        except OSError:
            continue
    return None


def _cpu_seconds() -> float:
    usage: Path | None = _state["usage"]
    if usage is None:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    text = usage.read_text()
    if usage.name == "cpu.stat":  # cgroup v2: usage_usec on the first line
        return int(text.split()[1]) / 1e6
    return int(text) / 1e9


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not _state:
        out = Path(os.environ.get("EVOENV_TEST_CPU_OUT", "test-cpu"))
        out.mkdir(parents=True, exist_ok=True)
        _state["usage"] = _make_cgroup()
        _state["file"] = (out / f"{os.getpid()}.jsonl").open("a")
        if _state["usage"] is None:
            print(
                "suite_cpu: no cgroup could be made here: charging rusage, which misses detached processes",
                file=sys.stderr,
            )
    w0, c0 = time.monotonic(), _cpu_seconds()
    yield
    w1, c1 = time.monotonic(), _cpu_seconds()
    row = {"id": item.nodeid, "wall_s": round(w1 - w0, 3), "cpu_s": round(c1 - c0, 3), "cgroup": bool(_state["usage"])}
    _state["file"].write(json.dumps(row) + "\n")
    _state["file"].flush()


def pytest_unconfigure(config):
    """This worker back in the cgroup above, and its own removed (it fails, and stays, while a
    process a test left behind is still in it)."""
    usage: Path | None = _state.get("usage")
    if usage is not None:
        try:
            (usage.parent.parent / "cgroup.procs").write_text(str(os.getpid()))
            usage.parent.rmdir()
        except OSError:
            pass


def summary(folder: Path, top: int = 25) -> str:
    rows = [json.loads(x) for f in sorted(folder.glob("*.jsonl")) for x in f.read_text().splitlines() if x.strip()]
    if not rows:
        return f"no test rows in {folder}"
    modules: Counter[str] = Counter()
    for r in rows:
        modules[r["id"].split("::")[0]] += r["cpu_s"]
    lines = [f"{len(rows)} tests, {sum(r['cpu_s'] for r in rows):.0f} CPU-seconds in all"]
    lines += ["", "tests, costliest first (CPU s, wall s):"]
    for r in sorted(rows, key=lambda r: -r["cpu_s"])[:top]:
        lines.append(f"{r['cpu_s']:8.1f} {r['wall_s']:8.1f}  {r['id']}")
    lines += ["", "modules:"]
    lines += [f"{v:8.1f}  {k}" for k, v in modules.most_common(top)]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1] if len(sys.argv) > 1 else "test-cpu")))
