"""`evoenv report`: the numbers behind each figure, checked against a run's files.

A hand-made run with every kind of outcome (parse failures, a rejection at each contract, a
retirement, real calibration curves, training steps, an evaluation with a baseline) whose
round 2 was killed in validate with a torn last line; the numbers each figure draws must be
the ones in its files. The browser tests on real runs are in test_report_browser.py.
"""

import json
from pathlib import Path

import pytest

from evoenv_cli.report import build
from evoenv_cli.report.numbers import compute
from evoenv_cli.report.run_files import RunFiles
from evoenv_cli.stage import round_results
from evoenv_cli.stages import round_steps


def jsonl(path: Path, records: list[dict], torn: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in records)
    path.write_text(text + (torn or ""))


def write_json(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2))


def verdict(file, admitted, stage, reason, **extra):
    return {
        "file": file,
        "env_id": "0" * 16,
        "name": Path(file).stem,
        "admitted": admitted,
        "stage": "admitted" if admitted else stage,
        "reason": reason,
        **extra,
    }


def env_file(folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f'"""{name}: a test environment."""\nNAME = "{Path(name).stem}"\n')


def curve(*rates):
    return {str(lv): {"pass_rate": p, "n": 4, "no_answer_share": 0.0} for lv, p in zip((1, 4, 7, 10), rates)}


GENERATIONS_R1 = [  # (outcome, file, topic, parents)
    ("ok", "g00000_alpha.py", "graphs", ["A", "B"]),
    ("ok", "g00001_beta.py", "graphs", ["A", "C"]),
    ("ok", "g00002_gamma.py", "graphs", ["B", "C"]),
    ("ok", "g00003_delta.py", "strings", ["A", "D"]),
    ("no_code", None, "strings", ["C", "D"]),
    ("syntax_error", None, "puzzles", ["D", "A"]),
]


def generation(i, outcome, file, topic, parents):
    return {
        "prompt_id": i,
        "prompt_hash": f"{i:016x}",
        "prompt": f"write environment {i}",
        "response": f"response {i} <script>alert(1)</script>",
        "parents": parents,
        "topic": topic,
        "model": "m0",
        "outcome": outcome,
        "file": file,
    }


def make_run(root: Path, calibrate_first: bool = False) -> Path:
    r1 = root / "round-01"
    jsonl(r1 / "synthesize" / "generations.jsonl", [generation(i, *g) for i, g in enumerate(GENERATIONS_R1)])
    for _, f, *_ in GENERATIONS_R1:
        if f:
            env_file(r1 / "synthesize" / "envs", f)
    write_json(r1 / "synthesize" / "summary.json", {"stage": "synthesize", "requests": 6, "candidates": 4})
    jsonl(
        r1 / "validate" / "verdicts.jsonl",
        [
            verdict("g00000_alpha.py", True, "", "passed all checks"),
            verdict("g00001_beta.py", True, "", "passed all checks"),
            verdict("g00002_gamma.py", True, "", "passed all checks"),
            verdict("g00003_delta.py", False, "static", "imports 'os', which is not allowed"),
        ],
    )
    for f in ("g00000_alpha.py", "g00001_beta.py", "g00002_gamma.py"):
        env_file(r1 / "validate" / "envs", f)
    write_json(r1 / "validate" / "summary.json", {"stage": "validate"})
    jsonl(
        r1 / "review" / "verdicts.jsonl",
        [
            verdict("g00000_alpha.py", True, "", "3/3 votes approve", approvals=3),
            verdict("g00001_beta.py", False, "review", "1/3 votes approve; well_posed=false: ambiguous", approvals=1),
            verdict("g00002_gamma.py", True, "", "2/3 votes approve", approvals=2),
        ],
    )
    write_json(r1 / "review" / "summary.json", {"stage": "review"})
    jsonl(
        r1 / "compose" / "verdicts.jsonl",
        [
            verdict("par__A__B.py", True, "", "passed all checks", operator="parallel", parents=["A.py", "B.py"]),
            verdict("sort3__C.py", True, "", "passed all checks", operator="sort", parents=["C.py"]),
            verdict("seq__A__D.py", False, "run", "generate at seed 0 difficulty 1 raised: ValueError: no chain"),
        ],
    )
    write_json(r1 / "compose" / "summary.json", {"stage": "compose"})
    for f in ("g00000_alpha.py", "g00002_gamma.py", "par__A__B.py", "sort3__C.py"):
        env_file(r1 / "candidates" / "envs", f)
    if calibrate_first:  # a run from before the loop ran dedupe first
        jsonl(
            r1 / "calibrate" / "verdicts.jsonl",
            [
                verdict(
                    "g00000_alpha.py", True, "", "pass rate in band", curve=curve(0.9, 0.6, 0.3, 0.1), levels=[4, 7]
                ),
                verdict("g00002_gamma.py", False, "too_easy", "pass rate 0.95 > 0.85 even at level 10"),
                verdict("par__A__B.py", True, "", "pass rate in band", levels=[1, 4]),
                verdict("sort3__C.py", False, "too_hard", "pass rate 0.02 < 0.15 even at level 1"),
            ],
        )
        write_json(r1 / "calibrate" / "summary.json", {"stage": "calibrate"})
        env_file(r1 / "calibrate" / "envs", "g00000_alpha.py")
        env_file(r1 / "calibrate" / "envs", "par__A__B.py")
        jsonl(
            r1 / "dedupe" / "verdicts.jsonl",
            [
                verdict("g00000_alpha.py", True, "", "no near-duplicate"),
                verdict(
                    "par__A__B.py",
                    False,
                    "duplicate_code",
                    "its code is a near-duplicate of A.py (pool p): estimated Jaccard 0.61 >= 0.5",
                ),
            ],
        )
        jsonl(
            r1 / "dedupe" / "index.jsonl", [{"file": "g00000_alpha.py", "name": "g00000_alpha", "origin": "synthesize"}]
        )
        write_json(r1 / "dedupe" / "summary.json", {"stage": "dedupe"})
    else:  # the loop's order: the cheap novelty contract first, then calibrate on what it kept
        jsonl(
            r1 / "dedupe" / "verdicts.jsonl",
            [
                verdict("g00000_alpha.py", True, "", "no near-duplicate"),
                verdict("g00002_gamma.py", True, "", "no near-duplicate"),
                verdict(
                    "par__A__B.py",
                    False,
                    "duplicate_code",
                    "its code is a near-duplicate of A.py (pool p): estimated Jaccard 0.61 >= 0.5",
                ),
                verdict("sort3__C.py", True, "", "no near-duplicate"),
            ],
        )
        jsonl(
            r1 / "dedupe" / "index.jsonl",
            [
                {"file": "g00000_alpha.py", "name": "g00000_alpha", "origin": "synthesize"},
                {"file": "g00002_gamma.py", "name": "g00002_gamma", "origin": "synthesize"},
                {"file": "sort3__C.py", "name": "sort3__C", "origin": "compose"},
            ],
        )
        write_json(r1 / "dedupe" / "summary.json", {"stage": "dedupe"})
        for f in ("g00000_alpha.py", "g00002_gamma.py", "sort3__C.py"):
            env_file(r1 / "dedupe" / "envs", f)
        jsonl(
            r1 / "calibrate" / "verdicts.jsonl",
            [
                verdict(
                    "g00000_alpha.py", True, "", "pass rate in band", curve=curve(0.9, 0.6, 0.3, 0.1), levels=[4, 7]
                ),
                verdict("g00002_gamma.py", False, "too_easy", "pass rate 0.95 > 0.85 even at level 10"),
                verdict("sort3__C.py", False, "too_hard", "pass rate 0.02 < 0.15 even at level 1"),
            ],
        )
        write_json(r1 / "calibrate" / "summary.json", {"stage": "calibrate"})
        env_file(r1 / "calibrate" / "envs", "g00000_alpha.py")
        # the loop books each step as it runs: the order the round ran
        write_json(
            r1 / "loop.json",
            {"stages": {s: {} for s in ("synthesize", "validate", "review", "dedupe")} | {"calibrate": {}}},
        )
    jsonl(
        r1 / "rotate" / "verdicts.jsonl",
        [
            verdict("A.py", True, "", "in band"),
            verdict("B.py", True, "", "in band"),
            verdict(
                "C.py",
                False,
                "retired_too_easy",
                "pass rate 0.97 > 0.85 even at level 10; missed the band 2 times in a row",
            ),
            verdict("D.py", True, "", "in band"),
        ],
    )
    write_json(r1 / "rotate" / "summary.json", {"stage": "calibrate"})
    write_json(
        r1 / "pool-update.json",
        {
            "pool_size": 4,
            "joined": ["g00000_alpha"],
            "retired": [{"name": "C", "stage": "retired_too_easy", "reason": "pass rate 0.97 > 0.85 even at level 10"}],
        },
    )
    jsonl(r1 / "sample" / "train.jsonl", [{"prompt": "x"}])
    jsonl(
        r1 / "train" / "metrics.jsonl",
        [
            {
                "step": 1,
                "reward": 0.25,
                "reward_std": 0.4,
                "frac_reward_zero_std": 0.5,
                "train/zero_variance_share": 1.0,
                "per_env": {"A": {"n": 4, "pass_rate": 0.5}, "B": {"n": 4, "pass_rate": 0.0}},
            },
            {
                "step": 2,
                "reward": 0.5,
                "reward_std": 0.3,
                "frac_reward_zero_std": 0.25,
                "train/zero_variance_share": 0.5,
                "per_env": {"A": {"n": 4, "pass_rate": 0.75}, "g00000_alpha": {"n": 4, "pass_rate": 0.25}},
            },
            {
                "step": 3,
                "reward": 0.75,
                "reward_std": 0.2,
                "frac_reward_zero_std": 0.0,
                "per_env": {"B": {"n": 4, "pass_rate": 1.0}},
            },
        ],
    )
    write_json(r1 / "train" / "train-manifest.json", {"summary": {"steps": 3, "mean_reward": 0.5}})
    write_json(
        r1 / "evaluate" / "metrics.json",
        {
            "model": "r1/train",
            "overall": {
                "pass@1": 0.4,
                "env_mean": 0.5,
                "bench_mean": 0.3,
                "no_answer_share": 0.1,
                "ci95": [0.2, 0.6],
                "items": 20,
            },
            "environments": {"A": {"pass@1": 0.5}, "g00000_alpha": {"pass@1": 0.5}},
            "benchmarks": {"bench.jsonl": {"pass@1": 0.3}},
            "baseline": {
                "model": "m0",
                "overall": {"pass@1": 0.3, "env_mean": 0.25, "bench_mean": 0.35, "ci95": [0.14, 0.52], "items": 20},
                "environments": {"A": {"pass@1": 0.25}, "g00000_alpha": {"pass@1": 0.25}},
                "benchmarks": {"bench.jsonl": {"pass@1": 0.35}},
            },
        },
    )
    jsonl(
        root / "rounds.jsonl",
        [
            {
                "round": 1,
                "candidates": 4,
                "pool_size": 4,
                "joined": 1,
                "retired": 1,
                "mean_train_reward": 0.5,
                "evaluation": {"pass@1": 0.4},
            }
        ],
    )
    # round 2, killed in validate: the last line of generations.jsonl torn
    r2 = root / "round-02"
    jsonl(
        r2 / "synthesize" / "generations.jsonl",
        [
            generation(0, "ok", "g00000_eps.py", "strings", ["A", "B"]),
            generation(1, "no_code", None, "strings", ["B", "D"]),
        ],
        torn='{"prompt_id": 2, "prom',
    )
    env_file(r2 / "synthesize" / "envs", "g00000_eps.py")
    jsonl(r2 / "validate" / "verdicts.jsonl", [verdict("g00000_eps.py", True, "", "passed all checks")])
    # the pool as round 1 left it
    jsonl(
        root / "pool" / "index.jsonl",
        [
            {
                "file": "A.py",
                "name": "A",
                "origin": "seed",
                "calibration": {
                    "curve": {
                        lv: {**m, "guess_rate": 0.25} for lv, m in curve(0.95, 0.8, 0.5, 0.2).items()
                    },  # as calibrate writes it now
                    "levels": [4, 7],
                    "band": [0.15, 0.85],
                    "misses": 0,
                },
            },
            {
                "file": "B.py",
                "name": "B",
                "origin": "seed",
                "calibration": {
                    "curve": curve(None, None, None, None),
                    "levels": list(range(1, 11)),
                    "band": [0.15, 0.85],
                },
            },
            {"file": "D.py", "name": "D", "origin": "seed", "calibration": {"levels": [1]}},
            {
                "file": "g00000_alpha.py",
                "name": "g00000_alpha",
                "origin": "synthesize",
                "joined_round": 1,
                "calibration": {"curve": curve(0.9, 0.6, 0.3, 0.1), "levels": [4, 7], "band": [0.15, 0.85]},
            },
        ],
    )
    return root


@pytest.fixture
def run(tmp_path):
    return make_run(tmp_path / "run")


def test_funnel_counts_every_step_from_the_verdict_lines(run):
    n = compute(RunFiles(run))
    f1, f2 = n["funnel"]
    steps = {s["step"]: (s["synthesized"], s["composite"]) for s in f1["steps"]}
    assert steps == {
        "generations": (6, None),
        "parsed": (4, None),
        "validate": (3, None),
        "review": (2, None),
        "candidates": (2, 2),
        "dedupe": (2, 1),
        "calibrate": (1, 0),
        "joined": (1, 0),
    }
    assert [s["step"] for s in f1["steps"]] == [
        "generations",
        "parsed",
        "validate",
        "review",
        "candidates",
        "dedupe",
        "calibrate",
        "joined",
    ]  # the order the loop ran
    assert f1["contract_order"] == ["dedupe", "calibrate"]
    st = f1["stages"]
    assert list(st) == ["synthesize", "validate", "review", "compose", "dedupe", "calibrate"]
    assert st["synthesize"]["by_check"] == {"no_code": 1, "syntax_error": 1}
    assert st["validate"]["by_check"] == {"static": 1}
    assert st["review"]["by_check"] == {"review": 1}
    assert st["compose"]["by_check"] == {"run": 1}
    assert st["calibrate"]["by_check"] == {"too_easy": 1, "too_hard": 1}
    assert st["dedupe"]["by_check"] == {"duplicate_code": 1}
    assert [s["status"] for s in st.values()] == ["done"] * 6
    # reasons link to the verdict line and the judged file where it is
    dup = st["dedupe"]["reasons"][0]
    assert dup["check"] == "duplicate_code" and dup["count"] == 1
    assert dup["pattern"] == "its code is a near-duplicate of FILE (pool p): estimated Jaccard N >= N"
    ex = dup["examples"][0]
    assert (ex["verdicts"], ex["line"], ex["source"]) == (
        "round-01/dedupe/verdicts.jsonl",
        3,
        "round-01/candidates/envs/par__A__B.py",
    )
    too_easy = [r for r in st["calibrate"]["reasons"] if r["check"] == "too_easy"][0]["examples"][0]
    assert too_easy["source"] == "round-01/dedupe/envs/g00002_gamma.py"  # calibrate judged dedupe's files
    static = st["validate"]["reasons"][0]["examples"][0]
    assert (static["line"], static["source"]) == (4, "round-01/synthesize/envs/g00003_delta.py")
    assert st["compose"]["reasons"][0]["examples"][0]["source"] is None  # a rejected composite is never written
    no_code = [r for r in st["synthesize"]["reasons"] if r["check"] == "no_code"][0]
    assert no_code["examples"][0]["line"] == 5 and no_code["examples"][0]["verdicts"].endswith("generations.jsonl")
    assert f1["joined"] == ["g00000_alpha"]
    # round 2 was killed in validate
    steps2 = {s["step"]: s["synthesized"] for s in f2["steps"]}
    assert steps2["generations"] == 2 and steps2["parsed"] == 1 and steps2["validate"] == 1
    assert steps2["review"] is None and steps2["joined"] is None
    assert f2["stages"]["validate"]["status"] == "partial" and f2["stages"]["review"]["status"] == "not started"


def test_round_status_and_the_torn_line_is_named(run):
    n = compute(RunFiles(run))
    r1, r2 = n["rounds"]
    assert r1["finished"] and r1["stopped_in"] is None and set(r1["steps"].values()) == {"done"}
    steps = list(r1["steps"])
    assert steps[steps.index("dedupe") + 1] == "calibrate" and steps.index("rotate") < steps.index("compose")
    assert not r2["finished"] and r2["stopped_in"] == "synthesize"  # no summary.json: it never finished
    assert r2["steps"]["validate"] == "partial" and r2["steps"]["train"] == "not started"
    assert n["problems"] == [
        {"path": "round-02/synthesize/generations.jsonl", "line": 3, "message": n["problems"][0]["message"]}
    ]
    assert "torn last line" in n["problems"][0]["message"]


def test_the_report_reads_a_finished_round_as_the_loop_reads_it_back_its_steps_results(run):
    """`evoenv report` takes each finished step as a `stage.Result`, read back from its record's
    marker by the loop's own reader (`stage.round_results`): train's summary is its manifest's
    `summary`, sample's its rows; an unreadable marker is named and its step not finished."""
    r1 = run / "round-01"
    got = RunFiles(run).results("round-01")
    assert got == round_results(r1, round_steps())  # the same Results, read the same way
    assert list(got) == [st.name for st in round_steps() if not st.per_run]  # every step of round 1 finished
    assert (got["train"].kind, got["train"].summary, got["train"].policy) == (
        "checkpoint",
        {"steps": 3, "mean_reward": 0.5},
        str(r1 / "train"),
    )
    assert got["sample"].summary == {"rows": 1} and got["sample"].marker == r1 / "sample" / "train.jsonl"
    assert got["pool update"].out == r1 and got["pool update"].summary["pool_size"] == 4
    assert RunFiles(run).results("round-02") == {}  # killed in validate: nothing finished
    (r1 / "evaluate" / "metrics.json").write_text('{"model": "r1/tr')  # torn
    n = compute(RunFiles(run))
    assert n["evaluation"]["rounds"] == [] and n["rounds"][0]["steps"]["evaluate"] == "partial"
    assert {
        "path": "round-01/evaluate/metrics.json",
        "line": None,
        "message": "not a readable JSON file; ignored",
    } in n["problems"]


def test_a_torn_line_in_the_middle_is_skipped_and_the_lines_around_it_read(run):
    path = run / "round-01" / "validate" / "verdicts.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = lines[1][:25] + "\n"  # beta's verdict torn
    path.write_text("".join(lines))
    before = path.read_bytes()
    n = compute(RunFiles(run))
    v = n["funnel"][0]["stages"]["validate"]
    assert (v["entered"], v["admitted"], v["rejected"]) == (3, 2, 1)  # lines 1, 3 and 4 still read
    torn = [p for p in n["problems"] if p["path"] == "round-01/validate/verdicts.jsonl"]
    assert [p["line"] for p in torn] == [2] and "torn line" in torn[0]["message"]
    assert path.read_bytes() == before  # the report never writes into the run


def test_pool_over_rounds(run):
    p = compute(RunFiles(run))["pool"]
    assert p["start"] == {"round": 0, "pool_size": 4, "composition": {"seed": 4, "composite": 0, "synthesized": 0}}
    r1, r2 = p["rounds"]
    assert (r1["pool_size"], r1["joined"], r1["retired_too_easy"], r1["retired_too_hard"]) == (4, 1, 1, 0)
    assert r1["composition"] == {"seed": 3, "composite": 0, "synthesized": 1}
    assert r1["retired"][0]["name"] == "C" and r1["retired"][0]["line"] == 3
    assert r2["pool_size"] is None and r2["composition"] is None  # killed before its pool update


def test_calibration_curves_of_the_pool(run):
    cal = compute(RunFiles(run))["calibration"]
    assert cal["after_round"] == 1 and cal["band"] == [0.15, 0.85]
    by = {e["name"]: e for e in cal["environments"]}
    assert [(c["level"], c["pass_rate"]) for c in by["A"]["curve"]] == [(1, 0.95), (4, 0.8), (7, 0.5), (10, 0.2)]
    assert [c["guess_rate"] for c in by["A"]["curve"]] == [0.25] * 4  # beside each pass rate
    assert by["A"]["levels"] == [4, 7] and by["A"]["measured"]
    assert not by["B"]["measured"] and by["B"]["levels"] == list(range(1, 11))
    assert by["D"]["curve"] == [] and by["D"]["band"] is None  # missing fields are missing, not a crash
    assert by["g00000_alpha"]["origin"] == "synthesized" and by["g00000_alpha"]["joined_round"] == 1


def test_calibration_axes_span_the_levels_measured():
    from evoenv_cli.report.figures import level_span

    seed = {"levels": list(range(1, 11)), "curve": [{"level": lv, "pass_rate": 0.1} for lv in (1, 2, 3)]}
    assert level_span([seed, {"levels": [2], "curve": []}]) == (1, 3)
    assert level_span([{"levels": [4, 7], "curve": []}]) == (4, 7)  # nothing measured: the levels named
    assert level_span([]) == (1, 10)


def test_training_curves(run):
    tr = compute(RunFiles(run))["training"]
    assert [(s["step"], s["reward"], s["reward_std"], s["zero_std_share"]) for s in tr["steps"]] == [
        (1, 0.25, 0.4, 0.5),
        (2, 0.5, 0.3, 0.25),
        (3, 0.75, 0.2, 0.0),
    ]
    # the score's own share beside the weighted sum's (a record from before it was logged: None)
    assert [s["score_zero_std_share"] for s in tr["steps"]] == [1.0, 0.5, None]
    assert tr["steps"][1]["per_env"]["g00000_alpha"]["pass_rate"] == 0.25
    assert tr["rounds"] == [
        {
            "round": 1,
            "finished": True,
            "steps": 3,
            "first_global_step": 1,
            "mean_reward": 0.5,
            "mean_zero_std_share": 0.25,
            "mean_score_zero_std_share": 0.75,
        }
    ]
    assert tr["env_pass_rate_by_round"] == {"A": {"1": 0.625}, "B": {"1": 0.5}, "g00000_alpha": {"1": 0.25}}


def test_evaluation_with_baseline_and_delta(run):
    ev = compute(RunFiles(run))["evaluation"]["rounds"]
    assert len(ev) == 1 and ev[0]["baseline_model"] == "m0"
    assert ev[0]["headline"]["overall"] == {"model": 0.4, "baseline": 0.3, "delta": 0.1}
    assert ev[0]["headline"]["benchmarks (mean)"] == {"model": 0.3, "baseline": 0.35, "delta": -0.05}
    src = ev[0]["sources"]
    assert src["environment:A"]["delta"] == 0.25 and src["benchmark:bench.jsonl"]["baseline"] == 0.35


def test_did_it_learn_comes_first_with_intervals_and_the_start_as_round_0(run, tmp_path):
    path = run / "round-01" / "train" / "metrics.jsonl"  # as a train that logged no score-only share
    records = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "train/zero_variance_share"}) + "\n" for r in records)
    )
    ln = compute(RunFiles(run))["learning"]
    assert [r["round"] for r in ln["rounds"]] == [0, 1]
    start, r1 = ln["rounds"]
    assert (start["model"], start["pass@1"], start["ci95"], start["items"]) == ("m0", 0.3, [0.14, 0.52], 20)
    assert (r1["pass@1"], r1["ci95"], r1["delta"]) == (0.4, [0.2, 0.6], 0.1)
    assert r1["zero_variance"] == 0.25 and r1["zero_variance_of"] == "reward"  # no score-only share logged
    assert ln["verdict"].endswith("the 95% intervals overlap, so this run cannot tell the change from noise")
    html = build(run, tmp_path / "report").index.read_text()
    top = html[: html.index("id='funnel'")]
    assert "Did it learn?" in top and "0.200 – 0.600" in top and "0.140 – 0.520" in top and "0 (start)" in top
    assert "learning.png" in top and html.index("id='learning'") < html.index("id='rounds'")


def test_the_verdict_reads_the_paired_interval_of_the_change_when_evaluate_gave_one(run, tmp_path):
    path = run / "round-01" / "evaluate" / "metrics.json"
    m = json.loads(path.read_text())
    for paired, words in (
        ([0.02, 0.18], "better, and the paired 95% interval of the change, [+0.020, +0.180], is above 0"),
        ([-0.05, 0.25], "holds 0, so this run cannot tell the change from noise"),
    ):
        path.write_text(json.dumps({**m, "delta_ci95": {"overall pass@1": paired}}))
        ln = compute(RunFiles(run))["learning"]
        assert ln["rounds"][1]["delta_ci95"] == paired and ln["verdict"].endswith(words)
    html = build(run, tmp_path / "report").index.read_text()
    assert "Δ 95% (paired)" in html and "-0.050 – +0.250" in html


def test_the_score_zero_variance_share_is_preferred_where_train_logged_it(run):
    path = run / "round-01" / "train" / "metrics.jsonl"
    records = [json.loads(x) for x in path.read_text().splitlines()]
    for rec, share in zip(records, (1.0, 0.5, 0.0)):
        rec["train/zero_variance_share"] = share
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    r1 = compute(RunFiles(run))["learning"]["rounds"][1]
    assert r1["zero_variance"] == 0.5 and r1["zero_variance_of"] == "score"


def test_synthesis_yield_by_topic_and_parent(run):
    syn = compute(RunFiles(run))["synthesis"]
    assert syn["total"] == {
        "generations": 8,
        "parsed": 5,
        "validate": 4,
        "review": 2,
        "dedupe": 2,
        "calibrate": 1,
        "joined": 1,
    }
    assert syn["steps"] == ["generations", "parsed", "validate", "review", "dedupe", "calibrate", "joined"]
    topic = {r["key"]: r for r in syn["by_topic"]}
    assert {k: topic["graphs"][k] for k in ("generations", "parsed", "validate", "review", "joined", "yield")} == {
        "generations": 3,
        "parsed": 3,
        "validate": 3,
        "review": 2,
        "joined": 1,
        "yield": 0.3333,
    }
    assert topic["strings"]["generations"] == 4 and topic["strings"]["validate"] == 1  # delta rejected; eps not yet
    parent = {r["key"]: r for r in syn["by_parent"]}
    assert parent["A"]["generations"] == 5 and parent["A"]["joined"] == 1 and parent["C"]["joined"] == 0


def test_an_older_run_that_calibrated_first_reads_in_its_own_order(tmp_path):
    old = make_run(tmp_path / "old", calibrate_first=True)
    n = compute(RunFiles(old))
    f1 = n["funnel"][0]
    assert f1["contract_order"] == ["calibrate", "dedupe"]
    assert [(s["step"], s["synthesized"], s["composite"]) for s in f1["steps"]][4:] == [
        ("candidates", 2, 2),
        ("calibrate", 1, 1),
        ("dedupe", 1, 0),
        ("joined", 1, 0),
    ]
    ex = f1["stages"]["dedupe"]["reasons"][0]["examples"][0]
    assert (ex["line"], ex["source"]) == (2, "round-01/calibrate/envs/par__A__B.py")
    steps = list(n["rounds"][0]["steps"])
    assert steps[steps.index("calibrate") + 1] == "dedupe"
    assert n["synthesis"]["total"] == {
        "generations": 8,
        "parsed": 5,
        "validate": 4,
        "review": 2,
        "calibrate": 1,
        "dedupe": 1,
        "joined": 1,
    }
    # round 2 reached neither contract: resumed now, it would run the loop's order; the page
    # says which round ran (or will run) which
    page = build(old).index.read_text()
    assert "round 1: generations → parsed → validate → review → (+ composites) → calibrate → dedupe → joined" in page
    assert "round 2: generations → parsed → validate → review → (+ composites) → dedupe → calibrate → joined" in page


def test_the_contract_order_is_the_one_each_round_recorded_in_loop_json(tmp_path):
    from evoenv_cli.report.numbers import contract_order, loop_order

    root = tmp_path / "run"
    r1, r2, r3 = (root / f"round-0{k}" for k in (1, 2, 3))
    for d in (r1, r2, r3):  # both admitted everything: the verdicts alone could not tell
        for stage in ("calibrate", "dedupe"):
            jsonl(d / stage / "verdicts.jsonl", [verdict("g00000_alpha.py", True, "", "ok")])
    write_json(r1 / "loop.json", {"stages": {"synthesize": {}, "calibrate": {}, "dedupe": {}}})
    write_json(r2 / "loop.json", {"stages": {"synthesize": {}, "dedupe": {}, "calibrate": {}}})
    write_json(r3 / "loop.json", {"stages": {"synthesize": {}}})  # stopped before either
    run = RunFiles(root)
    assert contract_order(run, 1) == ("calibrate", "dedupe")
    assert contract_order(run, 2) == ("dedupe", "calibrate")
    assert contract_order(run, 3) == loop_order() == ("dedupe", "calibrate")  # the records' place
    for d in (r1, r2, r3):  # a run from before loop.json: every round calibrated first
        (d / "loop.json").unlink()
    assert [contract_order(RunFiles(root), k) for k in (1, 2, 3)] == [("calibrate", "dedupe")] * 3
    assert contract_order(RunFiles(root), 4) == loop_order()  # one not reached: a resume's order


def test_the_report_writes_figures_pages_and_numbers(run, tmp_path):
    report = build(run)
    out = run / "report"
    assert report.index == out / "index.html"
    figs = sorted(p.name for p in (out / "figures").iterdir())
    assert figs == [
        "calibration.png",
        "evaluation.png",
        "funnel-round-01.png",
        "funnel-round-02.png",
        "learning.png",
        "pool.png",
        "synthesis.png",
        "training.png",
    ]
    for f in figs:
        assert (out / "figures" / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = report.index.read_text()
    assert "round-02/synthesize/generations.jsonl:3" in page and "torn last line" in page
    assert "<script>" not in page
    assert "review → (+ composites) → dedupe → calibrate → joined" in page and "enter at dedupe" in page
    examples = list((out / "examples").iterdir())
    assert examples
    texts = "".join(p.read_text() for p in examples)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in texts and "<script>" not in texts
    assert "NAME = &quot;g00003_delta&quot;" in texts  # the rejected file's source is shown
    assert json.loads((out / "numbers.json").read_text())["funnel"][0]["round"] == 1
    # written again, it replaces the earlier report whole
    (out / "figures" / "stale.png").write_bytes(b"x")
    build(run)
    assert not (out / "figures" / "stale.png").exists()


def test_fields_of_the_wrong_kind_are_shown_as_missing(run):
    """Other tools may write these files too: a field of an unexpected kind is not a crash."""
    r1 = run / "round-01"
    write_json(r1 / "evaluate" / "metrics.json", {"overall": [1], "environments": "A", "baseline": 3})
    write_json(r1 / "train" / "train-manifest.json", {"summary": {"steps": "three"}})
    write_json(r1 / "pool-update.json", {"pool_size": "4", "joined": "g00000_alpha", "retired": {"C": 1}})
    jsonl(r1 / "train" / "metrics.jsonl", [{"step": 1, "reward": "high", "per_env": ["A"]}, {"step": "2"}])
    jsonl(run / "rounds.jsonl", [{"round": "1", "evaluation": 0.5}, {"round": 1, "evaluation": [0.5]}])
    jsonl(
        run / "pool" / "index.jsonl",
        [
            {"name": "A", "calibration": {"levels": 5, "curve": [1], "band": "wide"}},
            {"calibration": "none"},
            {"name": "B", "calibrate": "x"},
        ],
    )
    jsonl(r1 / "synthesize" / "generations.jsonl", [{"outcome": "ok", "file": "x.py", "parents": "AB", "topic": 7}])
    jsonl(r1 / "compose" / "verdicts.jsonl", [{"file": ["x.py"], "admitted": True}, {"file": "y.py", "name": [1]}])
    jsonl(r1 / "dedupe" / "index.jsonl", [{"name": {"a": 1}, "origin": "compose"}])
    report = build(run)
    n = report.numbers
    assert n["evaluation"]["rounds"][0]["headline"]["overall"] == {"model": None, "baseline": None, "delta": None}
    assert n["training"]["steps"][0]["reward"] is None and n["training"]["rounds"][0]["steps"] == 1
    assert n["pool"]["rounds"][0]["joined"] == 0 and n["pool"]["rounds"][0]["retired"] == []
    assert n["calibration"]["environments"][0]["levels"] == [] and n["calibration"]["environments"][0]["band"] is None
    assert {r["key"]: r["generations"] for r in n["synthesis"]["by_parent"]}["(none)"] == 1  # not "A", "B"
    assert report.index.is_file()


@pytest.mark.slow  # draws every figure through the command: ~16 s
def test_cli_report_prints_the_path_and_json(run, evoenv):
    r = evoenv("report", run)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(run / "report" / "index.html")
    assert "generations.jsonl:3" in r.stderr  # the torn line, named on stderr too
    r = evoenv("report", run, "--json", "--out", run.parent / "elsewhere")
    assert r.returncode == 0, r.stderr
    numbers = json.loads(r.stdout)
    assert numbers["report"] == str(run.parent / "elsewhere" / "index.html")
    assert numbers["funnel"] == compute(RunFiles(run))["funnel"]
    assert (run.parent / "elsewhere" / "index.html").is_file()


def test_bad_input_is_one_line_and_exit_2(tmp_path, evoenv):
    (tmp_path / "notarun").mkdir()
    (tmp_path / "notarun" / "x.txt").write_text("hello")
    for target, says in (
        (tmp_path / "notarun", "not an evoenv run"),
        (tmp_path / "missing", "no such folder"),
        (tmp_path / "notarun" / "x.txt", "not a folder"),
    ):
        r = evoenv("report", target)
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and says in r.stderr and "Traceback" not in r.stderr
        assert str(target) in r.stderr.replace("\n", "")
    run = make_run(tmp_path / "run")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "thesis.tex").write_text("mine")
    r = evoenv("report", run, "--out", tmp_path / "busy")
    assert r.returncode == 2 and "not an evoenv report" in r.stderr
    assert (tmp_path / "busy" / "thesis.tex").read_text() == "mine"


def test_the_terminal_tables_show_the_funnel_and_the_side_by_side_metrics():
    import io

    from rich.console import Console

    from evoenv_cli.report import terminal

    def text(table):
        console = Console(width=200, record=True, file=io.StringIO())
        console.print(table)
        return console.export_text()

    shown = text(
        terminal.funnel(
            {
                "stage": "calibrate",
                "entered": 5,
                "admitted": 3,
                "admitted_uncalibrated": 1,
                "rejected_by_stage": {"flat": 2, "out_of_band": 0},
            }
        )
    )
    for row in ("calibrate funnel", "entered", "rejected: flat", "admitted, calibrated", "admitted uncalibrated"):
        assert row in shown
    assert [
        line.strip("│ ").split()[-1] for line in shown.splitlines() if "rejected" in line or "admitted" in line
    ] == ["2", "0", "2", "1"]
    rows = [("pass@1", 0.25, 0.125, 0.125), ("  edit_distance", 0.5, None, None)]
    shown = text(terminal.evaluation(rows, "policy", "start"))
    assert "baseline start" in shown and "+0.125" in shown and "0.500" in shown and "-" in shown
    assert "baseline" not in text(terminal.evaluation(rows, "policy", None))


def bound_line(checkpoint: str, lower: float, **extra) -> dict:
    from dataclasses import asdict

    from evoenv_cli.stages.bound import BoundReport

    report = BoundReport(
        checkpoint=checkpoint,
        kind="tinylora-quantized",
        form="kl-inverse (Langford-Seeger) Occam bound",
        n=2048,
        errors=1400,
        empirical_error=1400 / 2048,
        accuracy=648 / 2048,
        accuracy_interval=(0.296, 0.337),
        description_length_bits=37.2,
        bits={"total": 37.2},
        trained_parameters=13,
        delta=0.05,
        temperature=0.7,
        threshold=1.0,
        complexity=0.0140,
        risk_bound=1 - lower,
        accuracy_lower_bound=lower,
        base_accuracy=0.230,
        base_accuracy_interval=(0.212, 0.249),
        levels={"number_in_words": [1, 2, 3]},
        code="c0de",
        statement=f"With probability >= 0.95 ... correctly with probability >= {lower:.3f}.",
    )
    return {**asdict(report), "recorded": "2026-12-02T10:00:00Z", **extra}


def test_a_progressive_run_reports_each_checkpoints_latest_bound(tmp_path):
    """`evoenv bound` appends to bounds.jsonl beside its code; the report shows each checkpoint's
    latest bound next to the base model's accuracy, and a torn line is named, not fatal."""
    run = tmp_path / "progressive"
    jsonl(
        run / "p" / "bounds.jsonl",
        [bound_line("runs/p/distill/quantized", 0.201), bound_line("runs/p/lora", 0.0, kind="lora")],
    )
    with (run / "p" / "bounds.jsonl").open("a") as f:  # the same checkpoint bounded again, then a torn line
        f.write(json.dumps(bound_line("runs/p/distill/quantized", 0.241)) + "\n" + '{"checkpoint": "runs/p/x"')
    report = build(run)
    b = report.numbers["bounds"]
    assert [(x["checkpoint"], x["accuracy_lower_bound"], x["above_base"]) for x in b] == [
        ("runs/p/lora", 0.0, False),
        ("runs/p/distill/quantized", 0.241, True),
    ]
    page = report.index.read_text()
    assert "Generalization bound" in page and "runs/p/distill/quantized" in page
    assert "0.316 [0.296, 0.337]" in page and "0.241" in page and "0.230 [0.212, 0.249]" in page
    assert "with probability &gt;= 0.241" in page and "cost 0 bits" in page
    assert "p/bounds.jsonl:4" in page and "torn last line" in page
    # a run without any bound says so
    assert "no bound recorded" in build(make_run(tmp_path / "run")).index.read_text()
