"""The numbers calibration decides with and the learning bench proves with: the one-sided exact
binomial test against a guess rate, Wilson's interval, and the paired bootstrap of a change."""

import math

import pytest

from evoenv_cli.confidence import above_chance_p_value, paired_bootstrap, wilson_interval


def test_the_exact_one_sided_test_against_a_guess_rate():
    # 12 of 24 against guessing 1/4: P(X >= 12) summed by hand from the binomial terms
    expected = sum(math.comb(24, i) * 0.25**i * 0.75 ** (24 - i) for i in range(12, 25))
    assert above_chance_p_value(12, 24, 0.25) == pytest.approx(expected) and expected < 0.01
    assert above_chance_p_value(8, 24, 1 / 3) > 0.4  # a third right against a third: chance
    assert above_chance_p_value(0, 10, 0.1) == 1.0 and above_chance_p_value(1, 10, 0.0) == 0.0


def test_wilson_interval_stays_in_0_1_and_narrows_with_n():
    assert wilson_interval(0.0, 8)[0] == 0.0 and wilson_interval(1.0, 8)[1] == 1.0
    wide, narrow = wilson_interval(0.5, 16), wilson_interval(0.5, 64)
    assert narrow[1] - narrow[0] < wide[1] - wide[0] and wilson_interval(None, 3) is None


def test_paired_bootstrap_brackets_the_mean_change_and_is_reproducible():
    before = [0.0] * 20 + [1.0] * 5
    after = [1.0] * 15 + [0.0] * 5 + [1.0] * 5
    delta, (lo, hi) = paired_bootstrap(after, before)
    assert delta == 0.6 and lo <= delta <= hi and lo > 0
    assert paired_bootstrap(after, before) == (delta, [lo, hi])
    same, (lo0, hi0) = paired_bootstrap(before, before)
    assert same == 0.0 and lo0 == hi0 == 0.0
    with pytest.raises(ValueError):
        paired_bootstrap([1.0], [])
