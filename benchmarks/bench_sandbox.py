"""`make bench`, sandbox section: what each jail costs, measured side by side in one run.
For the bubblewrap jail (worker as pid 1), the process mode with Landlock, and the process
mode without it: the time to start a worker and import an environment (fresh workers, one
after another), and score calls per second once workers run (batched, two workers). Also the
parent's reply handling: json.loads alone against the boundary's decode_reply (UTF-8 by
replacement, sanitized when the line could need it), for a plain reply and one that needs it."""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

from evoenv_cli.envfile import EnvFile
from evoenv_cli.runtime import sandbox
from evoenv_cli.runtime.workers import Call, Limits, SandboxWorkers, decode_reply

ROOT = Path(__file__).resolve().parents[1]
GOOD = EnvFile.from_path(ROOT / "seeds" / "coin_change_ways.py")
STARTS = 12
CALLS = 4000
REPLIES = 20000


def jails() -> list[tuple[str, str, int | None]]:
    """(label, mode, Landlock ABI to force or None) for every jail this host can run."""
    out = []
    try:
        sandbox.resolve("bwrap")
        out.append(("bwrap", "bwrap", None))
    except sandbox.SandboxUnavailable as exc:
        print(f"bwrap unavailable here: {exc}", file=sys.stderr)
    plan = sandbox.resolve("process")
    if plan.landlock_abi:
        out.append(("process+landlock", "process", None))
    out.append(("process", "process", 0))
    return out


def pool_for(mode: str, landlock: int | None, workers: int) -> SandboxWorkers:
    pool = SandboxWorkers(limits=Limits(batch_size=256), sandbox_mode=mode, workers=workers)
    if landlock is not None:
        pool.plan = dataclasses.replace(pool.plan, landlock_abi=landlock)
    return pool


def start_ms(mode: str, landlock: int | None) -> float:
    """Median wall time to start a worker and import the environment (ms)."""
    times = []
    for k in range(STARTS):
        source = GOOD.source + f"\n# start {k}\n".encode()  # a new env_id: a new worker each time
        env = EnvFile(GOOD.path, source, f"bench{k:012d}")
        with pool_for(mode, landlock, 1) as pool:
            t = time.perf_counter()
            pool.describe(env)
            times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def calls_per_s(mode: str, landlock: int | None) -> float:
    with pool_for(mode, landlock, 2) as pool:
        (made,) = pool.run(GOOD, [Call.generate(3, 5)])
        (answer,) = pool.run(GOOD, [Call.solve(made.value)])
        calls = [Call.score(made.value, answer.value if k % 2 else str(k)) for k in range(CALLS)]
        t = time.perf_counter()
        results = pool.run_many([(GOOD, calls[: CALLS // 2]), (GOOD, calls[CALLS // 2 :])])
        rate = CALLS / (time.perf_counter() - t)
    assert all(r.ok for rs in results for r in rs), [r for rs in results for r in rs if not r.ok][:3]
    return rate


def _per_reply_us(fn, line: bytes) -> float:
    t = time.perf_counter()
    for _ in range(REPLIES):
        fn(line)
    return (time.perf_counter() - t) / REPLIES * 1e6


def reply_handling() -> list[tuple[str, float, float]]:
    """(kind, microseconds per reply with json.loads alone, with decode_reply)."""
    value = {"coins": list(range(20)), "target": 12, "grid": [[0, 1] * 5] * 10, "note": "x" * 200}
    out = []
    for kind, v in (("plain", value), ("needs sanitizing", {**value, "note": "x\ud800" * 40})):
        line = json.dumps({"ok": True, "value": v, "type": "dict", "t": 0.0001, "out": 0, "cpu": 0.5}).encode()
        out.append((kind, _per_reply_us(json.loads, line), _per_reply_us(decode_reply, line)))
    return out


def main() -> None:
    rows = []
    for label, mode, landlock in jails():
        rows.append((label, start_ms(mode, landlock), calls_per_s(mode, landlock)))
    base = rows[-1]  # the process mode without Landlock
    for label, start, rate in rows:
        print(
            f"bench sandbox: {label:16s} start={start:6.1f} ms  calls={rate:7.0f}/s  "
            f"ratio_start={start / base[1]:.2f} ratio_calls={rate / base[2]:.2f} (against process)"
        )
    for kind, plain, checked in reply_handling():
        print(
            f"bench sandbox: reply handling ({kind}) json.loads={plain:.1f} us  "
            f"decode_reply={checked:.1f} us  ratio={checked / plain:.2f}"
        )


if __name__ == "__main__":
    main()
