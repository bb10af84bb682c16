"""A hedge pays no more than a guess (issue 42, rule 1: an answer that holds the reference among
other candidates, paid under full pay or in full). checks/hedge.py scores, per instance, the
reference and one wrong answer of its shape joined both ways round, against the mean of what
each earns alone.

The hostile members come from a generator: each seed with an integer answer keeps its own
`score` and gains a rule that splits the answer into candidates (at "or" or line breaks)
and pays PAY (0.6 to 1.0) when at most K (2 or 3) candidates hold a
right one. The old checks (every check before this one, as they were) admit each member; the
new check rejects it. The honest twins, one per seed, read the first candidate, the last
candidate, or pay reasoning-gym's containment credit (len(reference) / len(answer)): admitted
by both."""

from __future__ import annotations

import random

import pytest
from conftest import INT_SEEDS, SEEDS
from support.seed_variants import env_at, variant, verdict

from evoenv_cli.checks import context, hedge
from evoenv_cli.checks.registry import CHECKS
from evoenv_cli.config import ValidateConfig
from evoenv_cli.runtime.workers import SandboxWorkers

OLD_CHECKS = ("load", "run", "reference", "determinism", "discrimination", "constant_answer")
NEW_CHECKS = (*OLD_CHECKS, "hedge")

HEDGER = '''

import re as _re

PAY = {pay}
K = {k}
_SPLIT = _re.compile(r"\\s*(?:\\bor\\b|\\n)\\s*")


def score(instance, answer):
    """The seed's own score, and PAY when a short list of candidates holds a right one."""
    strict = _strict_score(instance, answer)
    if strict >= 1.0 or not isinstance(answer, str) or len(answer) > 200:
        return strict
    parts = [p for p in _SPLIT.split(answer.strip()) if p]
    if 1 < len(parts) <= K and any(_strict_score(instance, p) >= 1.0 for p in parts):
        return PAY
    return strict
'''

HONEST = '''

import re as _re

READ = {read!r}
_SPLIT = _re.compile(r"\\s*(?:\\bor\\b|\\n)\\s*")


def score(instance, answer):
    """The seed's own score on one candidate (the first or the last), or containment credit."""
    if not isinstance(answer, str) or len(answer) > 200:
        return 0.0
    if READ == "containment":
        ref = solve(instance)
        if answer.strip() == ref:
            return 1.0
        return len(ref) / len(answer) if ref in answer else 0.0
    parts = [p for p in _SPLIT.split(answer.strip()) if p] or [""]
    return _strict_score(instance, parts[0] if READ == "first" else parts[-1])
'''

PAYS = (1.0, 0.9, 0.75, 0.6)
HEDGE_FAMILY = [(seed, PAYS[k % len(PAYS)], 2 + k % 2) for k, seed in enumerate(INT_SEEDS)]
HONEST_FAMILY = [(seed, ("first", "last", "containment")[k % 3]) for k, seed in enumerate(INT_SEEDS)]


@pytest.fixture(scope="module")
def pool():
    with SandboxWorkers(workers=2) as p:
        yield p


def test_hedges_hold_the_reference_both_ways_round_with_each_join():
    got = hedge.hedges("42", "17")
    assert got == ["42 or 17", "17 or 42", "42\n17", "17\n42"]
    rng = random.Random(3)
    for _ in range(50):  # a first-candidate reader earns the guess's mean exactly: half of them lead with 42
        assert sum(h.split(" or ")[0].split("\n")[0] == "42" for h in hedge.hedges("42", str(rng.randint(10, 99)))) == 2


@pytest.mark.slow
@pytest.mark.parametrize("seed,pay,k", HEDGE_FAMILY, ids=[f"{s}-{p}-{k}" for s, p, k in HEDGE_FAMILY])
def test_a_hedge_paid_more_than_a_guess_is_rejected(seed, pay, k, pool, tmp_path):
    env = env_at(
        tmp_path, f"hedger_{seed}", variant(SEEDS / f"{seed}.py", f"hedger_{seed}", HEDGER.format(pay=pay, k=k))
    )
    old = verdict(env, ValidateConfig(), pool, OLD_CHECKS)
    assert old[0] == "admitted", f"the old checks already reject this member: {old}"
    new = verdict(env, ValidateConfig(), pool, NEW_CHECKS)
    assert new[0] == "hedge" and "more than a guess between them earns" in new[2], new


@pytest.mark.slow
@pytest.mark.parametrize("seed,read", HONEST_FAMILY, ids=[f"{s}-{r}" for s, r in HONEST_FAMILY])
def test_a_scorer_that_reads_one_candidate_or_pays_containment_is_admitted(seed, read, pool, tmp_path):
    env = env_at(tmp_path, f"reader_{seed}", variant(SEEDS / f"{seed}.py", f"reader_{seed}", HONEST.format(read=read)))
    assert verdict(env, ValidateConfig(), pool, NEW_CHECKS)[0] == "admitted"


def test_the_check_is_off_with_the_mean_rule_off(pool, tmp_path):
    seed, pay, k = HEDGE_FAMILY[0]
    env = env_at(tmp_path, "hedger_off", variant(SEEDS / f"{seed}.py", "hedger_off", HEDGER.format(pay=pay, k=k)))
    checker = context.Checker(env, ValidateConfig(max_mean_excess=1.0), pool, pool)
    for name in NEW_CHECKS:
        CHECKS[name].run(checker)
    assert "hedge_excess" not in checker.m
