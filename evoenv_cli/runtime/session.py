"""One set of sandbox workers for a whole program: a `Runtime` is built once from
`RuntimeConfig` and handed to every stage and to the reward, so warm workers are reused across
stages and no stage starts workers of its own when it runs inside a larger program (the loop).

A stage called on its own (from its CLI command) gets a Runtime of its own from `shared()`,
closed when it returns; called with one, it borrows it and leaves it open.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from evoenv_cli.runtime.workers import SandboxWorkers


class Runtime:
    """Sandbox workers, made on first use: `workers` (the set every call goes to) and `fresh`, its
    twin with another hash seed (validate's and compose's cross-process determinism check)."""

    def __init__(self, cfg) -> None:
        self.cfg = cfg  # a config.RuntimeConfig
        self._pools: dict[int, SandboxWorkers] = {}

    def _make(self, hash_seed: int) -> SandboxWorkers:
        c = self.cfg
        return SandboxWorkers(c.limits, c.sandbox, c.workers, hash_seed=hash_seed)

    def _get(self, hash_seed: int) -> SandboxWorkers:
        if hash_seed not in self._pools:
            self._pools[hash_seed] = self._make(hash_seed)
        return self._pools[hash_seed]

    @property
    def workers(self) -> SandboxWorkers:
        return self._get(0)

    @property
    def fresh(self) -> SandboxWorkers:
        return self._get(1)

    @property
    def calls(self) -> int:
        """Calls into environment code so far, over every pool."""
        return sum(p.calls for p in self._pools.values())

    @property
    def lanes(self) -> int:
        """Where environments run apart (a cluster's runtime: its nodes): a stage that judges
        environments in parallel keeps `workers` of them in flight per lane, so none waits on
        another's worker slot while a lane stands idle."""
        return 1

    def lane(self, env) -> int:
        """The lane `env`'s calls run in."""
        return 0

    @property
    def jails(self) -> list[str]:
        return sorted({p.plan.mode for p in self._pools.values()})

    def close(self) -> None:
        pools, self._pools = self._pools, {}
        for p in pools.values():
            p.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextlib.contextmanager
def shared(cfg, runtime: Runtime | None) -> Iterator[Runtime]:
    """`runtime` when one is given (left open), else a Runtime of our own, closed after."""
    if runtime is not None:
        yield runtime
        return
    with Runtime(cfg) as own:
        yield own
