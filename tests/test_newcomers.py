"""What the round's line and summary say of environments that joined after the start: where
each came from, its predicted and measured pass rate, its training rows, its held-out pass@1."""

import json
from pathlib import Path

from evoenv_cli.loop import newcomer_line, newcomers, round_line


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def fake_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    par = {
        "file": "par__a__b.py",
        "env_id": "e-par",
        "name": "par__a__b",
        "origin": "compose",
        "operator": "parallel",
        "parents": ["a.py", "b.py"],
        "joined_round": 1,
        "predicted": {"levels": [1, 3], "pass_rate": {"1": 0.15, "2": 0.15}, "guess_rate": {"1": 0.0}},
    }
    seed = {"file": "a.py", "env_id": "e-a", "name": "a", "origin": "seed"}
    write_jsonl(run / "pool" / "index.jsonl", [seed, par])
    write_jsonl(
        run / "round-01" / "calibrate" / "verdicts.jsonl",
        [{"env_id": "e-par", "name": "par__a__b", "levels": [2, 1], "curve": {"1": {"pass_rate": 0.21}}}],
    )
    # round 2 re-measured it (rotation): the line keeps what calibration measured when it joined
    write_jsonl(
        run / "round-02" / "rotate" / "verdicts.jsonl",
        [{"env_id": "e-par", "levels": [1], "curve": {"1": {"pass_rate": 0.5}}}],
    )
    write_jsonl(run / "round-02" / "sample" / "train.jsonl", [{"env_name": "par__a__b"}] * 3 + [{"env_name": "a"}])
    return run


def test_a_newcomer_is_named_in_the_round_it_joined_and_the_rounds_that_train_on_it(tmp_path):
    run = fake_run(tmp_path)
    metrics = {
        "environments": {"par__a__b": {"pass@1": 0.25}},
        "baseline": {"environments": {"par__a__b": {"pass@1": 0.1}}},
    }
    [one] = newcomers(2, run / "round-02", run / "pool", metrics, run / "round-02" / "sample" / "train.jsonl")
    assert one == {
        "name": "par__a__b",
        "origin": "compose",
        "operator": "parallel",
        "parents": ["a", "b"],
        "joined_round": 1,
        "level": 1,
        "predicted": 0.15,
        "measured": 0.21,
        "train_rows": 3,
        "held_out": 0.25,
        "held_out_before": 0.1,
    }
    line = newcomer_line(one, 2)
    assert line == (
        "new: par__a__b (parallel of a, b; joined in round 1): pass rate predicted 0.150, measured 0.210 at "
        "level 1; 3 training rows this round; held-out pass@1 0.100 before training, 0.250 now"
    )
    # a round that neither admitted it nor drew it says nothing of it
    (run / "round-03" / "sample").mkdir(parents=True)
    (run / "round-03" / "sample" / "train.jsonl").write_text("")
    assert newcomers(3, run / "round-03", run / "pool", {}, run / "round-03" / "sample" / "train.jsonl") == []
    text = round_line({"round": 2, "newcomers": [one]})
    assert text.splitlines()[-1] == "  " + line


def test_an_offered_newcomer_is_said_to_be_offered_and_the_round_line_counts_it():
    one = {"name": "rg_x", "origin": "offered", "operator": None, "parents": [], "joined_round": 1, "level": 1}
    one |= {"predicted": None, "measured": 0.4, "train_rows": 0}
    assert newcomer_line(one, 1) == (
        "new: rg_x (offered by a person; joined this round): pass rate predicted -, measured 0.400 at level 1; "
        "0 training rows this round"
    )
    text = round_line({"round": 1, "candidates": 0, "offered": 1, "admitted": {"review": 1}, "newcomers": [one]})
    assert "the model wrote 0 that parsed, a person offered 1 (1 passed review)" in text
    assert "a person offered" not in round_line({"round": 1, "candidates": 0, "admitted": {}})


def test_the_report_gives_the_prediction_error_over_every_calibrated_composite(tmp_path):
    from evoenv_cli.report import numbers, page
    from evoenv_cli.report.run_files import RunFiles

    run = fake_run(tmp_path)
    write_jsonl(
        run / "round-01" / "compose" / "verdicts.jsonl",
        [{"env_id": "e-par", "name": "par__a__b", "predicted": {"pass_rate": {"1": 0.15, "2": 0.15}}}],
    )
    write_jsonl(
        run / "round-01" / "calibrate" / "verdicts.jsonl",
        [{"env_id": "e-par", "name": "par__a__b", "curve": {"1": {"pass_rate": 0.25}, "2": {"pass_rate": 0.05}}}],
    )
    write_jsonl(run / "rounds.jsonl", [{"round": 1, "newcomers": []}])
    got = numbers.newcomers(RunFiles(run))
    assert [round(e["error"], 6) for e in got["errors"]] == [0.1, -0.1]
    assert got["mean_error"] == 0.0 and abs(got["mean_abs_error"] - 0.1) < 1e-9 and got["rows"] == []
    html = page.newcomers_section({"newcomers": got})
    assert "no environment joined" in html and "over 2 calibrated (composite, level) pairs" in html


def test_an_offered_folder_enters_one_round_and_a_rerun_offers_it_to_the_same_one(tmp_path):
    from evoenv_cli.loop import offered_round

    run, folder = tmp_path / "run", tmp_path / "offered"
    run.mkdir()
    assert offered_round(run, None, 1) is None and not (run / "offered.jsonl").exists()
    assert offered_round(run, folder, 1) == 1
    # killed in round 2 and rerun: round 1 is done, but the folder still entered round 1 only
    assert offered_round(run, folder, 2) == 1
    # another folder offered later enters the first round still open then
    assert offered_round(run, tmp_path / "more", 3) == 3
    assert [json.loads(x)["round"] for x in (run / "offered.jsonl").read_text().splitlines()] == [1, 3]
