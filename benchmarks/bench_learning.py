"""The proof that `evoenv train` makes a real model better, on a CPU, through the project's own
commands (`make bench-learning`), beside a bare TRL script on the same rows:

1. `evoenv starter-model`: SmolLM2-135M-Instruct, offline;
2. `evoenv calibrate` on the benchmark's environments (benchmarks/envs/): the levels whose
   pass rate for this model is in band and above chance;
3. `evoenv sample --difficulty-from index`: training rows at those levels (seeds < 2**31);
4. `evoenv train`: GRPO for N steps, rewarded by the environments in the sandbox;
5. the bare arm: a minimal TRL `GRPOTrainer` on the same rows, steps, seed and GRPO settings,
   whose reward is a plain in-process Python function calling each environment's `score`
   directly (the library's files imported here: the benchmark's environments are trusted,
   hand-written code; evoenv itself never imports environment code);
6. `evoenv evaluate --model TRAINED --baseline STARTER`, then `evoenv evaluate --model BARE`:
   the same held-out instances (seeds with bit 31 set) at the calibrated levels, with the
   same sampling seeds, and an external benchmark nobody here wrote: reasoning-gym tasks
   generated offline at fixed seeds and scored by reasoning-gym's own `score_answer`.

Held-out numbers are item means over the environment items (before, after, bare); each delta
comes with a paired bootstrap 95% interval over those items. Step seconds are TRL's own
`step_time` (generation, reward, backward) in both arms; `reward_share` is the share of
evoenv's step time spent in its reward path (sandbox calls, re-checks, the format reward,
callbacks), from its metrics.jsonl. Prints one line:
  bench learning: model=... steps=N before=X after=Y delta=D (95% [lo, hi]) bare_after=...
  bare_delta=B (95% [lo, hi]) step_s=S bare_step_s=T reward_share=R external_before=A
  external_after=E ... wall_s=W
Targets (issue 24): D >= +0.20 with lo > 0, external no more than 0.02 lower, S <= 1.15 x T,
R <= 0.05, W <= 1200 s on 2 quiet cores. Settings live in benchmarks/learning.yaml; the run
lands in runs/bench-learning (kept, so its files can be read). `--steps`, `--per-env` and
`--instances` shorten it (a smoke run; its numbers prove nothing).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # evoenv_cli from this checkout
EXE = Path(sys.executable).with_name("evoenv")
RECIPE = ROOT / "benchmarks" / "learning.yaml"
# The library: environment files written for this benchmark, validated like any other
# (tests/benchmarks/test_bench_envs.py) and run in the sandbox. Not the seeds, nor reasoning-gym's
# chain_sum: under chance-aware calibration the starter model has no level 1-3 of any seed above
# chance (0 of 11 levels admitted) and none of chain_sum's (0 of 8, most answers untagged), so
# nothing of them was drawn and GRPO had nothing to learn. number_in_words' low levels are in
# its reach with many possible answers, so being above chance there means something.
ENVS = ROOT / "benchmarks" / "envs"
# External: reasoning-gym tasks that no training row asks (arithmetic, where training asks for
# numbers in words), generated offline at fixed seeds, scored by its own
# score_answer.
EXTERNAL = [
    'rg:basic_arithmetic:32:min_terms=2,max_terms=2,min_digits=1,max_digits=1,operators=["+"]',
    'rg:basic_arithmetic:32:min_terms=2,max_terms=2,min_digits=1,max_digits=1,operators=["-"]',
]


def evoenv(*args, log: Path, profile: Path | None = None) -> float:
    """Run one evoenv command (its output to the terminal and to a log); returns its seconds.
    With `profile`, under cProfile, its statistics written there."""
    argv = [str(EXE), *map(str, args)]
    if profile is not None:
        argv = [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "evoenv_cli", *map(str, args)]
    print("$ evoenv " + " ".join(map(str, args)), file=sys.stderr, flush=True)
    start = time.perf_counter()
    with log.open("a") as f:
        f.write("$ " + " ".join(argv) + "\n")
        f.flush()
        r = subprocess.run(argv, stdout=f, env={**os.environ, "HF_HUB_OFFLINE": "1"}, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"bench learning: `evoenv {args[0]}` failed (exit {r.returncode}); see above and {log}")
    return time.perf_counter() - start


def unseen_pass(run: Path) -> dict:
    """pass@1 before and after over the held-out items whose task no training row asks: the
    near-trivial low levels have few distinct instances, so a held-out seed can still draw a
    training instance, and a gain there is not generalization."""
    seen = {json.loads(line)["prompt"][-1]["content"] for line in (run / "train.jsonl").read_text().splitlines()}
    per_item: dict[tuple[str, str], list[float]] = {}
    overlap = set()
    for line in (run / "evaluate" / "samples.jsonl").read_text().splitlines():
        s = json.loads(line)
        if s["kind"] != "env":
            continue
        per_item.setdefault((s["role"], s["item"]), []).append(float(s["score"]))
        if s["prompt"][-1]["content"] in seen:
            overlap.add(s["item"])

    def mean(role: str) -> float:
        means = [sum(v) / len(v) for (r, item), v in per_item.items() if r == role and item not in overlap]
        return sum(means) / len(means) if means else float("nan")

    items = {item for _, item in per_item}
    return {
        "unseen_before": mean("baseline"),
        "unseen_after": mean("model"),
        "unseen_items": len(items - overlap),
        "env_items": len(items),
    }


def profile_summary(profile: Path, out: Path, top: int = 25) -> None:
    """The profile's functions by cumulative time, the `top` first, as text beside it."""
    import io
    import pstats

    text = io.StringIO()
    pstats.Stats(str(profile), stream=text).sort_stats("cumulative").print_stats(top)
    out.write_text(text.getvalue())


def item_scores(evaluate_dir: Path, role: str = "model") -> dict[str, float]:
    """Per held-out environment item, its mean score for one role of an evaluation."""
    per_item: dict[str, list[float]] = {}
    for line in (evaluate_dir / "samples.jsonl").read_text().splitlines():
        s = json.loads(line)
        if s["kind"] == "env" and s["role"] == role:
            per_item.setdefault(s["item"], []).append(float(s["score"]))
    return {k: sum(v) / len(v) for k, v in per_item.items()}


def paired(after: dict[str, float], before: dict[str, float]) -> tuple[float, float, float, list[float]]:
    """before, after (item means over the items both have), the delta and its bootstrap 95% interval."""
    from evoenv_cli.confidence import paired_bootstrap

    items = sorted(set(after) & set(before))
    a, b = [after[k] for k in items], [before[k] for k in items]
    delta, ci = paired_bootstrap(a, b)
    return sum(b) / len(b), sum(a) / len(a), delta, ci


def step_seconds(records: list[dict]) -> float | None:
    """The mean of TRL's per-step `step_time` over the logged training records."""
    times = [r["step_time"] for r in records if isinstance(r.get("step_time"), (int, float)) and "reward" in r]
    return round(sum(times) / len(times), 3) if times else None


def bare_rewards(library: Path, tag: str):
    """The bare arm's reward functions, plain Python in this process: each environment's own
    `score` on the last answer block of a completion (0 without one), and the format bonus."""
    answer = re.compile(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", re.DOTALL | re.IGNORECASE)
    modules = {}
    for path in sorted((library / "envs").glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"bare_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules[getattr(module, "NAME", path.stem)] = module

    def last_answer(completion) -> str | None:
        text = completion[-1]["content"] if isinstance(completion, list) else completion
        found = answer.findall(text)
        return found[-1].strip() if found else None

    def env_score(completions, env_name, instance, **kwargs):
        out = []
        for c, name, inst in zip(completions, env_name, instance):
            a = last_answer(c)
            out.append(0.0 if a is None else float(modules[name].score(json.loads(inst), a)))
        return out

    def answer_format(completions, **kwargs):
        return [0.0 if last_answer(c) is None else 1.0 for c in completions]

    return env_score, answer_format


def bare_train(rows: Path, library: Path, model: Path, out: Path, steps: int | None, recipe: Path) -> list[dict]:
    """The bare arm: TRL's GRPOTrainer on `rows` with the recipe's GRPO settings and a plain
    in-process reward (each environment's own `score` on the last answer block, plus the same
    format bonus); returns TRL's log history."""
    import datasets
    import transformers
    from trl import GRPOConfig, GRPOTrainer

    from evoenv_cli import config as cfgmod
    from evoenv_cli.stages.train import grpo_args

    spec = cfgmod.load_recipe(recipe)
    train = cfgmod.override(spec.train, max_steps=steps) if steps else spec.train
    weight = spec.reward.format_weight
    env_score, answer_format = bare_rewards(library, spec.answer.tag)

    transformers.set_seed(train.seed)
    dataset = datasets.load_dataset("json", data_files=str(rows), split="train")
    trainer = GRPOTrainer(
        model=str(model),
        reward_funcs=[env_score, answer_format] if weight else [env_score],
        args=GRPOConfig(**grpo_args(train, out, format_weight=weight)),
        train_dataset=dataset,
    )
    trainer.train()
    trainer.save_model(str(out))
    trainer.processing_class.save_pretrained(str(out))
    return trainer.state.log_history


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default=str(ROOT / "runs" / "bench-learning"))
    ap.add_argument("--model", default=str(ROOT / "runs" / "starter-model"))
    ap.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the recipe's train.max_steps)")
    ap.add_argument("--keep", action="store_true", help="reuse a finished calibration in RUN")
    ap.add_argument("--recipe", default=str(RECIPE), help="the settings (default: benchmarks/learning.yaml)")
    ap.add_argument(
        "--profile",
        action="store_true",
        help="run evoenv's train under cProfile (RUN/train.prof, top functions in RUN/train-profile.txt)",
    )
    ap.add_argument("--per-env", type=int, default=None, help="training rows per environment (default: the recipe's)")
    ap.add_argument(
        "--instances", type=int, default=None, help="held-out items per environment (default: the recipe's)"
    )
    args = ap.parse_args()
    run, model, recipe = Path(args.run), Path(args.model), Path(args.recipe)
    if run.exists() and not args.keep:
        shutil.rmtree(run)
    run.mkdir(parents=True, exist_ok=True)
    log = run / "commands.log"
    start = time.perf_counter()
    seconds = {}
    seconds["starter_model"] = evoenv("starter-model", model, log=log)
    library = run / "library"
    if not (run / "calibrate" / "summary.json").exists():
        shutil.rmtree(library, ignore_errors=True)
        shutil.copytree(ENVS, library, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.rmtree(run / "calibrate", ignore_errors=True)
        seconds["calibrate"] = evoenv(
            "calibrate", library, "--out", run / "calibrate", "--model", model, "--config", recipe, log=log
        )
    admitted = [json.loads(x) for x in (run / "calibrate" / "index.jsonl").read_text().splitlines() if x.strip()]
    if not admitted:
        sys.exit("bench learning: calibration admitted no environment (no level in band for this model)")
    seconds["sample"] = evoenv(
        "sample",
        run / "calibrate",
        "--out",
        run / "train.jsonl",
        "--difficulty-from",
        "index",
        "--seed",
        "1",
        "--config",
        recipe,
        *(["--per-env", str(args.per_env)] if args.per_env else []),
        log=log,
    )
    steps = ["--max-steps", str(args.steps)] if args.steps else []
    seconds["train"] = evoenv(
        "train",
        run / "train.jsonl",
        "--library",
        run / "calibrate",
        "--model",
        model,
        "--out",
        run / "train",
        "--config",
        recipe,
        *steps,
        log=log,
        profile=run / "train.prof" if args.profile else None,
    )
    if args.profile:
        profile_summary(run / "train.prof", run / "train-profile.txt")
    started = time.perf_counter()
    shutil.rmtree(run / "bare", ignore_errors=True)
    bare_log = bare_train(run / "train.jsonl", run / "calibrate", model, run / "bare", args.steps, recipe)
    seconds["bare_train"] = time.perf_counter() - started
    bench = [a for spec in EXTERNAL for a in ("--bench", spec)]
    instances = ["--instances", str(args.instances)] if args.instances else []
    seconds["evaluate"] = evoenv(
        "evaluate",
        "--model",
        run / "train",
        "--baseline",
        model,
        "--library",
        run / "calibrate",
        *bench,
        *instances,
        "--out",
        run / "evaluate",
        "--config",
        recipe,
        log=log,
    )
    seconds["bare_evaluate"] = evoenv(
        "evaluate",
        "--model",
        run / "bare",
        "--library",
        run / "calibrate",
        *bench,
        *instances,
        "--out",
        run / "evaluate-bare",
        "--config",
        recipe,
        log=log,
    )
    wall = time.perf_counter() - start
    metrics = json.loads((run / "evaluate" / "metrics.json").read_text())
    bare_metrics = json.loads((run / "evaluate-bare" / "metrics.json").read_text())
    unseen = unseen_pass(run)
    manifest = json.loads((run / "train" / "train-manifest.json").read_text())
    records = [json.loads(x) for x in (run / "train" / "metrics.jsonl").read_text().splitlines() if x.strip()]
    baseline_items = item_scores(run / "evaluate", "baseline")
    before, after, delta, ci = paired(item_scores(run / "evaluate"), baseline_items)
    _, bare_after, bare_delta, bare_ci = paired(item_scores(run / "evaluate-bare"), baseline_items)
    after_o, before_o = metrics["overall"], metrics["baseline"]["overall"]
    result = {
        "model": "SmolLM2-135M-Instruct",
        "steps": manifest["summary"]["steps"],
        "envs": len(admitted),
        "levels": {r["name"]: r["calibration"]["levels"] for r in admitted},
        "per_env": {
            name: {"before": metrics["baseline"]["environments"][name]["pass@1"], "after": m["pass@1"]}
            for name, m in metrics["environments"].items()
        },
        "items": len(baseline_items),
        "before": round(before, 4),
        "after": round(after, 4),
        "delta": delta,
        "delta_ci95": ci,
        "bare_after": round(bare_after, 4),
        "bare_delta": bare_delta,
        "bare_delta_ci95": bare_ci,
        "step_s": step_seconds(records),
        "bare_step_s": step_seconds(bare_log),
        "reward_share": manifest["summary"].get("reward_share"),
        "external_before": before_o["bench_mean"],
        "external_after": after_o["bench_mean"],
        "bare_external_after": bare_metrics["overall"]["bench_mean"],
        "no_answer_before": before_o.get("no_answer_share"),
        "no_answer_after": after_o.get("no_answer_share"),
        **unseen,
        "wall_s": round(wall),
        "seconds": {k: round(v) for k, v in seconds.items()},
    }
    (run / "bench-learning.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"bench learning: model={result['model']} steps={result['steps']} envs={result['envs']} "
        f"items={result['items']} before={result['before']:.3f} after={result['after']:.3f} "
        f"delta={result['delta']:+.3f} (95% [{ci[0]:+.3f}, {ci[1]:+.3f}]) "
        f"bare_after={result['bare_after']:.3f} bare_delta={result['bare_delta']:+.3f} "
        f"(95% [{bare_ci[0]:+.3f}, {bare_ci[1]:+.3f}]) "
        f"step_s={result['step_s']} bare_step_s={result['bare_step_s']} reward_share={result['reward_share']} "
        f"external_before={result['external_before']:.3f} external_after={result['external_after']:.3f} "
        f"unseen_before={result['unseen_before']:.3f} unseen_after={result['unseen_after']:.3f} "
        f"(items={result['unseen_items']}/{result['env_items']}) "
        f"wall_s={result['wall_s']} (calibrate={result['seconds'].get('calibrate', 0)} "
        f"train={result['seconds']['train']} bare_train={result['seconds']['bare_train']} "
        f"evaluate={result['seconds']['evaluate']} bare_evaluate={result['seconds']['bare_evaluate']})",
        flush=True,
    )


if __name__ == "__main__":
    main()
