"""How sure a measured rate is: the 95% interval of a pass rate, the one-sided test that a pass
rate beats the rate guessing gets, and the paired bootstrap interval of a change. Calibration
decides levels with them, evaluation prints them, and the learning bench proves with them, so
all three read the same numbers the same way (stdlib only: calibration runs without torch).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence


def wilson_interval(p: float | None, n: int, z: float = 1.96) -> list[float] | None:
    """A 95% interval for a pass rate `p` over `n` trials (Wilson's score interval: it stays
    inside [0, 1] and is not empty at 0 or 1, unlike the normal approximation)."""
    if p is None or n < 1:
        return None
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def above_chance_p_value(successes: int, n: int, guess: float) -> float:
    """The exact one-sided binomial p-value of `successes` in `n` trials against a guess rate:
    P(X >= successes) for X ~ Binomial(n, guess). Small means the rate beats guessing."""
    if successes <= 0:
        return 1.0
    if guess <= 0.0:
        return 0.0
    if guess >= 1.0:
        return 1.0
    tail = sum(math.comb(n, i) * guess**i * (1 - guess) ** (n - i) for i in range(successes, n + 1))
    return min(1.0, tail)


def paired_bootstrap(
    after: Sequence[float], before: Sequence[float], resamples: int = 2000, seed: int = 0
) -> tuple[float, list[float]]:
    """The mean change over paired items (after - before, item by item) and its 95% interval,
    from `resamples` resamplings of the items with replacement (percentile interval)."""
    if len(after) != len(before) or not after:
        raise ValueError(f"paired items differ in number or are none ({len(after)} vs {len(before)})")
    diffs = [a - b for a, b in zip(after, before)]
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    lo, hi = means[int(0.025 * (resamples - 1))], means[int(round(0.975 * (resamples - 1)))]
    return round(sum(diffs) / n, 4), [round(lo, 4), round(hi, 4)]
