"""What counts as paying a wrong answer, measured against chance (issue 42, rule 1).

A score is not judged by a fixed line alone. Each environment's *chance pay* is measured:
the scores its `score` gives answers of the reference's shape that know nothing of the
instance (other instances' references and random answers of the reference's shape, scored
by `discrimination` before any probe is judged). From it:

- the chance line: what a typical wrong chance answer (one under full pay) earned, their
  median, plus `validate.min_paid_excess`, capped at full pay (`PAID`). A wrong answer scored
  at the line or over it is paid, whether or not the score reaches 1.0. A median, not the
  largest: a lenient rule that pays some chance answers too (another instance's reference that
  is a reordering of this one's) must not lift the line over what it pays;
- the chance rate: the share of chance answers paid at that line (a blind guess that happens
  to be right, or one the same rule pays), against which a count of paid answers is tested (an
  exact one-sided binomial test, `above_chance_p_value`, at KIND_ALPHA), so a kind of wrong
  answer is a finding only when it is paid more often than chance answers are;
- the mean rule: a probe kind of answers no valid one can be is paid on average at most
  `validate.max_mean_excess` more than being right explains, the chance rate of being right
  (or the kind's own share paid in full, where that is more), one-sided 95%: partial credit for
  an answer's shape alone is compared with chance, not with a fixed mean, and a scorer that
  pays 0 or 1 is never over it.

An answer that states the reference itself among other text (a hedge: alternatives, the
reference among equations, a superset, a flood) carries the right answer: containment credit
(reasoning-gym's `score_answer` pays len(reference) / len(answer)) is paid only by an answer
that holds it, and a hedge of k candidates paid 1/k earns what a guess among them would. Such
an answer is paid only at full pay, as before; the flood probe's mean limit bounds the rest.

`min_paid_excess: 1` puts the line at full pay and `max_mean_excess: 1` turns the mean rule
off: the criterion before this module. Pure arithmetic on scores: nothing runs here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from evoenv_cli.checks.fuzz import KINDS
from evoenv_cli.confidence import above_chance_p_value

# A score at or above this pays an answer: full pay less a rounding hair. A scorer that pays a
# near miss 0.9999 pays it (issue 42's third battery); honest partial credit, a share of the
# parts right, stays below it until a thousand parts.
PAID = 0.999
QUANTILE = 0.5  # the chance line starts from this quantile of the wrong chance answers' scores
MEAN_Z = 1.645  # one-sided 95% for the mean rule
# A kind's paid answers against the chance rate: one-sided 95%, split over the fuzzer's kinds
KIND_ALPHA = 0.05 / len(KINDS)


def carries(answer: str, reference: str) -> bool:
    """Whether `answer` states the reference itself (its stripped text, case and all)."""
    ref = reference.strip()
    return bool(ref) and ref in answer


@dataclass(frozen=True)
class Chance:
    """The chance pay of one environment: the scores of its chance answers, and the excess
    over the largest wrong one that pays (`validate.min_paid_excess`)."""

    scores: tuple[float, ...] = ()
    excess: float = 1.0

    @property
    def n(self) -> int:
        return len(self.scores)

    @property
    def right(self) -> float:
        """The share of chance answers paid in full: a blind guess of its shape that is right."""
        return sum(s >= PAID for s in self.scores) / self.n if self.scores else 0.0

    @cached_property  # once: `paid` reads it for every wrong answer judged
    def wrong_top(self) -> float:
        """What a typical wrong chance answer (under full pay) earned (the QUANTILE of their
        scores); 0 with none."""
        wrong = sorted(s for s in self.scores if s < PAID)
        return wrong[max(0, math.ceil(QUANTILE * len(wrong)) - 1)] if wrong else 0.0

    @cached_property
    def line(self) -> float:
        """The score from which a wrong answer is paid: over what chance answers earned, by the
        excess; never over full pay."""
        return min(PAID, self.wrong_top + self.excess)

    @property
    def rate(self) -> float:
        """The share of chance answers scored at the line or over it."""
        line = self.line
        return sum(s >= line for s in self.scores) / self.n if self.scores else 0.0

    def paid(self, score: float, answer: str, reference: str) -> bool:
        """Whether a wrong answer scored `score` is paid: in full, or at the chance line when it
        does not state the reference itself."""
        return score >= PAID or (score >= self.line and not carries(answer, reference))

    def beats_chance(self, paid: int, tried: int) -> bool:
        """Whether `paid` of `tried` wrong answers paid is more than chance answers are paid
        (exact one-sided binomial test at KIND_ALPHA)."""
        return paid > 0 and above_chance_p_value(paid, tried, self.rate) <= KIND_ALPHA

    def mean_excess(self, scores: Sequence[float]) -> tuple[float, float]:
        """(the mean of `scores` less what being right explains, its standard error): less the
        chance rate of being right, or the share of `scores` paid in full where that is more
        (a scorer that pays 0 or 1 is never over it)."""
        n = len(scores)
        if not n:
            return 0.0, 0.0
        mean = sum(scores) / n
        var = sum((s - mean) ** 2 for s in scores) / max(1, n - 1)
        right = max(self.right, sum(s >= PAID for s in scores) / n)
        se = math.sqrt(var / n + (right * (1 - right) / self.n if self.n else 0.0))
        return mean - right, se

    def mean_over(self, scores: Sequence[float], max_excess: float) -> bool:
        """Whether the mean pay of `scores` is surely (one-sided 95%) more than `max_excess`
        over the chance rate of being right; never with `max_excess` 1 (the rule off)."""
        if max_excess >= 1:
            return False
        excess, se = self.mean_excess(scores)
        return excess - MEAN_Z * se > max_excess


# Before anything is measured (and with the measured criterion off): full pay alone pays.
FULL_PAY_ONLY = Chance()
