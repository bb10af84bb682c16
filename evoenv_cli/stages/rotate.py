"""Pool rotation, a step of the loop's round: calibrate again the pool members due for it (never
calibrated, or measured `iterate.rotate_every` rounds ago or more), retiring those that left the
band. It is calibrate's record under another name, in its own folder, placed before compose,
which aims at the pass rates it measures; no command of its own (`evoenv calibrate` on a
calibrated pool does the same).
"""

from __future__ import annotations

from dataclasses import replace

from evoenv_cli.pool import UPDATE_FILE
from evoenv_cli.stage import Round, register
from evoenv_cli.stages import calibrate


def _in_round(rnd: Round, got: dict) -> dict | None:
    """The pool members due for a new measurement, none once the round's next pool is written
    (it has read this rotation already)."""
    if (rnd.folder / UPDATE_FILE).exists():
        return None
    due = rnd.pool.rotation_due(rnd.folder, rnd.number, rnd.iterate.rotate_every)
    if due is None:
        rnd.say(f"rotate: no pool member is due (iterate.rotate_every={rnd.iterate.rotate_every})")
        return None
    return dict(library=due, model=rnd.policy)


STAGE = register(
    replace(
        calibrate.STAGE,
        name="rotate",
        place=3.5,
        funnel="kept their level",
        in_round=_in_round,
        takes=(),
        gives="measured",  # the pool's members, re-measured
    )
)
