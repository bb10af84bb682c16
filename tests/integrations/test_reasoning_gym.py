"""reasoning-gym as evoenv uses it: `evaluate --bench rg:TASK[:N[:KEY=VALUE,...]]` items at
fixed held-out seeds, scored by the task's own score_answer (the real library, no stand-in)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ScriptedBackend

from evoenv_cli.artifacts import prepare_out_dir
from evoenv_cli.config import AnswerConfig, EvaluateConfig
from evoenv_cli.errors import InputError
from evoenv_cli.integrations import reasoning_gym_tasks as rg
from evoenv_cli.stages import evaluate

reasoning_gym = pytest.importorskip("reasoning_gym", reason="the [rg] extra is part of `make setup`")

SUMS = "rg:chain_sum:6:min_terms=2,max_terms=2,max_digits=1"
SUFFIX = "\n\n" + AnswerConfig().bench_text


@pytest.mark.parametrize(
    "spec, task, size, config",
    [
        ("rg:chain_sum", "chain_sum", rg.DEFAULT_SIZE, {}),
        ("rg:chain_sum:8", "chain_sum", 8, {}),
        ("rg:chain_sum::allow_negation=true", "chain_sum", rg.DEFAULT_SIZE, {"allow_negation": True}),
        (
            "rg:chain_sum:3:min_terms=2, max_terms=3,name=x",
            "chain_sum",
            3,
            {"min_terms": 2, "max_terms": 3, "name": "x"},
        ),
    ],
)
def test_spec_parsing(spec, task, size, config):
    s = rg.parse_spec(spec)
    assert (s.task, s.size, s.config, s.spec) == (task, size, config, spec)


@pytest.mark.parametrize(
    "spec, needle",
    [
        ("rg:", "expected rg:TASK"),
        ("rg:chain_sum:0", "positive integer"),
        ("rg:chain_sum:many", "positive integer"),
        ("rg:chain_sum:4:min_terms", "KEY=VALUE"),
        ("rg:chain_sum:4:seed=3", "seed is set by evoenv"),
        ("rg:chain_sun:4", "no reasoning-gym task named 'chain_sun' (did you mean 'chain_sum'?)"),
        ("rg:chain_sum:4:min_termz=2", "rg:chain_sum:4:min_termz=2: reasoning-gym rejects this config"),
        ("rg:chain_sum:4:min_terms=5,max_terms=2", "reasoning-gym rejects this config"),
    ],
)
def test_bad_specs_are_input_errors(spec, needle):
    with pytest.raises(InputError) as e:
        evaluate.load_benches([spec])
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_items_are_fixed_held_out_and_configured():
    a, b = evaluate.load_benches([SUMS], seed=0)[0], evaluate.load_benches([SUMS], seed=0)[0]
    assert [r["question"] for r in a.rows] == [r["question"] for r in b.rows] and len(a.rows) == 6
    assert a.digest() == b.digest() and a.path is None and a.label == SUMS
    assert a.rg_items.seed == evaluate.RG_SEED_BASE >= 2**31  # like every held-out seed
    for e in a.rg_items.entries:
        assert e["metadata"]["num_terms"] == 2 and e["metadata"]["num_digits"] == 1
    # reasoning-gym's own seeding: item i of dataset seed S is what create_dataset gives there
    direct = reasoning_gym.create_dataset("chain_sum", size=6, seed=2**31, min_terms=2, max_terms=2, max_digits=1)
    assert [r["question"] for r in a.rows] == [direct[i]["question"] for i in range(6)]
    other = evaluate.load_benches([SUMS], seed=1)[0]
    assert other.digest() != a.digest()


def test_evaluate_scores_with_the_tasks_own_score_answer(tmp_path):
    bench = evaluate.load_benches([SUMS])[0]
    refs = [r["answer"] for r in bench.rows]

    def reply(text, pid, j):  # one batch, items in order: the prompt id is the item's index
        assert text == bench.rows[pid]["question"] + SUFFIX
        k, ref = pid, refs[pid]
        return {
            0: f"<answer>{ref}</answer>",  # exact
            1: f"<answer>+0{ref}.00</answer>",  # chain_sum's own tolerance: full credit
            2: f"<answer>x = {ref}</answer>",  # partial credit: wrong for pass@1
            3: f"<answer>{int(ref) + 1}</answer>",  # wrong
            4: f"{ref}",  # no answer block
        }.get(k, f"<answer>{ref}</answer>" if j == 0 else "<answer>nope</answer>")

    out = prepare_out_dir(tmp_path / "ev", resume=False, clean=False, envs=False)
    m = evaluate.run(
        out, EvaluateConfig(samples=2), evaluate.ModelSpec("p", lambda: ScriptedBackend(reply)), benches=[bench]
    )
    s = m["benchmarks"][SUMS]
    assert s["items"] == 6 and s["samples"] == 12
    assert s["pass@1"] == round((1 + 1 + 0 + 0 + 0 + 0.5) / 6, 4)
    assert s["checked_by"] == {"score_answer": 10} and s["no_answer_share"] == round(2 / 12, 4)
    partial = len(refs[2]) / len(f"x = {refs[2]}")
    assert s["mean_score"] == round((1 + 1 + partial + 0 + 0 + 0.5) / 6, 4)
    assert s["score_answer_errors"] == 0
    assert m["reasoning_gym"][SUMS] == {
        "task": "chain_sum",
        "size": 6,
        "seed": 2**31,
        "config": {"min_terms": 2, "max_terms": 2, "max_digits": 1},
        "reasoning_gym": rg.version(),
    }
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    one = next(r for r in rows if r["item"] == f"{SUMS}:1")
    assert one["score"] == 1.0 and one["rg_score"] == 1.0 and one["status"] == "score_answer"
    two = next(r for r in rows if r["item"] == f"{SUMS}:2")
    assert two["score"] == 0.0 and 0 < two["rg_score"] < 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["bench_hashes"] == {SUMS: bench.digest()}


def test_a_scorer_that_raises_scores_zero_with_the_reason(tmp_path, monkeypatch):
    bench = evaluate.load_benches(["rg:chain_sum:2"])[0]

    def broken(answer, entry):
        raise RuntimeError("boom")

    monkeypatch.setattr(bench.rg_items.dataset, "score_answer", broken)
    out = prepare_out_dir(tmp_path / "ev", resume=False, clean=False, envs=False)
    m = evaluate.run(
        out,
        EvaluateConfig(samples=1),
        evaluate.ModelSpec("p", lambda: ScriptedBackend(lambda t, p, j: "<answer>1</answer>")),
        benches=[bench],
    )
    assert m["benchmarks"]["rg:chain_sum:2"]["pass@1"] == 0.0
    assert m["benchmarks"]["rg:chain_sum:2"]["score_answer_errors"] == 2
    row = json.loads((out / "samples.jsonl").read_text().splitlines()[0])
    assert row["status"] == "score_answer_error" and row["error"] == "RuntimeError: boom"


@pytest.mark.slow
def test_cli_rg_bench_with_a_real_tiny_model(tiny_model, tmp_path, evoenv):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("evaluate:\n  samples: 1\n  max_tokens: 8\n")
    r = evoenv(
        "evaluate",
        "--model",
        tiny_model,
        "--backend",
        "hf",
        "--bench",
        "rg:chain_sum:3",
        "--bench",
        SUMS,
        "--out",
        tmp_path / "ev",
        "--config",
        recipe,
    )
    assert r.returncode == 0, r.stderr
    metrics = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert set(metrics["benchmarks"]) == {"rg:chain_sum:3", SUMS}
    assert metrics["benchmarks"]["rg:chain_sum:3"]["items"] == 3 and metrics["overall"]["samples"] == 9
    assert "rg:chain_sum:3" in r.stderr and "results in" in r.stderr


def test_cli_unknown_task_exits_2_in_one_line(evoenv, tmp_path):
    r = evoenv("evaluate", "--model", "m", "--bench", "rg:chain_sun", "--out", "ev")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "did you mean 'chain_sum'" in r.stderr and not (tmp_path / "ev").exists()


def test_missing_library_says_how_to_install(tmp_path):
    code = (
        "import sys; sys.modules['reasoning_gym'] = None\n"
        "from evoenv_cli.stages import evaluate\n"
        "try:\n    evaluate.load_benches(['rg:chain_sum'])\n"
        "except Exception as e:\n    print(type(e).__name__, e)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        cwd=Path(__file__).parent,
    )
    assert r.stdout.startswith("InputError reasoning-gym is not installed") and "[rg]" in r.stdout
