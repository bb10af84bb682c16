import importlib.util
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import ROOT, SEEDS, ScriptedBackend

from evoenv_cli.artifacts import EnvLibrary, prepare_out_dir
from evoenv_cli.config import AnswerConfig, EvaluateConfig, SampleConfig
from evoenv_cli.envfile import EnvFile
from evoenv_cli.errors import InputError
from evoenv_cli.runtime.workers import SandboxWorkers
from evoenv_cli.stages import evaluate, sample

BENCH = ROOT / "tests" / "fixtures" / "bench"
ENVS = ("register_machine", "grid_shortest_path")
CFG = EvaluateConfig(instances=4, samples=2)
ENV_SUFFIX = "\n\n" + AnswerConfig().task_text
BENCH_SUFFIX = "\n\n" + AnswerConfig().bench_text

# What the scripted model answers to each benchmark question (None: no <answer> block).
REPLIES = {
    "What is 1 divided by 2? Give the exact value.": "0.5",  # == \frac{1}{2} by math-verify
    "A bag holds 3 red and 3 blue marbles. What is the probability of drawing a red one? Give a decimal.": "\\frac{1}{2}",
    "What is 6 times 7?": "42",
    "What is 5 minus 8?": "3",  # wrong
    "What is 3/4 + 1/4 + 1/3? Give a reduced fraction.": "4/3",
    "What is the square root of 144?": "12.0",
    "What is the capital of France? Answer with one word.": "  paris ",  # exact, normalized
    "What colour is a clear daytime sky? Answer with one word.": "Blue",
    "Which day comes after Monday? Answer with one word.": "Wednesday",  # wrong
    "Which planet is closest to the Sun? Answer with one word.": None,
}


def load(name):
    spec = importlib.util.spec_from_file_location(f"ev_{name}", SEEDS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def key():
    """held-out prompt text -> (env, reference) for every instance evaluate can ask about."""
    out = {}
    for name in ENVS:
        m = load(name)
        for i in range(CFG.instances):
            seed = sample.instance_seed(CFG.seed, name, i, split="heldout")
            for level in range(1, 11):
                inst = json.loads(json.dumps(m.generate(seed, level)))
                out[m.prompt(inst)] = (name, m.solve(inst))
    return out


def scripted(key, env_right, bench=True):
    """Right on env instances where env_right(name, j) says so; benchmark replies from REPLIES
    (or always wrong when bench is False)."""

    def reply(text, pid, j):
        if text.endswith(ENV_SUFFIX):
            name, ref = key[text[: -len(ENV_SUFFIX)]]
            return f"hmm <answer>wrong</answer> so <answer>{ref if env_right(name, j) else ref + '9'}</answer>"
        answer = REPLIES[text[: -len(BENCH_SUFFIX)]] if bench else "no idea"
        return "I give up." if answer is None else f"Thinking. <answer>{answer}</answer>"

    return reply


def library(tmp_path, calibrated=None):
    """A stage output folder holding ENVS; `calibrated` {name: levels} goes in its index.jsonl."""
    lib = tmp_path / "lib"
    (lib / "envs").mkdir(parents=True)
    rows = []
    for n in ENVS:
        shutil.copy(SEEDS / f"{n}.py", lib / "envs")
        if calibrated and n in calibrated:
            env = EnvFile.from_path(lib / "envs" / f"{n}.py")
            rows.append({"env_id": env.env_id, "name": n, "calibration": {"levels": calibrated[n]}})
    (lib / "index.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return EnvLibrary.open(lib)


def benches():
    return evaluate.load_benches([BENCH / "math.jsonl", BENCH / "words.jsonl"])


def read(out):
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    return rows, json.loads((out / "metrics.json").read_text())


def test_pass_at_1_per_env_and_bench_from_one_batch(tmp_path, key):
    lib = library(tmp_path, calibrated={"register_machine": [3, 4]})
    backend = ScriptedBackend(scripted(key, lambda name, j: name == "register_machine" or j == 0))
    out = prepare_out_dir(tmp_path / "out", resume=False, clean=False, envs=False)
    m = evaluate.run(out, CFG, evaluate.ModelSpec("policy", lambda: backend), library=lib, benches=benches())
    assert len(backend.calls) == 1 and len(backend.calls[0]) == 2 * CFG.instances + 10
    rows, metrics = read(out)
    assert metrics == json.loads(json.dumps(m))
    envs, bs = metrics["environments"], metrics["benchmarks"]
    assert envs["register_machine"]["pass@1"] == 1.0  # last <answer> block is the one scored
    assert envs["grid_shortest_path"]["pass@1"] == 0.5  # right on sample 0 of 2
    assert envs["register_machine"]["levels"] == [3, 4]  # calibrated levels from index.jsonl
    assert set(envs["grid_shortest_path"]["levels"]) <= set(range(1, 11))
    assert bs["math.jsonl"]["pass@1"] == round(5 / 6, 4)  # \frac{1}{2}=0.5 both ways, 4/3, 12.0
    assert bs["math.jsonl"]["checked_by"]["math_verify"] >= 6
    assert bs["words.jsonl"]["pass@1"] == 0.5 and bs["words.jsonl"]["no_answer_share"] == 0.25
    for s in (*envs.values(), *bs.values()):
        assert s["n"] == 2 and s["samples"] == 2 * s["items"]
    o = metrics["overall"]
    assert o["items"] == 18 and o["samples"] == 36
    assert o["pass@1"] == round((4 * 1.0 + 4 * 0.5 + 5 + 2) / 18, 4)
    assert o["env_mean"] == 0.75 and o["bench_mean"] == round((5 / 6 + 0.5) / 2, 4)
    assert o["no_answer_share"] == round(2 / 36, 4)
    assert metrics["model"] == "policy" and metrics["config"]["samples"] == 2
    assert metrics["baseline"] is None and metrics["delta"] is None
    seeds = metrics["seeds"]["environments"]
    assert all(s >= 2**31 for v in seeds.values() for s in v) and len(seeds["register_machine"]) == 4
    assert len(rows) == 36 and {r["model"] for r in rows} == {"policy"}
    half = next(r for r in rows if r["item"] == "math.jsonl:0")
    assert half["answer"] == "0.5" and half["score"] == 1.0 and half["status"] == "math_verify"
    assert half["reference"] == "\\frac{1}{2}" and half["index"] == 0
    assert half["prompt"][-1]["content"].endswith(AnswerConfig().bench_text)
    env_row = next(r for r in rows if r["source"] == "grid_shortest_path" and r["sample"] == 1)
    assert env_row["score"] == 0.0 and env_row["status"] == "scored" and env_row["seed"] >= 2**31
    assert env_row["prompt"][-1]["content"].endswith(AnswerConfig().task_text)
    assert (out / "manifest.json").is_file()


def test_heldout_seeds_never_meet_training_seeds(tmp_path):
    lib = library(tmp_path)
    with SandboxWorkers(workers=2) as pool:
        train = sample.run(lib, SampleConfig(per_env=64, seed=0), pool)
        items, skipped = evaluate.env_items(lib, EvaluateConfig(instances=64, seed=0), SampleConfig(), pool)
    assert not skipped and len(items) == 128
    train_seeds = {(r["env_name"], r["seed"]) for r in train.rows}
    held = {(it.source, it.seed) for it in items}
    assert all(s < 2**31 for _, s in train_seeds) and all(s >= 2**31 for _, s in held)
    assert not train_seeds & held
    # same low 31 bits, top bit set: a held-out seed is never any base seed's training seed
    assert {(n, s & 0x7FFFFFFF) for n, s in held} == train_seeds
    assert sorted({it.difficulty for it in items}) == list(range(1, 11))  # spread over 1..10


def test_exact_match_when_math_verify_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(evaluate, "load_math_verify", lambda: None)
    out = prepare_out_dir(tmp_path / "out", resume=False, clean=False, envs=False)
    m = evaluate.run(
        out,
        EvaluateConfig(samples=1),
        evaluate.ModelSpec("p", lambda: ScriptedBackend(scripted({}, None))),
        benches=benches(),
    )
    assert m["math_verify"] is False
    assert m["benchmarks"]["math.jsonl"]["pass@1"] == round(1 / 6, 4)  # only "42" == "42"
    assert m["benchmarks"]["math.jsonl"]["checked_by"] == {"exact": 6}
    assert m["benchmarks"]["words.jsonl"]["pass@1"] == 0.5
    assert m["environments"] == {}


def test_answer_checker_equivalence_and_fallback():
    c = evaluate.AnswerChecker()
    assert c.check("0.5", "\\frac{1}{2}") == (True, "math_verify")
    assert c.check("\\frac{1}{2}", "0.5") == (True, "math_verify")
    assert c.check("$\\frac{1}{2}$", "0.5")[0] and c.check("\\boxed{42}", "42")[0]
    assert c.check("2\\pi", "2") == (False, "math_verify")
    assert c.check(" New   york", "new york") == (True, "exact")
    assert c.check("stop", "pots") == (False, "exact")  # words never reach math-verify
    assert c.check(None, "1") == (False, "no_answer")
    with ThreadPoolExecutor(1) as ex:  # off the main thread: no signal.alarm, bounded ourselves
        assert ex.submit(c.check, "0.50", "\\frac{1}{2}").result() == (True, "math_verify")
    plain = evaluate.AnswerChecker(math_verify=None)
    assert plain.check("0.5", "\\frac{1}{2}") == (False, "exact") and plain.check("42", " 42")[0]


def test_baseline_gets_the_same_items_and_deltas(tmp_path, key):
    lib = library(tmp_path)
    order = []

    def factory(name, right):
        def build():
            order.append(name)
            return ScriptedBackend(scripted(key, lambda n, j: right, bench=right))

        return build

    cfg = EvaluateConfig(instances=2, samples=1)
    out = prepare_out_dir(tmp_path / "out", resume=False, clean=False, envs=False)
    evaluate.run(
        out,
        cfg,
        evaluate.ModelSpec("new", factory("new", True)),
        library=lib,
        benches=benches()[:1],
        baseline=evaluate.ModelSpec("old", factory("old", False)),
    )
    assert order == ["new", "old"]
    rows, metrics = read(out)
    assert metrics["model"] == "new" and metrics["baseline"]["model"] == "old"
    assert metrics["environments"]["register_machine"]["pass@1"] == 1.0
    assert metrics["baseline"]["environments"]["register_machine"]["pass@1"] == 0.0
    assert metrics["baseline"]["benchmarks"]["math.jsonl"]["pass@1"] == 0.0
    d = metrics["delta"]
    assert d["env register_machine"] == 1.0 and d["bench math.jsonl"] == round(5 / 6, 4)
    assert d["overall pass@1"] == metrics["overall"]["pass@1"]
    # the change's interval pairs the same items: every item better or equal, so above 0
    lo, hi = metrics["delta_ci95"]["overall pass@1"]
    assert 0 < lo <= d["overall pass@1"] <= hi <= 1
    assert set(metrics["overall"]["item_pass"]) == set(metrics["baseline"]["overall"]["item_pass"])
    new = [(r["item"], r["prompt"]) for r in rows if r["role"] == "model"]
    old = [(r["item"], r["prompt"]) for r in rows if r["role"] == "baseline"]
    assert new == old and len(new) == 2 * 2 + 6
    table = {name.strip(): (a, b, delta) for name, a, b, delta in evaluate.table_rows(metrics)}
    assert table["overall pass@1"] == (metrics["overall"]["pass@1"], 0.0, d["overall pass@1"])
    assert table["no-answer share"][2] == metrics["overall"]["no_answer_share"] - 0.0
    # same inputs, same scripted models: byte-identical artifacts
    again = prepare_out_dir(tmp_path / "again", resume=False, clean=False, envs=False)
    evaluate.run(
        again,
        cfg,
        evaluate.ModelSpec("new", factory("new", True)),
        library=lib,
        benches=benches()[:1],
        baseline=evaluate.ModelSpec("old", factory("old", False)),
    )
    for f in ("samples.jsonl", "metrics.json"):
        assert (out / f).read_bytes() == (again / f).read_bytes()


@pytest.mark.parametrize(
    "text, needle",
    [
        ('{"question": "q"}\n', 'bad.jsonl:1: a benchmark row needs an "answer"'),
        (
            '{"question": "q", "answer": "1"}\n{"answer": "2"}\n',
            'bad.jsonl:2: a benchmark row needs a non-empty "question"',
        ),
        ('{"question": "q", "answer": "1"}\n\nnot json\n', "bad.jsonl:3: not valid JSON"),
        ('["q", "a"]\n', "bad.jsonl:1: expected a JSON object"),
        ("", "bad.jsonl: no benchmark rows"),
    ],
)
def test_bad_bench_files_name_file_and_line(tmp_path, text, needle):
    (tmp_path / "bad.jsonl").write_text(text)
    with pytest.raises(InputError) as e:
        evaluate.load_bench(tmp_path / "bad.jsonl")
    assert needle in str(e.value)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--bench", "missing.jsonl"], "missing.jsonl: no such benchmark file"),
        (["--bench", "bad.jsonl"], 'bad.jsonl:2: a benchmark row needs an "answer"'),
        ([], "nothing to evaluate"),
        (["--library", "used-lib", "--out", "used"], "already holds results"),
    ],
)
def test_cli_bad_inputs_exit_2_in_one_line(evoenv, tmp_path, args, needle):
    (tmp_path / "bad.jsonl").write_text('{"question": "q", "answer": "1"}\n{"question": "q2"}\n')
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "metrics.json").write_text("{}")
    shutil.copytree(SEEDS, tmp_path / "used-lib")
    (tmp_path / "m").mkdir()  # a local model folder: the model is checked (before OUT) and found
    (tmp_path / "m" / "config.json").write_text("{}")
    if "--out" not in args:
        args = [*args, "--out", "ev"]
    r = evoenv("evaluate", "--model", "m", *args)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "ev").exists()


@pytest.mark.slow
def test_cli_real_tiny_model_through_hf(tiny_model, tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("evaluate:\n  instances: 2\n  samples: 1\n  max_tokens: 16\n")
    exe = Path(sys.executable).with_name("evoenv")
    r = subprocess.run(
        [
            exe,
            "evaluate",
            "--model",
            tiny_model,
            "--backend",
            "hf",
            "--library",
            SEEDS,
            "--bench",
            BENCH / "math.jsonl",
            "--baseline",
            tiny_model,
            "--out",
            tmp_path / "ev",
            "--config",
            recipe,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0, r.stderr
    metrics = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert len(metrics["environments"]) == 10 and metrics["benchmarks"]["math.jsonl"]["items"] == 6
    assert metrics["overall"]["samples"] == 26 and metrics["overall"]["pass@1"] <= 0.2
    assert metrics["delta"]["overall pass@1"] == 0.0  # same model, same seeds, same answers
    assert "delta" in r.stderr and "overall pass@1" in r.stderr and r.stdout == ""
    rows = (tmp_path / "ev" / "samples.jsonl").read_text().splitlines()
    assert len(rows) == 52


def test_the_paired_change_needs_the_same_items_on_both_sides():
    def res(items):
        return {"overall": {"item_pass": items}}

    assert evaluate.paired_change(res({"a": 1.0, "b": 0.0}), res({})) is None  # an older baseline
    assert evaluate.paired_change(res({"a": 1.0}), res({"b": 0.0})) is None
    lo, hi = evaluate.paired_change(res({"a": 1.0, "b": 1.0, "c": 0.5}), res({"a": 0.0, "b": 1.0, "c": 0.5, "d": 1.0}))
    assert 0 <= lo <= 1 / 3 <= hi <= 1  # d, asked of the baseline only, is left out


def test_the_round_line_gives_the_change_with_its_paired_interval():
    from evoenv_cli.loop import round_line
    from evoenv_cli.stages.evaluate import headline

    metrics = {
        "overall": {"pass@1": 0.3, "items": 54, "ci95": [0.2, 0.43]},
        "delta": {"overall pass@1": 0.1},
        "delta_ci95": {"overall pass@1": [0.02, 0.18]},
    }
    ev = headline(metrics)
    assert ev["delta_ci95"] == [0.02, 0.18]
    line = round_line({"round": 2, "admitted": {}, "evaluation": ev})
    assert "held-out pass@1 0.300 (95% interval 0.200-0.430, 54 items), 0.200 before training: +0.100" in line
    assert "(95% [+0.020, +0.180], paired)" in line
    del metrics["delta_ci95"]  # a baseline measured before item records: the change alone
    assert "paired" not in round_line({"round": 2, "admitted": {}, "evaluation": headline(metrics)})
