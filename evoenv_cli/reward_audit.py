"""Re-checks of training rewards in fresh workers. The policy wrote the `score` that rewards it,
and a worker lives for many calls, so a score can behave in validate and turn lenient later
(after N calls, on some state it keeps). Workers are replaced after a bounded number of calls
(`Limits.max_calls_per_worker`); on top of that a small random share of the rewards is scored
again, each in a worker that has served no call before. A disagreement quarantines the
environment: it is logged, its rewards are 0 from then on, and `evoenv iterate` drops it from
the pool at the next round.
"""

from __future__ import annotations

import dataclasses
import json
import random
import threading
from pathlib import Path

from evoenv_cli import artifacts
from evoenv_cli.envfile import EnvFile
from evoenv_cli.runtime.pool import Call, Limits, SandboxPool

QUARANTINE_FILE = "quarantine.jsonl"
# A fresh worker that raised or returned a bad value where the long-lived one scored is a
# disagreement too; one that timed out or crashed may just have met a loaded host.
DISAGREEING_FAILURES = ("error", "escaped", "invalid")


class RewardAudit:
    """Picks a share of scored (instance, answer) pairs, scores each again in a new worker, and
    keeps the quarantine: {env_id: record}. Thread-safe."""

    def __init__(
        self,
        share: float,
        *,
        seed: int = 0,
        sandbox: str = "auto",
        limits: Limits | None = None,
        log: Path | None = None,
        hash_seed: int = 1,
    ):
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"recheck share must be in [0, 1], not {share}")
        self.share = share
        self.rng = random.Random(f"evoenv-reward-audit:{seed}")
        # one call per worker: every re-check meets a process that has no history
        self.limits = dataclasses.replace(limits or Limits(), max_calls_per_worker=1)
        self.sandbox, self.hash_seed, self.log = sandbox, hash_seed, log
        self.quarantined: dict[str, dict] = quarantined_ids([log]) if log is not None else {}  # a resumed run keeps it
        self.checked = 0
        self.failed = 0  # re-checks that could not run (timeouts, crashes): not disagreements
        self._pool: SandboxPool | None = None
        self._lock = threading.Lock()

    @property
    def pool(self) -> SandboxPool:
        if self._pool is None:
            self._pool = SandboxPool(self.limits, self.sandbox, workers=1, hash_seed=self.hash_seed)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def pick(self, n: int) -> list[int]:
        """Which of n scored items to re-check (each with probability `share`)."""
        with self._lock:
            return [i for i in range(n) if self.rng.random() < self.share]

    def recheck(self, items: list[tuple[EnvFile, dict, str, float]]) -> list[dict]:
        """Score each (env, instance, answer, score paid) again in a fresh worker; returns the
        quarantine records this added."""
        added = []
        for env, instance, answer, paid in items:
            if env.env_id in self.quarantined:
                continue
            r = self.pool.run(env, [Call.score(instance, answer)])[0]
            with self._lock:
                self.checked += 1
                if r.ok and abs(r.value - paid) <= 1e-9:
                    continue
                if not r.ok and r.status not in DISAGREEING_FAILURES:
                    self.failed += 1
                    continue
                again = r.value if r.ok else f"{r.status}: {r.error}"
                record = {
                    "env_id": env.env_id,
                    "file": env.path.name,
                    "at_check": self.checked,
                    "reason": f"score paid {paid} but gave {again} for the same (instance, answer) in a fresh worker",
                    "instance": json.dumps(instance)[:2000],
                    "answer": answer[:500],
                }
                self.quarantined[env.env_id] = record
                added.append(record)
            if self.log is not None:
                with artifacts.JsonlAppender(self.log) as out:
                    out.append(record)
        return added


def quarantined_ids(paths: list[Path]) -> dict[str, dict]:
    """{env_id: record} of every quarantine log among `paths` that exists."""
    out: dict[str, dict] = {}
    for path in paths:
        for record in artifacts.read_jsonl_tolerant(path):
            if isinstance(record, dict) and isinstance(record.get("env_id"), str):
                out.setdefault(record["env_id"], record)
    return out
