"""Progressive RLVR on a CPU, through the project's own commands (`make bench-progressive`):

1. `evoenv starter-model`; the learning bench's environment, `benchmarks/envs/number_in_words.py`,
   at levels 1-3: the levels chance-aware calibration admits for the starter model in
   `make bench-learning` (0-999 in words; above a measured chance of 0.00-0.04), where GRPO lifts
   it by +0.21 in 20 steps. The levels are fixed here, before any data, and written as the
   library's calibrated levels;
2. `evoenv bound-code`: the bound's code and the rule for its sample S, before any training;
3. `evoenv sample` (training seeds), then five arms on the same environments:
   base; GRPO + LoRA (the teacher); GRPO + TinyLoRA (26 values: one 13-value vector for each
   half of the network's adapted modules); TinyLoRA of the same family distilled on-policy
   from the teacher (`evoenv distill`, reverse KL, the reward mixed in at distill.reward_weight);
   and its 2-bit quantized copy;
4. `evoenv bound` on every arm: the same S (held-out seeds, never a training seed), Gumbel-max
   sampling at the code's temperature and fixed noise, in bfloat16, each distinct context read
   once and answers decoded in 64 slots (bound.batching shared-context; the code records the
   dtype, the slots and the rule), scored by the environment in the sandbox. The quantized student is 2 bits a
   value, so its L is about 64 bits; at that L a bound clears a base near 0.21 from a measured
   accuracy near 0.31 only once S holds about 1,800 instances. So S holds 3,072 (the recipe's
   bound.n): the quantized student and the base answer all of it, and every arm answers its
   first 1,024 (`bound --first`), the items the arms are compared on.

Prints one line `bench progressive: ...` with each arm's pass@1 on the first 1,024 items of S
and its 95% interval, its trained values and description length, the compression against LoRA,
the share of LoRA's gain kept; then the quantized student's accuracy and bound on all of S next
to the base model's accuracy on the same S, with the n of S at which that bound would pass the
base at the accuracy measured (computed, not measured). Each arm's answers are kept as
RUN/samples-ARM.jsonl (`bound --samples`), and RUN/bench-progressive.json adds each arm's pass@1
by level. Targets: the bound above base accuracy, >= 70% of the gain retained, >= 1000x
compression; <= 30 minutes on 2 quiet cores.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).with_name("evoenv")
RECIPE = ROOT / "benchmarks" / "progressive.yaml"
TASK = "number_in_words"
LEVELS = [1, 2, 3]
TINY_LR = "0.002"  # GRPO on TinyLoRA: a step size in the bound's grid (benchmarks/progressive.yaml)
ARMS = ("base", "lora", "grpo_tinylora", "distilled", "quantized")
BOUNDED = ("base", "quantized")  # answer all of S: the bound, and the base on the same sample
TARGETED = ("distilled", "quantized")  # the arms the targets are checked on
# Every arm answers the first FIRST instances of S (`bound --first`), the items the arms are
# compared on side by side; the bounded student and the base answer all of S (the recipe's
# bound.n), the n the bound needs. FIRST is fixed here, before S is drawn.
FIRST = 1024


@contextlib.contextmanager
def turn(lock: str | None):
    """Hold `lock` (flock(2), as the flock command takes it) for a group of heavy commands, so
    the bench takes turns with other heavy jobs on a shared machine; no lock, no waiting."""
    if not lock:
        yield
        return
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def evoenv(*args, log: Path, capture: bool = False) -> tuple[float, str]:
    """Run one evoenv command (its output to a log); returns (seconds, stdout when captured)."""
    argv = [str(EXE), *map(str, args)]
    print("$ evoenv " + " ".join(map(str, args)), file=sys.stderr, flush=True)
    start = time.perf_counter()
    with log.open("a") as f:
        f.write("$ " + " ".join(argv) + "\n")
        f.flush()
        r = subprocess.run(
            argv,
            stdout=subprocess.PIPE if capture else f,
            stderr=f,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            cwd=ROOT,
        )
    if r.returncode != 0:
        sys.exit(f"bench progressive: `evoenv {args[0]}` failed (exit {r.returncode}); see {log}")
    return time.perf_counter() - start, r.stdout or ""


def library(run: Path, log: Path) -> Path:
    """number_in_words, copied, with its levels written as the calibrated ones (fixed in advance)."""
    lib = run / "library"
    if (lib / "index.jsonl").is_file():
        return lib
    shutil.rmtree(lib, ignore_errors=True)
    (lib / "envs").mkdir(parents=True)
    shutil.copy2(ROOT / "benchmarks" / "envs" / f"{TASK}.py", lib / "envs" / f"{TASK}.py")
    sys.path.insert(0, str(ROOT))
    from evoenv_cli.artifacts import EnvLibrary

    envs = EnvLibrary.open(lib).files
    rows = [{"file": e.path.name, "env_id": e.env_id, "name": e.name, "calibration": {"levels": LEVELS}} for e in envs]
    (lib / "index.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return lib


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default=str(ROOT / "runs" / "bench-progressive"))
    ap.add_argument("--model", default=str(ROOT / "runs" / "starter-model"))
    ap.add_argument("--steps", type=int, default=None, help="GRPO and distillation steps (default: the recipe's)")
    ap.add_argument("--n", type=int, default=None, help="instances in S (default: the recipe's bound.n)")
    ap.add_argument("--keep", action="store_true", help="reuse the arms already trained in RUN")
    ap.add_argument("--lock", default=None, help="hold flock LOCK over the training and the bounds (a shared machine)")
    args = ap.parse_args()
    run, model = Path(args.run).resolve(), Path(args.model).resolve()
    if run.exists() and not args.keep:
        shutil.rmtree(run)
    run.mkdir(parents=True, exist_ok=True)
    log = run / "commands.log"
    start = time.perf_counter()
    seconds: dict[str, float] = {}
    heavy = {"log": log}
    seconds["starter_model"] = evoenv("starter-model", model, log=log)[0]  # a no-op once built
    lib = library(run, log)
    config = ["--config", RECIPE]
    code = run / "bound-code.json"
    if not code.exists():  # before any training: the code and S's rule never move afterwards
        evoenv(
            "bound-code",
            code,
            "--library",
            lib,
            "--model",
            model,
            *config,
            *(["--n", args.n] if args.n else []),
            log=log,
        )
    first = min(FIRST, json.loads(code.read_text())["per_env"])
    rows = run / "train.jsonl"
    if not rows.exists():
        evoenv("sample", lib, "--out", rows, "--difficulty-from", "index", "--seed", "1", *config, log=log)
    steps = ["--max-steps", str(args.steps)] if args.steps else []
    train = ["train", rows, "--library", lib, "--model", model, *config, *steps]
    arms = {"base": model, "lora": run / "lora", "grpo_tinylora": run / "grpo-tinylora"}
    arms["distilled"], arms["quantized"] = run / "distill", run / "distill" / "quantized"
    with turn(args.lock):
        if not (arms["lora"] / "train-manifest.json").exists():
            seconds["train_lora"] = evoenv(*train, "--out", arms["lora"], "--lora", "--clean", **heavy)[0]
        if not (arms["grpo_tinylora"] / "train-manifest.json").exists():
            seconds["train_tinylora"] = evoenv(
                *train, "--out", arms["grpo_tinylora"], "--adapter", "tinylora", "--lr", TINY_LR, "--clean", **heavy
            )[0]
        if not (arms["distilled"] / "distill-manifest.json").exists():
            distill = ["distill", rows, "--library", lib, "--teacher", arms["lora"], "--model", model, *config, *steps]
            seconds["distill"] = evoenv(*distill, "--out", arms["distilled"], "--clean", **heavy)[0]
    results = {}
    with turn(args.lock):
        for arm in ARMS:
            samples = run / f"samples-{arm}.jsonl"  # each item answered and scored
            part = [] if arm in BOUNDED else ["--first", first]
            bound = [
                "bound",
                arms[arm],
                "--library",
                lib,
                "--code",
                code,
                *config,
                *part,
                "--json",
                "--samples",
                samples,
            ]
            took, out = evoenv(*bound, capture=True, **heavy)
            seconds[f"bound_{arm}"] = took
            results[arm] = json.loads(out.strip().splitlines()[-1])
            results[arm]["by_level"] = by_level(samples, first)  # on the items the arms share
            results[arm]["by_level_answered"] = by_level(samples)
            results[arm]["side"] = side_by_side(samples, first)
    wall = time.perf_counter() - start
    report(run, results, seconds, wall, first)
    # the same numbers as a page: every arm's latest bound (bounds.jsonl beside the codes)
    evoenv("report", run, log=log)
    print(f"bench progressive: report {run / 'report' / 'index.html'}", file=sys.stderr)


def by_level(samples: Path, first: int | None = None) -> dict[str, float]:
    """pass@1 at each level, from the arm's samples file: on S's first `first` items (the ones
    every arm answered, so the arms' tables compare), or on every item the file holds."""
    sys.path.insert(0, str(ROOT))
    from evoenv_cli.stages.bound import prefix

    items = [json.loads(line) for line in samples.read_text().splitlines()]
    seen: dict[str, list[bool]] = {}
    for j in prefix(items, first):
        seen.setdefault(str(items[j]["difficulty"]), []).append(items[j]["correct"])
    return {level: round(sum(v) / len(v), 4) for level, v in sorted(seen.items())}


def side_by_side(samples: Path, first: int) -> list[bool]:
    """Which of S's first `first` items (`bound --first`: the arms' common items, as many of
    each level as an S of `first` holds) were correct, in S's order."""
    sys.path.insert(0, str(ROOT))
    from evoenv_cli.stages.bound import prefix

    items = [json.loads(line) for line in samples.read_text().splitlines()]
    return [items[j]["correct"] for j in prefix(items, first)]


def n_to_clear(accuracy: float, bits: float, delta: float, base: float) -> int | None:
    """The smallest n of S at which the bound on a policy measured at `accuracy` (its error
    rate held) would exceed `base`: what the sample would have to grow to; None if no n can
    (accuracy not above base)."""
    sys.path.insert(0, str(ROOT))
    from evoenv_cli.stages.bound import kl_inverse, occam_complexity

    if accuracy <= base:
        return None

    def clears(n: int) -> bool:
        return 1 - kl_inverse(1 - accuracy, occam_complexity(bits, n, delta)) > base

    hi = 1
    while not clears(hi):
        hi *= 2
        if hi > 10**12:
            return None
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if clears(mid) else (mid, hi)
    return hi


def report(run: Path, results: dict, seconds: dict, wall: float, first: int) -> None:
    """The json and the line. The arms are compared on S's first `first` items, which every arm
    answered (pass@1, interval, the share of LoRA's gain kept, the quantization gap); the bound
    is the quantized student's on all of S, next to the base model on the same S."""
    sys.path.insert(0, str(ROOT))
    from evoenv_cli.stages.bound import wilson

    side = {arm: r["side"] for arm, r in results.items()}
    pass1 = {arm: sum(c) / len(c) for arm, c in side.items()}
    base = pass1["base"]
    lora_gain = pass1["lora"] - base
    lora_bits = results["lora"]["description_length_bits"]
    q = results["quantized"]
    summary = {
        "model": "SmolLM2-135M-Instruct",
        "task": f"{TASK} levels {LEVELS}",
        "n": q["n"],  # all of S: the bound's sample
        "n_side_by_side": first,  # the first items of S, which every arm answered
        "temperature": q["temperature"],
        "arms": {
            arm: {
                "pass1": pass1[arm],
                "ci95": wilson(sum(side[arm]), len(side[arm])),
                "trained": r["trained_parameters"],
                "bits": r["description_length_bits"],
                "compression_vs_lora": lora_bits / r["description_length_bits"]
                if r["description_length_bits"]
                else None,
                "retained": (pass1[arm] - base) / lora_gain if lora_gain > 0 else None,
                # on every item the arm answered (all of S for the bounded arms)
                "answered": r["n"],
                "pass1_answered": r["accuracy"],
                "ci95_answered": r["accuracy_interval"],
                "bound_accuracy_lower": r["accuracy_lower_bound"],
                "base_on_answered": r["base_accuracy"],
                # the n of S at which this arm's bound would pass base, at its measured accuracy
                "n_to_clear_base": n_to_clear(
                    r["accuracy"], r["description_length_bits"], r["delta"], r["base_accuracy"]
                ),
                "pass1_by_level": r["by_level"],  # on the first items, as pass1
                "pass1_by_level_answered": r["by_level_answered"],
            }
            for arm, r in results.items()
        },
        "bound_form": q["form"],
        "delta": q["delta"],
        "base_accuracy": q["base_accuracy"],  # on all of S, beside the bound
        "base_accuracy_side_by_side": base,
        "quantization_gap": pass1["distilled"] - pass1["quantized"],
        "statement": q["statement"],
        "wall_s": round(wall),
        "seconds": {k: round(v) for k, v in seconds.items()},
    }
    summary["bound_accuracy_lower"] = q["accuracy_lower_bound"]

    def targets(arm: str) -> dict[str, bool | None]:
        a = summary["arms"][arm]
        return {
            # the bound is the quantized student's; the unquantized one is not the policy bounded
            "bound_above_base": q["accuracy_lower_bound"] > q["base_accuracy"] if arm == "quantized" else None,
            "retained_70": (a["retained"] or 0) >= 0.7,
            "compression_1000x": (a["compression_vs_lora"] or 0) >= 1000,
            "quantized_within_tolerance": abs(summary["quantization_gap"]) <= tolerance()
            if arm == "quantized"
            else None,
        }

    # "the distilled TinyLoRA arm keeps >= 70% of the gain" is the unquantized student; its
    # quantized copy is held to the same, and to the bound
    summary["targets"] = {arm: targets(arm) for arm in TARGETED}
    # the dtypes this machine ran in (the recipe's auto resolved), as the code and the
    # trainings' manifests record them
    answered_in = json.loads((run / "bound-code.json").read_text())["dtype"]
    trained = {
        json.loads((run / folder / name).read_text())["summary"]["bf16"]
        for folder, name in (
            ("lora", "train-manifest.json"),
            ("grpo-tinylora", "train-manifest.json"),
            ("distill", "distill-manifest.json"),
        )
    }
    trained_in = {frozenset({True}): "bf16 autocast", frozenset({False}): "float32"}.get(frozenset(trained), "mixed")
    summary["dtypes"] = {"answers": answered_in, "training": trained_in}
    (run / "bench-progressive.json").write_text(json.dumps(summary, indent=2) + "\n")

    def arm_text(arm: str) -> str:
        a = summary["arms"][arm]
        extra = "" if arm in ("base", "lora") else f" x{a['compression_vs_lora']:.0f} kept={_pct(a['retained'])}"
        return (
            f"{arm}={a['pass1']:.3f}[{a['ci95'][0]:.3f},{a['ci95'][1]:.3f}] "
            f"({a['trained']} values, {a['bits']:.0f} bits{extra})"
        )

    def met(arm: str) -> str:
        return ",".join(k for k, v in summary["targets"][arm].items() if v) or "none"

    lo, hi = q["accuracy_interval"]
    need = summary["arms"]["quantized"]["n_to_clear_base"]
    print(
        f"bench progressive: model={summary['model']} task={summary['task']} T={summary['temperature']:g} "
        f"side by side on the first {first} of S: " + " ".join(arm_text(a) for a in ARMS) + f"; bound on all of S "
        f"(n={q['n']}, {summary['bound_form']}, delta={summary['delta']:g}): quantized={q['accuracy']:.3f}"
        f"[{lo:.3f},{hi:.3f}] accuracy>={q['accuracy_lower_bound']:.3f} (above base from n={need or 'never'}) "
        f"vs base={q['base_accuracy']:.3f}; quantization gap={summary['quantization_gap']:+.3f} "
        "targets: " + " ".join(f"{arm}={met(arm)}" for arm in TARGETED) + f" answers in {answered_in}, training in "
        f"{trained_in} wall_s={summary['wall_s']}",
        flush=True,
    )


def tolerance() -> float:
    """bound.tolerance of the recipe: how far the quantized arm may score from the unquantized."""
    sys.path.insert(0, str(ROOT))
    from evoenv_cli.config import load_recipe

    return load_recipe(RECIPE).bound.tolerance


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


if __name__ == "__main__":
    main()
