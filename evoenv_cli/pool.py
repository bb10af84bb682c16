"""The environment pool of a loop run: RUN/pool/, the library the policy trains on.

Each round writes the next pool before anything changes (round-NN/pool-next/ and
round-NN/pool-update.json: members the rotation did not retire, plus the round's admitted
newcomers, less what an earlier round's training quarantined), then applies it. A pool
folder is replaced by a swap that a kill at any step leaves recoverable (`write_pool`,
`recover`). Rotation: members never calibrated (the seeds, at round 1) and those measured
`iterate.rotate_every` rounds ago or more are calibrated again before they train.

RUN/eval-set/ is the starting pool at the levels round 1 calibrated, frozen so every round is
measured on the same items.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from evoenv_cli import artifacts, origins
from evoenv_cli.admission import VERDICTS
from evoenv_cli.envfile import EnvFile
from evoenv_cli.integrations.reward_audit import QUARANTINE_FILE, quarantined_ids
from evoenv_cli.stage import Input, Stage, register, round_folders

UPDATE_FILE = "pool-update.json"  # round-NN/pool-update.json: the round's pool change, written with pool-next/
NEXT = "pool-next"  # round-NN/pool-next/: the pool after the round, written before the pool changes


@dataclass
class EnvPool:
    """RUN/pool/ and RUN/eval-set/ of one run, started from `seeds`."""

    run_dir: Path
    seeds: Path

    @property
    def root(self) -> Path:
        return self.run_dir / "pool"

    @property
    def eval_set(self) -> Path:
        return self.run_dir / "eval-set"

    def init(self) -> None:
        """RUN/pool/ as the last applied update left it; from the seeds on a new run."""
        recover(self.root)
        recover(self.eval_set)
        if (self.root / artifacts.INDEX).exists():
            return
        written = [d / NEXT for d in round_folders(self.run_dir) if (d / NEXT / artifacts.INDEX).exists()]
        if written:  # a pool lost outside the loop: the last pool-next/ is what it was
            write_pool(self.root, library_members(written[-1]))
            return
        write_pool(self.root, seed_members(self.seeds))

    def freeze_eval_set(self) -> None:
        """RUN/eval-set/: the pool as round 1 left it (the seeds and round 1's newcomers) at the
        levels round 1 calibrated them to, kept apart so that every round is measured on the
        same items (written once), and so that a newcomer's held-out pass@1 has a before."""
        if (self.eval_set / artifacts.INDEX).exists():
            return
        seeds = {e.env_id for e, _ in seed_members(self.seeds)}
        write_pool(
            self.eval_set,
            [(e, rec) for e, rec in library_members(self.root) if e.env_id in seeds or rec.get("joined_round") == 1],
        )

    def quarantined(self) -> dict[str, dict]:
        """Environments whose rewards disagreed with a re-check in a fresh worker, in any
        round's training so far: never in the pool again."""
        from evoenv_cli import stages  # the train step's record: where its quarantine log is

        train = stages.get("train")
        return quarantined_ids([train.out_in(d) / QUARANTINE_FILE for d in round_folders(self.run_dir)])

    def write_next(self, d: Path, rotated: Path | None, admitted: Path, r: int) -> dict:
        """round-NN/pool-next/ (the pool after this round) and pool-update.json, written before
        anything in RUN/pool/ changes: pool members the rotation did not retire, plus the
        round's admitted newcomers, less the environments an earlier round's training
        quarantined."""
        update = d / UPDATE_FILE
        if update.exists():
            return read_json(update)
        old = artifacts.EnvLibrary.open(self.root, allow_empty=True)
        quarantine = self.quarantined()
        verdicts = {v["env_id"]: v for v in artifacts.read_jsonl(rotated / VERDICTS)} if rotated else {}
        rot_index = {x["env_id"]: x for x in artifacts.read_jsonl(rotated / artifacts.INDEX)} if rotated else {}
        members, retired, dropped = [], [], []
        for env in old.files:
            if env.env_id in quarantine:
                dropped.append({"name": env.name, "reason": quarantine[env.env_id].get("reason")})
                continue
            v = verdicts.get(env.env_id, {})
            if str(v.get("stage", "")).startswith("retired_"):
                retired.append({"name": env.name, "stage": v["stage"], "reason": v.get("reason")})
                continue
            record = old.index.get(env.env_id, {})
            if env.env_id in rot_index:
                record = dict(rot_index[env.env_id], measured_round=r)
            elif v.get("curve"):  # measured out of band, not retired yet: kept, but not drawn (no level)
                calibration = {"curve": v["curve"], "levels": [], "band": v.get("band"), "misses": v.get("misses", 1)}
                record = dict(record, calibration=calibration, measured_round=r)
            # a member the solver could not be measured on (no answers, a failed call) stays as it was
            members.append((env, record))
        new = artifacts.EnvLibrary.open(admitted, allow_empty=True)
        have = {e.env_id for e, _ in members}
        joined = []
        for env in new.files:
            if env.env_id not in have and env.env_id not in quarantine:
                members.append((env, dict(new.index.get(env.env_id, {}), joined_round=r, measured_round=r)))
                joined.append(env.name)
        write_pool(d / NEXT, members)
        change = {"pool_size": len(members), "joined": joined, "retired": retired, "quarantined": dropped}
        artifacts.write_json_atomic(update, change)
        return change

    def apply(self, d: Path) -> None:
        """RUN/pool/ made what round-NN/pool-next/ says (a no-op when it already is)."""
        planned = d / NEXT
        if not (planned / artifacts.INDEX).exists():  # a run from before pool-next/ was kept: applied then
            return
        if (self.root / artifacts.INDEX).exists() and (self.root / artifacts.INDEX).read_bytes() == (
            planned / artifacts.INDEX
        ).read_bytes():
            return
        write_pool(self.root, library_members(planned))

    def rotation_due(self, d: Path, r: int, every: int) -> Path | None:
        """The pool members never calibrated (the seeds, at round 1) and those whose last
        measurement is `iterate.rotate_every` rounds old or more, as a library
        (round-NN/rotate-due/); None when none is due."""
        out = d / "rotate-due"
        if (out / artifacts.INDEX).exists():
            return out if artifacts.EnvLibrary.open(out, allow_empty=True).files else None
        lib = artifacts.EnvLibrary.open(self.root, allow_empty=True)
        due = [
            (e, lib.index.get(e.env_id, {}))
            for e in lib.files
            if not calibrated(lib.index.get(e.env_id, {}))  # never calibrated: before it trains
            or r - int(lib.index.get(e.env_id, {}).get("measured_round", 0)) >= every
        ]
        write_pool(out, due)
        return out if due else None


def recover(pool: Path) -> None:
    """Finish or undo a `write_pool` swap a kill interrupted. The new copy is complete once its
    index.jsonl exists (written last): with no `pool` left, that copy rolls forward, else the
    old one rolls back. Leftovers beside a pool that exists are dropped."""
    new, old = pool.with_name(pool.name + ".new"), pool.with_name(pool.name + ".old")
    if not pool.exists():
        if (new / artifacts.INDEX).exists():
            new.rename(pool)
        elif old.exists():
            old.rename(pool)
    shutil.rmtree(new, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)


def write_pool(pool: Path, members: list[tuple[EnvFile, dict]]) -> None:
    """Replace a library folder: build it complete beside (pool.new, index.jsonl last), move
    the old one aside (pool.old), move the new one in, drop the old. A kill at any step leaves
    what `recover` completes or undoes."""
    recover(pool)
    tmp = pool.with_name(pool.name + ".new")
    (tmp / "envs").mkdir(parents=True)
    index = []
    for env, record in members:
        (tmp / "envs" / env.path.name).write_bytes(env.source)
        index.append({**record, "file": env.path.name, "env_id": env.env_id, "name": record.get("name") or env.name})
    artifacts.write_jsonl_atomic(tmp / artifacts.INDEX, index)
    old = pool.with_name(pool.name + ".old")
    if pool.exists():
        pool.rename(old)
    tmp.rename(pool)
    shutil.rmtree(old, ignore_errors=True)


def calibrated(record: dict) -> bool:
    """Whether a pool member's levels were measured (its calibration has a curve)."""
    return bool((record.get("calibration") or {}).get("curve"))


def library_members(lib_dir: Path) -> list[tuple[EnvFile, dict]]:
    lib = artifacts.EnvLibrary.open(lib_dir, allow_empty=True)
    return [(e, lib.index.get(e.env_id, {})) for e in lib.files]


def seed_members(seeds: Path) -> list[tuple[EnvFile, dict]]:
    lib = artifacts.EnvLibrary.open(seeds)
    return [
        (
            e,
            {
                "file": e.path.name,
                "env_id": e.env_id,
                "name": e.name,
                "origin": origins.SEED.key,
            },
        )
        for e in lib.files
    ]


def merge_libraries(out: Path, sources: list[Path]) -> Path:
    """One library (envs/ + index.jsonl) from several stage outputs; first source wins a name."""
    recover(out)
    if (out / artifacts.INDEX).exists():
        return out
    members, names = [], set()
    for src in sources:
        lib = artifacts.EnvLibrary.open(src, allow_empty=True)
        for env in lib.files:
            if env.path.name not in names:
                names.add(env.path.name)
                members.append((env, lib.index.get(env.env_id, {})))
    write_pool(out, members)
    return out


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


# -- the pool update, a step of the round (no command runs it: the loop writes the next pool and
# applies it); its record is here, beside the pool it changes
def _update_in_round(rnd, got: dict) -> dict:
    """The next pool from rotate's verdicts on the members (None: none was due) and the round's
    admitted newcomers (calibrate's library)."""
    measured = got["measured"].out if got["measured"] is not None else None
    return dict(library=got["library"].out, inputs={"pool": rnd.pool, "measured": measured, "round": rnd.number})


def _update_run(ctx, lib, out: Path, llm, bar) -> dict:
    """round-NN/pool-next/ and its marker (OUT, pool-update.json), written before anything in
    the pool changes; `_update_finish` applies them."""
    return ctx.inputs["pool"].write_next(out.parent, ctx.inputs["measured"], ctx.library, ctx.inputs["round"])


def _update_finish(rnd, done) -> None:
    """Every time, a kill between the marker and the swap included: the next pool applied (a
    no-op when it is), and at round 1 the evaluation set frozen (the seeds are calibrated now)."""
    rnd.pool.apply(rnd.folder)
    rnd.pool.freeze_eval_set()


def _update_line(label: str, done, ctx) -> str:
    change, gone = done.summary, len(done.summary.get("quarantined", []))
    return (
        f"pool: {change['pool_size']} environments (+{len(change['joined'])} -{len(change['retired'])}"
        f"{f', {gone} quarantined dropped' if gone else ''}) -> {ctx.inputs['pool'].root}"
    )


STEP = register(
    Stage(
        "pool update",
        sections=("iterate",),
        marker=UPDATE_FILE,
        settings=None,  # one file, written whole (atomically) with pool-next/
        run=_update_run,
        place=8,
        folder="",
        partial=("the next pool", "nothing: pool-next/ is written whole before the marker"),
        rerun="run the loop again",
        library_optional=True,
        total=lambda ctx, lib: None,  # no progress bar
        in_round=_update_in_round,
        takes=("measured", "library"),  # rotate's verdicts on the members, calibrate's newcomers
        gives="pool",
        line=_update_line,
        finish=_update_finish,
        inputs=(
            Input("pool", "The run's environment pool (RUN/pool/, RUN/eval-set/).", "object", required=True),
            Input("measured", "Rotate's folder: its verdicts on the members due (none: none was due).", "path"),
            Input("round", "The round's number (a newcomer's joined_round).", required=True),
        ),
    )
)
