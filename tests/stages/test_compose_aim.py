"""Composition aimed at the policy's reach: each operator's predicted pass rate from its parts'
measured ones, the part levels compose picks, and the order it proposes candidates in."""

import math
import random
from pathlib import Path

import pytest

from evoenv_cli.envfile import EnvFile
from evoenv_cli.operators import COMMON, REGISTRY, Blueprint, Part
from evoenv_cli.stages.compose import Aim, aimed, candidates, measured_rates, predict, render, round_robin


def part(name: str, answer_type: str = "int", input_type: str | None = "int", tags=()) -> Part:
    env = EnvFile(Path(f"{name}.py"), name.encode(), f"id-{name}")
    return Part(env, name, answer_type, input_type, list(tags))


def test_each_operator_predicts_from_its_parts_as_its_docstring_derives():
    a, b = part("a"), part("b")
    seq, par = Blueprint("sequential", [a, b]), Blueprint("parallel", [a, b])
    assert REGISTRY["sequential"].predict(seq, [0.5, 0.4], False) == pytest.approx(0.2)
    assert REGISTRY["sequential"].chance(seq, [0.5, 0.4], [0.0, 0.1], False) == pytest.approx(0.1)  # B's answer
    # X guessed at A's guess rate, then B solved: writing a guessable number in words is as guessable
    assert REGISTRY["sequential"].chance(seq, [0.5, 0.4], [0.5, 0.0], False) == pytest.approx(0.2)
    assert REGISTRY["parallel"].predict(par, [0.5, 0.4], False) == pytest.approx(0.2)
    assert REGISTRY["parallel"].predict(par, [0.5, 0.4], True) == pytest.approx(0.45)  # partial credit: the mean
    assert REGISTRY["parallel"].chance(par, [0.5, 0.4], [0.1, 0.0], True) == pytest.approx(0.05)
    for n in (3, 4):
        select, sort = Blueprint("select", [a], n=n), Blueprint("sort", [a], n=n)
        assert REGISTRY["select"].predict(select, [0.0], False) == pytest.approx(1 / n)  # a label at random
        assert REGISTRY["select"].predict(select, [1.0], False) == pytest.approx(1.0)
        assert REGISTRY["select"].predict(select, [0.5], False) == pytest.approx(0.5**n + (1 - 0.5**n) / n)
        assert REGISTRY["select"].chance(select, [0.9], [0.0], False) == pytest.approx(1 / n)
        assert REGISTRY["sort"].predict(sort, [0.0], False) == pytest.approx(1 / math.factorial(n))
        assert REGISTRY["sort"].predict(sort, [0.7], False) == pytest.approx(0.7**n + (1 - 0.7**n) / math.factorial(n))


def test_compose_picks_the_part_levels_that_put_the_prediction_in_band():
    a, b = part("a"), part("b")
    rates = {
        # a: easy at 1, in reach at 2 and 3; b: only level 3 is above nothing
        "id-a": {1: (0.95, 0.0), 2: (0.6, 0.0), 3: (0.4, 0.0)},
        "id-b": {1: (0.0, 0.0), 2: (0.0, 0.0), 3: (0.3, 0.0)},
    }
    aim = Aim((0.03, 0.85), rates, partial_credit=False, levels=(1, 2, 3))
    guess = predict(Blueprint("parallel", [a, b]), aim)
    # b must run at 3; a at 1 gives 0.95 * 0.3 = 0.285, the largest margin
    assert guess.levels == [1, 3] and guess.tier == 0
    assert guess.pass_rate[1] == pytest.approx(0.285) and guess.pass_rate[2] == pytest.approx(0.285)
    assert 3 not in guess.pass_rate  # composite level 3 asks a at 2 and b at 4: b's 4 never measured
    # a SELECT of b at chance everywhere but level 3: the labels alone are 1/3
    sel = predict(Blueprint("select", [b], n=3), aim)
    assert sel.levels == [3] and sel.pass_rate[1] == pytest.approx(0.3**3 + (1 - 0.3**3) / 3)
    assert sel.tier == 2  # 0.35 is in the band, but only 0.02 above guessing: not aimed at
    unknown = predict(Blueprint("parallel", [a, part("c")]), aim)
    assert unknown.tier == 1 and unknown.levels == [1, 1] and unknown.pass_rate == {}
    # calibration sweeping from level 3 asks each part one level up: a start of 3 (part level 4,
    # never measured) is passed over, and b's 0.3 is reached from a start of 2
    high = predict(Blueprint("parallel", [a, b]), Aim((0.03, 0.85), rates, levels=(3, 5)))
    assert high.levels == [1, 2] and high.pass_rate == {3: pytest.approx(0.6 * 0.3)} and high.tier == 0


def test_candidates_are_proposed_in_band_first_then_unmeasured_then_the_rest():
    reach, chance, never = part("reach"), part("chance"), part("never")
    rates = {
        "id-reach": {1: (0.3, 0.0), 2: (0.2, 0.0), 3: (0.1, 0.0)},
        "id-chance": {1: (0.0, 0.0), 2: (0.0, 0.0), 3: (0.0, 0.0)},
    }
    aim = Aim((0.03, 0.85), rates, partial_credit=True, levels=(1, 2, 3))
    plans = round_robin(candidates([reach, chance, never], ("parallel", "select"), random.Random(0), 1))
    order = [(p.operator, [x.name for x in p.parts], g.tier) for p, g in aimed(plans, aim)]
    tiers = [t for _, _, t in order]
    assert tiers == sorted(tiers) and tiers[0] == 0
    # partial credit: (0.3 + 0) / 2 = 0.15 above a guess rate of 0, the widest margin
    assert order[0][:2] == ("parallel", ["chance", "reach"])
    in_band = {(op, tuple(names)) for op, names, t in order if t == 0}
    assert ("select", ("chance",)) not in in_band  # at chance: still a candidate, proposed last
    assert any(op == "select" and names == ["chance"] and t == 2 for op, names, t in order)
    assert {tuple(n) for _, n, t in order if t == 1} == {("chance", "never"), ("never", "reach"), ("never",)}
    assert aimed(plans, None)[0][1] is None  # no aim: the operators' order, nothing predicted


def test_rates_come_from_the_index_and_newer_verdicts_override_them():
    index = {
        "x": {"calibration": {"curve": {"1": {"pass_rate": 0.2, "guess_rate": 0.05}, "2": {"pass_rate": None}}}},
        "y": {"origin": "seed"},
    }
    records = [{"env_id": "x", "curve": {"1": {"pass_rate": 0.4, "guess_rate": None}}}, {"env_id": "z"}]
    assert measured_rates(index, []) == {"x": {1: (0.2, 0.05)}}
    assert measured_rates(index, records) == {"x": {1: (0.4, 0.0)}}


def test_a_composites_parts_run_at_the_levels_compose_chose():
    scope: dict = {"_START": [3, 1]}
    exec(COMMON, scope)  # the composite's own helper, as its file runs it
    assert [scope["_levels"](d) for d in (1, 2, 3, 4, 10)] == [[3, 1], [3, 1], [4, 2], [4, 2], [7, 5]]
    scope["_START"] = [1]
    assert [scope["_levels"](d)[0] for d in range(1, 11)] == [(d + 1) // 2 for d in range(1, 11)]  # the old rule
    seeds = Path(__file__).resolve().parents[2] / "seeds"
    a, b = (
        Part(EnvFile.from_path(seeds / f), f[:-3], "int", None, [])
        for f in ("edit_distance.py", "grid_shortest_path.py")
    )
    plan = Blueprint("parallel", [a, b], levels=[2, 3])
    assert "_START = [2, 3]" in render(plan, {})
