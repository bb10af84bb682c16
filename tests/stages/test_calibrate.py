import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SEEDS, ScriptedBackend

from evoenv_cli.artifacts import EnvLibrary, prepare_out_dir
from evoenv_cli.config import AnswerConfig, CalibrateConfig, RuntimeConfig, SampleConfig
from evoenv_cli.runtime.workers import SandboxWorkers
from evoenv_cli.stages import calibrate

ENVS = ("register_machine", "grid_shortest_path")
CFG = CalibrateConfig(instances=3, samples=6)
INSTRUCTION = "\n\n" + AnswerConfig().task_text


def load(name):
    spec = importlib.util.spec_from_file_location(f"cal_{name}", SEEDS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def answer_key(names=ENVS, cfg=CFG) -> dict[str, tuple[str, str, int]]:
    """prompt text -> (env, reference, level) for every instance calibrate can ask about."""
    key = {}
    for name in names:
        m = load(name)
        for level in range(1, 11):
            for i in range(2 * -(-cfg.max_samples // cfg.samples)):  # every instance a grown level may ask
                inst = json.loads(json.dumps(m.generate(calibrate.calibration_seed(cfg.seed, name, level, i), level)))
                key[m.prompt(inst)] = (name, m.solve(inst), level)
    return key


def solver(accuracy, key):
    """A scripted solver of known accuracy per (env, level): of the K samples of an instance,
    the first round(accuracy * K) are right. A wrong one appends "1" to the reference: an
    integer n becomes 10n + 1, never n (appending "0" leaves the answer 0 right as "00")."""

    def reply(text, pid, j):
        name, ref, level = key[text[: -len(INSTRUCTION)]]
        right = j < round(accuracy(name, level) * CFG.samples)
        return f"thinking... <answer>{ref if right else ref + '1'}</answer>"

    return reply


def library(tmp_path, names=ENVS):
    lib = tmp_path / "lib"
    lib.mkdir(exist_ok=True)
    for n in names:
        shutil.copy(SEEDS / f"{n}.py", lib)
    return EnvLibrary.open(lib)


def run(lib, backend, out):
    calibrate.run(lib, CFG, SampleConfig(), RuntimeConfig(), backend, prepare_out_dir(out, False, False), "m")
    return {json.loads(x)["name"]: json.loads(x) for x in (out / "verdicts.jsonl").read_text().splitlines()}


@pytest.fixture(scope="module")
def key():
    return answer_key()


def test_search_finds_the_band_and_refines_between_coarse_levels(tmp_path, key):
    backend = ScriptedBackend(solver(lambda n, lv: 1 - (lv - 1) / 9 if n == "register_machine" else 1.0, key))
    v = run(library(tmp_path), backend, tmp_path / "out")
    rm = v["register_machine"]
    assert rm["admitted"] and rm["levels"] == [2, 3, 4, 5, 6, 7, 8, 9]
    assert rm["curve"]["1"]["pass_rate"] == 1.0 and rm["curve"]["10"]["pass_rate"] == 0.0
    assert rm["curve"]["1"]["n"] == CFG.instances * CFG.samples and rm["no_answer_share"] == 0.0
    # a level whose interval straddles a band edge (0.83 beside 0.85) grew to the cap, whole
    # instances rounding it up; one whose interval lies inside the band stayed at M x K
    assert rm["curve"]["2"]["n"] >= CFG.max_samples and rm["curve"]["5"]["n"] == CFG.instances * CFG.samples
    assert rm["curve"]["5"]["ci95"] == [0.2903, 0.7097] and 0 <= rm["curve"]["5"]["guess_rate"] < 0.2
    assert rm["curve"]["5"]["p_value"] < CFG.alpha
    assert v["grid_shortest_path"]["stage"] == "too_easy"
    # one batch per sweep (coarse, refine, then one per growth pass), over all environments
    assert len(backend.calls) == 4
    index = [json.loads(x) for x in (tmp_path / "out" / "index.jsonl").read_text().splitlines()]
    assert index[0]["calibration"]["levels"] == rm["levels"]
    out = tmp_path / "rows.jsonl"
    exe = Path(sys.executable).with_name("evoenv")
    r = subprocess.run(
        [exe, "sample", tmp_path / "out", "-o", out, "-n", "16", "--difficulty-from", "index"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert {json.loads(x)["difficulty"] for x in out.read_text().splitlines()} == set(rm["levels"])


@pytest.mark.parametrize("accuracy, stage", [(0.0, "too_hard"), (0.5, "flat")])
def test_too_hard_and_flat(tmp_path, key, accuracy, stage):
    v = run(
        library(tmp_path, ("register_machine",)), ScriptedBackend(solver(lambda n, lv: accuracy, key)), tmp_path / "out"
    )
    assert v["register_machine"]["stage"] == stage and not v["register_machine"]["admitted"]
    assert "curve" in v["register_machine"]


def test_no_extractable_answer_is_a_format_problem_not_difficulty(tmp_path):
    v = run(library(tmp_path, ("register_machine",)), ScriptedBackend(lambda t, p, j: "42"), tmp_path / "out")
    rm = v["register_machine"]
    assert rm["stage"] == "no_answers" and rm["no_answer_share"] == 1.0
    assert rm["curve"]["1"]["pass_rate"] == 0.0  # what training would reward


def test_no_answer_responses_count_zero_like_the_training_reward(tmp_path, key):
    """Half the samples right, half without an answer: pass rate 0.5, not 1.0."""

    def reply(text, pid, j):
        name, ref, level = key[text[: -len(INSTRUCTION)]]
        return f"<answer>{ref}</answer>" if j % 2 == 0 else "I ran out of tokens before answer"

    v = run(library(tmp_path, ("register_machine",)), ScriptedBackend(reply), tmp_path / "out")["register_machine"]
    assert {lv["pass_rate"] for lv in v["curve"].values()} == {0.5}
    assert {lv["no_answer_share"] for lv in v["curve"].values()} == {0.5}
    assert v["admitted"] is False and v["stage"] == "flat"


def test_every_response_is_kept_with_its_score_and_prompt_ids_are_stable(tmp_path, key):
    backend = ScriptedBackend(solver(lambda n, lv: 1 - (lv - 1) / 9, key))
    seen = []
    real = backend.generate
    backend.generate = lambda prompts, sampling, prompt_ids=None: (
        seen.extend(prompt_ids) or real(prompts, sampling, prompt_ids=prompt_ids)
    )
    run(library(tmp_path, ("register_machine",)), backend, tmp_path / "out")
    rows = [json.loads(x) for x in (tmp_path / "out" / "responses.jsonl").read_text().splitlines()]
    v = json.loads((tmp_path / "out" / "verdicts.jsonl").read_text())
    assert len(rows) == sum(lv["n"] for lv in v["curve"].values())
    assert all(r["response"].startswith("thinking...") and r["score"] in (0.0, 1.0) for r in rows)
    seeds = {
        calibrate.calibration_seed(0, "register_machine", int(lv), i)
        for lv, c in v["curve"].items()
        for i in range(c["n"] // CFG.samples)  # a grown level asked more instances, in the same sequence
    }
    assert {r["seed"] for r in rows} == seeds
    # a prompt's id (so its sampling seeds) is its instance seed, however the work is chunked
    assert sorted(seen) == sorted(seeds)


def test_a_band_whose_low_edge_minus_margin_is_zero_still_retires(tmp_path, key):
    cfg = CalibrateConfig(instances=3, samples=6, band=(0.05, 0.95), margin=0.05)
    lib = library(tmp_path, ("register_machine",))
    hard = ScriptedBackend(solver(lambda n, lv: 0.0, key))
    previous = {"levels": [1, 2], "misses": 1, "curve": {"1": {"pass_rate": 0.5}}}  # measured once before
    subject = calibrate.Subject(lib.files[0], "register_machine")
    with SandboxWorkers() as pool:
        calibrate.sweep([subject], lambda s: [1, 4, 7, 10], cfg, SampleConfig(), pool, hard)
    v = calibrate.judge(subject, cfg, previous)
    assert not v.admitted and v.stage == "retired_too_hard"


def test_pool_rotation_retires_after_two_misses_not_one(tmp_path, key):
    easy = ScriptedBackend(solver(lambda n, lv: 1 - (lv - 1) / 9, key))
    first = run(library(tmp_path, ("register_machine",)), easy, tmp_path / "r1")
    assert first["register_machine"]["admitted"]
    solved = ScriptedBackend(solver(lambda n, lv: 1.0, key))  # the policy got better
    second = run(EnvLibrary.open(tmp_path / "r1"), solved, tmp_path / "r2")["register_machine"]
    assert second["admitted"] and second["misses"] == 1 and second["levels"] == first["register_machine"]["levels"]
    third = run(EnvLibrary.open(tmp_path / "r2"), solved, tmp_path / "r3")["register_machine"]
    assert not third["admitted"] and third["stage"] == "retired_too_easy" and third["misses"] == 2
    back = run(EnvLibrary.open(tmp_path / "r2"), easy, tmp_path / "r3b")["register_machine"]
    assert back["admitted"] and back["misses"] == 0


@pytest.mark.slow
def test_real_tiny_model_through_hf(tiny_model, tmp_path):
    library(tmp_path, ("register_machine",))
    exe = Path(sys.executable).with_name("evoenv")
    r = subprocess.run(
        [
            exe,
            "calibrate",
            tmp_path / "lib",
            "--out",
            tmp_path / "out",
            "--model",
            tiny_model,
            "--backend",
            "hf",
            "--instances",
            "1",
            "--samples",
            "2",
            "--json",
            "--config",
            write_recipe(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0, r.stderr
    v = json.loads((tmp_path / "out" / "verdicts.jsonl").read_text().splitlines()[0])
    assert v["stage"] == "no_answers" and v["curve"]["1"]["no_answer_share"] == 1.0


def write_recipe(tmp_path) -> Path:
    p = tmp_path / "recipe.yaml"
    p.write_text("calibrate:\n  max_tokens: 16\n")
    return p


@pytest.mark.slow
def test_real_tiny_model_through_openai_against_transformers_serve(tiny_model, served_tiny_model, tmp_path):
    library(tmp_path, ("register_machine",))
    exe = Path(sys.executable).with_name("evoenv")
    r = subprocess.run(
        [
            exe,
            "calibrate",
            tmp_path / "lib",
            "--out",
            tmp_path / "out",
            "--model",
            tiny_model,
            "--backend",
            "openai",
            "--base-url",
            served_tiny_model,
            "--instances",
            "1",
            "--samples",
            "2",
            "--json",
            "--config",
            write_recipe(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0, r.stderr
    v = json.loads((tmp_path / "out" / "verdicts.jsonl").read_text().splitlines()[0])
    assert v["stage"] == "no_answers"
    assert all(
        level["n"] == 2 and level["pass_rate"] == 0.0 and level["no_answer_share"] == 1.0
        for level in v["curve"].values()
    )


# A crafted SELECT-like environment: k labelled numbers, the answer is the label of the
# largest, so its answer is one of k labels and guessing scores 1/k.
LABELLED = '''"""Which of K labelled numbers is the largest: the answer is one of K labels."""
import random

NAME = "select{k}_crafted"
LABELS = "ABCDEFGH"[:{k}]


def generate(seed, difficulty):
    rng = random.Random(seed)
    values = rng.sample(range(1, 20 + 10 * difficulty), {k})
    return {{"values": values}}


def prompt(instance):
    shown = ", ".join(f"{{label}}: {{v}}" for label, v in zip(LABELS, instance["values"]))
    return f"Which of these labelled numbers is the largest? {{shown}}. Give its label only."


def solve(instance):
    values = instance["values"]
    return LABELS[values.index(max(values))]


def score(instance, answer):
    return 1.0 if str(answer).strip() == solve(instance) else 0.0
'''


def label_solver(name, accuracy):
    """Of the K samples of an instance at level lv (known from its prompt id, the instance
    seed), the first round(accuracy(lv) * K) name the largest number's label, the others the
    next label."""
    level_of = {calibrate.calibration_seed(0, name, lv, i): lv for lv in range(1, 11) for i in range(64)}

    def reply(text, pid, j):
        pairs = re.findall(r"([A-H]): (\d+)", text)
        labels = [a for a, _ in pairs]
        best = max(pairs, key=lambda p: int(p[1]))[0]
        right = j < round(accuracy(level_of[pid]) * 6)
        return f"<answer>{best if right else labels[(labels.index(best) + 1) % len(labels)]}</answer>"

    return reply


@pytest.mark.parametrize(
    "k, accuracy, admitted",
    [
        (3, lambda lv: 2 / 6 if lv < 5 else 1 / 6 if lv < 8 else 0.0, False),  # about chance (1/3): not admitted
        (4, lambda lv: 3 / 6 if lv < 5 else 2 / 6 if lv < 8 else 0.0, True),  # 0.5 against 1/4: admitted
    ],
)
def test_a_label_answer_at_chance_is_not_admitted_and_one_well_above_is(tmp_path, k, accuracy, admitted):
    """The guess rate of a k-label answer is measured (the label set: 1/k); a level whose pass
    rate is in the band but does not beat that rate in the one-sided test is not in band."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / f"select{k}_crafted.py").write_text(LABELLED.format(k=k))
    cfg = CalibrateConfig(instances=4, samples=6, guess_instances=24, band=[0.15, 0.85], coarse_levels=[1, 4, 7, 10])
    out = tmp_path / "out"
    backend = ScriptedBackend(label_solver(f"select{k}_crafted", accuracy))
    calibrate.run(
        EnvLibrary.open(lib), cfg, SampleConfig(), RuntimeConfig(), backend, prepare_out_dir(out, False, False), "m"
    )
    v = json.loads((out / "verdicts.jsonl").read_text())
    guesses = {c["guess_rate"] for c in v["curve"].values()}
    assert guesses == {round(1 / k, 4)}  # every level: the exact count over k labels
    assert v["admitted"] is admitted
    if admitted:
        assert v["levels"] and all(v["curve"][str(lv)]["pass_rate"] == 0.5 for lv in v["levels"])
        assert all(v["curve"][str(lv)]["p_value"] < cfg.alpha for lv in v["levels"])
    else:
        # without the chance test levels 1-4 (0.33, in the band) would have been admitted
        assert v["stage"] == "at_chance" and "guessing 0.33" in v["reason"]
        assert v["curve"]["1"]["pass_rate"] == pytest.approx(1 / 3, abs=1e-3)
