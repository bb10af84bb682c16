"""Composition aimed at the policy's reach: each operator's predicted pass rate from its parts'
measured ones, the part levels compose picks, and the order it proposes candidates in."""

import json
import math
import random
from pathlib import Path

import pytest

from evoenv_cli import stage
from evoenv_cli.config import IterateConfig, Recipe
from evoenv_cli.envfile import EnvFile
from evoenv_cli.operators import COMMON, REGISTRY, Blueprint, Part
from evoenv_cli.pool import EnvPool
from evoenv_cli.stage import Round
from evoenv_cli.stages import compose
from evoenv_cli.stages.compose import (
    Aim,
    aimed,
    candidates,
    measured_rates,
    measured_records,
    predict,
    realised,
    render,
    round_robin,
)


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


def test_an_operator_whose_composites_measured_under_their_prediction_is_predicted_lower():
    """The demo's round 1 (2026-12-06): four PARALLEL composites with number_in_words, predicted
    0.16-0.30 at level 1, measured 0.00-0.02 (the starter wrote that part in digits). Their
    measured over predicted pass rate scales the operator's next predictions, so round 2 does
    not propose PARALLEL first again."""
    made = [
        {"env_id": "p1", "operator": "parallel", "predicted": {"pass_rate": {"1": 0.3, "2": 0.3, "3": 0.1}}},
        {"env_id": "p2", "operator": "parallel", "predicted": {"pass_rate": {"1": 0.2}, "scale": 0.5}},
        {"env_id": "s1", "operator": "select", "predicted": {"pass_rate": {"1": 0.35}}},  # never calibrated
    ]
    measured = [
        {"env_id": "p1", "curve": {"1": {"pass_rate": 0.0}, "2": {"pass_rate": 0.02}, "3": {"pass_rate": None}}},
        {"env_id": "p2", "curve": {"1": {"pass_rate": 0.06}}},  # its 0.2 was 0.4 before its scale of 0.5
    ]
    assert realised(made + measured) == {"parallel": pytest.approx(0.08 / 1.0)}
    assert realised(measured) == {} and realised(made) == {}
    a, b = part("a"), part("b")
    rates = {"id-a": {1: (0.3, 0.0), 2: (0.2, 0.0)}, "id-b": {1: (0.3, 0.0), 2: (0.2, 0.0)}}
    plans = round_robin(candidates([a, b], ("parallel", "sequential"), random.Random(0), 1))
    first = aimed(plans, Aim((0.03, 0.85), rates, True, (1, 2, 3)))[0]
    assert first[0].operator == "parallel" and first[1].pass_rate[1] == pytest.approx(0.3)  # the mean
    aim = Aim((0.03, 0.85), rates, True, (1, 2, 3), scale=realised(made + measured))
    scaled = [(p.operator, g) for p, g in aimed(plans, aim)]
    assert [op for op, g in scaled if g.tier == 0] == ["sequential", "sequential"]  # 0.3 * 0.3, unscaled
    par = next(g for op, g in scaled if op == "parallel")
    assert par.pass_rate[1] == pytest.approx(0.3 * 0.08) and par.tier == 2
    assert par.record()["scale"] == pytest.approx(0.08) and "scale" not in scaled[0][1].record()


def test_in_the_loop_compose_reads_the_earlier_rounds_compose_and_calibrate_verdicts(tmp_path):
    run = tmp_path / "run"
    for k, (measured, predicted) in enumerate(((0.0, 0.3), (0.03, 0.2)), start=1):
        for step, record in (
            ("compose", {"env_id": f"c{k}", "operator": "parallel", "predicted": {"pass_rate": {"1": predicted}}}),
            ("calibrate", {"env_id": f"c{k}", "curve": {"1": {"pass_rate": measured}}}),
        ):
            (run / f"round-{k:02d}" / step).mkdir(parents=True)
            (run / f"round-{k:02d}" / step / "verdicts.jsonl").write_text(json.dumps(record) + "\n")
    rotated = run / "round-03" / "rotate"
    rotated.mkdir(parents=True)
    (rotated / "verdicts.jsonl").write_text("")
    rnd = Round(3, run / "round-03", "policy", Recipe(), IterateConfig(), tmp_path, EnvPool(run, tmp_path), print)
    got = {"measured": stage.Result("rotate", "measured", rotated, rotated / "verdicts.jsonl", {})}
    folders = compose.STAGE.in_round(rnd, got)["inputs"]["measured"]
    assert folders[-1] == rotated and len(folders) == 5  # the rotation last: its rates are the newest
    assert realised(measured_records(folders)) == {"parallel": pytest.approx(0.03 / 0.5)}
