"""The baseline: the run's starting model evaluated once, on the evaluation set round 1 froze and the
run's benchmarks (RUN/baseline/), so that every round's evaluation has the same before. It is the
evaluate stage's record run by the loop at its own place: after round 1's pool update (the
evaluation set is frozen then, at the levels round 1 calibrated), with `iterate.baseline`."""

from __future__ import annotations

from dataclasses import replace

from evoenv_cli.stage import Result, Round, register, result_in
from evoenv_cli.stages import evaluate


def _in_round(rnd: Round, got: dict) -> dict | Result | None:
    """Measured once a run: the run's first round measures it, every later one reads it back."""
    if not rnd.iterate.baseline:
        return None
    done = result_in(STAGE, STAGE.out_in(rnd.folder))
    if done is not None:
        return done
    return dict(
        library=rnd.pool.eval_set,
        model=rnd.start,
        inputs={"bench": list(rnd.iterate.bench), "baseline": None, "baseline_results": None},
    )


STAGE = register(
    replace(
        evaluate.STAGE,
        name="baseline",
        place=8.5,  # after the pool update froze the evaluation set, before sample
        per_run=True,
        in_round=_in_round,
        takes=(),
        gives="baseline",
    )
)
