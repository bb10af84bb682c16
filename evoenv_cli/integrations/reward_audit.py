"""Re-checks of training rewards in fresh workers. The policy wrote the `score` that rewards it,
and a worker lives for many calls, so a score can behave in validate and turn lenient later
(after N calls, on some state it keeps). Workers are replaced after a bounded number of calls
(`Limits.max_calls_per_worker`); on top of that a small random share of the rewards is scored
again in a worker that has served no call before. The share is drawn by environment chunk: of
one request's scored items, each environment's are re-checked together (with probability
`share`, so the expected share of items is unchanged), in one fresh worker started for them
and killed after, which serves those re-checks and nothing else. One start per chunk instead
of one per item: starting a worker is most of a re-check's cost. A disagreement quarantines the
environment: it is logged, its rewards are 0 from then on, and `evoenv iterate` drops it from
the pool at the next round.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import threading
from collections.abc import Iterator
from pathlib import Path

from evoenv_cli import artifacts
from evoenv_cli.envfile import EnvFile
from evoenv_cli.runtime.workers import Call, Limits, SandboxWorkers

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
        # never replaced by count: a chunk's worker is discarded when its chunk is done
        self.limits = dataclasses.replace(limits or Limits(), max_calls_per_worker=0)
        self.sandbox, self.hash_seed, self.log = sandbox, hash_seed, log
        self.quarantined: dict[str, dict] = quarantined_ids([log]) if log is not None else {}  # a resumed run keeps it
        self.checked = 0
        self.failed = 0  # re-checks that could not run (timeouts, crashes): not disagreements
        self._pool: SandboxWorkers | None = None
        self._lock = threading.Lock()
        self._running = threading.Lock()  # one chunk at a time: no worker outlives its chunk

    @property
    def pool(self) -> SandboxWorkers:
        if self._pool is None:
            self._pool = SandboxWorkers(self.limits, self.sandbox, workers=1, hash_seed=self.hash_seed)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def pick(self, n: int) -> list[int]:
        """Which of n chunks to re-check (each with probability `share`)."""
        with self._lock:
            return [i for i in range(n) if self.rng.random() < self.share]

    def sample(self, items: list[tuple[EnvFile, dict, str, float]]) -> list[tuple[EnvFile, dict, str, float]]:
        """The scored (env, instance, answer, score paid) of one request to re-check: every
        item of the picked environments' chunks."""
        chunks: dict[str, list] = {}
        for item in items:
            chunks.setdefault(item[0].env_id, []).append(item)
        groups = list(chunks.values())
        return [item for k in self.pick(len(groups)) for item in groups[k]]

    def recheck(self, items: list[tuple[EnvFile, dict, str, float]]) -> list[dict]:
        """Score each (env, instance, answer, score paid) again, each environment's items in
        one fresh worker of their own; returns the quarantine records this added."""
        chunks: dict[str, list] = {}
        for item in items:
            if item[0].env_id not in self.quarantined:
                chunks.setdefault(item[0].env_id, []).append(item)
        added = []
        for chunk in chunks.values():
            env = chunk[0][0]
            with self._lock:  # another order than the request's: no sequence is replayed as it came
                self.rng.shuffle(chunk)
            with self.fresh(env) as pool:
                results = pool.run(env, [Call.score(instance, answer) for _, instance, answer, _ in chunk])
            for (_, instance, answer, paid), r in zip(chunk, results):
                record = self._judge(env, instance, answer, paid, r)
                if record is not None:
                    added.append(record)
        return added

    def check_repeats(self, items: list[tuple[EnvFile, dict, str, float]]) -> list[dict]:
        """Every scored item of one request, for free: the same (instance, answer) paid two
        different scores (a memo that pays a repeat, as a collapsed GRPO group sends them)
        quarantines its environment; returns the records this added."""
        paid: dict[tuple[str, str, str], float] = {}
        added = []
        for env, instance, answer, score in items:
            key = (env.env_id, json.dumps(instance, sort_keys=True), answer)
            first = paid.setdefault(key, score)
            if abs(first - score) > 1e-9 and env.env_id not in self.quarantined:
                reason = f"score paid {first} and then {score} for the same (instance, answer) in one request"
                record = self.quarantine(env, reason, instance, answer)
                if record is not None:
                    added.append(record)
        return added

    @contextlib.contextmanager
    def fresh(self, env: EnvFile) -> Iterator[SandboxWorkers]:
        """A pool whose worker for `env` is started for what runs inside and killed after: it
        serves nothing else."""
        with self._running:
            self.pool.discard(env)  # a worker of another chunk never serves this one
            try:
                yield self.pool
            finally:
                self.pool.discard(env)

    def _judge(self, env: EnvFile, instance: dict, answer: str, paid: float, r) -> dict | None:
        """The quarantine record when the re-check `r` disagrees with the score paid."""
        with self._lock:
            self.checked += 1
            if env.env_id in self.quarantined or (r.ok and abs(r.value - paid) <= 1e-9):
                return None
            if not r.ok and r.status not in DISAGREEING_FAILURES:
                self.failed += 1
                return None
            again = r.value if r.ok else f"{r.status}: {r.error}"
        reason = f"score paid {paid} but gave {again} for the same (instance, answer) in a fresh worker"
        return self.quarantine(env, reason, instance, answer)

    def quarantine(self, env: EnvFile, reason: str, instance: dict, answer: str) -> dict | None:
        """Quarantine `env` for `reason`, shown by (instance, answer); logged. None when it
        already was."""
        with self._lock:
            if env.env_id in self.quarantined:
                return None
            record = {
                "env_id": env.env_id,
                "file": env.path.name,
                "at_check": self.checked,
                "reason": reason,
                "instance": json.dumps(instance)[:2000],
                "answer": answer[:500],
            }
            self.quarantined[env.env_id] = record
        if self.log is not None:
            with artifacts.JsonlAppender(self.log) as out:
                out.append(record)
        return record


def quarantined_ids(paths: list[Path]) -> dict[str, dict]:
    """{env_id: record} of every quarantine log among `paths` that exists."""
    out: dict[str, dict] = {}
    for path in paths:
        for record in artifacts.read_jsonl_tolerant(path):
            if isinstance(record, dict) and isinstance(record.get("env_id"), str):
                out.setdefault(record["env_id"], record)
    return out
