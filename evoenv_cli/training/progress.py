"""What a person watching `evoenv train` (or the loop's train stage) sees: one plain line per
GRPO step, and TRL's raw metric dicts in the run's log file only.

TRL's console output is a tqdm bar whose ETA extrapolates from the first step (on a CPU a
later step can take ten times as long) and a ~30-key dict per logged step. Here each step's
line carries its own measured seconds, the score's mean with the share of groups whose
scores all tied (those teach nothing), the share of well-formed answers, and an ETA from the
mean of the steps measured so far; the dicts are appended to OUT/log.txt, beside the same
lines, and metrics.jsonl keeps every number as before.

The metric keys are read where they exist: evoenv's own `train/score_mean`,
`train/zero_variance_share` and `train/format_share` first, else TRL's nearest ones (the
environment reward column's mean, `frac_reward_zero_std`, the format reward's mean); a value
missing from both shows as '-'.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

TRAIN_LOG = "log.txt"  # OUT/log.txt: the loop streams the child's output here too

# (evoenv's key, TRL's fallback) for each number of the step line
SCORE_KEYS = ("train/score_mean", "rewards/evoenv_env_reward/mean")
ZERO_VARIANCE_KEYS = ("train/zero_variance_share", "frac_reward_zero_std")
FORMAT_KEYS = ("train/format_share", "rewards/evoenv_format_reward/mean")


def first_number(logs: dict, keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = logs.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
            return float(value)
    return None


def duration(seconds: float) -> str:
    """'45s', '8m 05s', '2h 03m': short enough for a line, exact enough to plan by."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


def eta(step_seconds: list[float], done: int, total: int) -> float | None:
    """Seconds left: the mean measured step time times the steps still to run."""
    if not step_seconds or total <= 0:
        return None
    return statistics.fmean(step_seconds) * max(total - done, 0)


def step_line(step: int, total: int, seconds: float, logs: dict | None, left: float | None) -> str:
    """`train step 3/16: 41.2 s | score 0.125 (zero-variance 50% of groups) | format 88% | ETA 8m 15s`"""

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.0%}"

    logs = logs or {}
    score = first_number(logs, SCORE_KEYS)
    shown = [
        f"train step {step}/{total}: {seconds:.1f} s",
        f"score {'-' if score is None else f'{score:.3f}'} "
        f"(zero-variance {share(first_number(logs, ZERO_VARIANCE_KEYS))} of groups)",
        f"format {share(first_number(logs, FORMAT_KEYS))}",
    ]
    trusted, agree = first_number(logs, ("arena/judge_trusted",)), first_number(logs, ("arena/judge_agreement",))
    if agree is not None:
        lo, hi = first_number(logs, ("arena/judge_agreement_lo",)), first_number(logs, ("arena/judge_agreement_hi",))
        shown.append(f"judge agrees {agree:.2f} [{lo:.2f}, {hi:.2f}]")
    if trusted is not None and trusted < 1.0:
        shown.append("judge at chance: arena off" if agree is not None else "judge unmeasured: arena off")
    shown.append(f"ETA {'-' if left is None else duration(left)}")
    return " | ".join(shown)


def callback(log_path: Path, say: Callable[[str], None] | None = None):
    """A TrainerCallback printing a step line per optimizer step (rank 0 only) and appending
    every dict TRL logs (training, evaluation, the final summary) to `log_path`."""
    from transformers import TrainerCallback

    say = say or (lambda line: print(line, file=sys.stderr, flush=True))

    class StepLines(TrainerCallback):
        def __init__(self) -> None:
            self.step_seconds: list[float] = []
            self.started: float | None = None
            self.pending: tuple[int, float] | None = None  # a step ended, its numbers not yet logged

        def _flush(self, state, logs: dict | None = None) -> None:
            if self.pending is None:
                return
            step, seconds = self.pending
            self.pending = None
            say(step_line(step, state.max_steps, seconds, logs, eta(self.step_seconds, step, state.max_steps)))

        def on_train_begin(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                left = state.max_steps - state.global_step
                say(f"train: {left} steps to run of {state.max_steps}; TRL's numbers per step go to {log_path}")

        def on_step_begin(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                self._flush(state)
            self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if self.started is None or not state.is_world_process_zero:
                return
            seconds = time.perf_counter() - self.started
            self.step_seconds.append(seconds)
            self.pending = (state.global_step, seconds)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return
            with log_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"step": state.global_step, **logs}, default=str) + "\n")
            if "reward" in logs or any(k in logs for k in SCORE_KEYS):
                self._flush(state, logs)

        def on_train_end(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                self._flush(state)

    return StepLines()


def quiet_trl(trainer) -> None:
    """No per-step dict printer on the console (with `disable_tqdm`, transformers adds
    PrinterCallback in ProgressCallback's place): `callback` shows the steps instead."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for cls in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cls)


__all__ = ["TRAIN_LOG", "callback", "duration", "eta", "quiet_trl", "step_line"]
