"""`make bench`, validate section: the seeds, the validate corpus (good and defective) and the
dedupe corpus (environments written apart from this repository: 28 distinct ones and 12
re-skins, all valid) with the corpus's recipe (the defaults but tighter solve and import budgets,
which the slow-solve and slow-import defects are sized to) on 2 workers. Prints the median wall time per
admitted environment, what the defective ones cost, the false-rejection rate on every group
of valid environments (it must be 0) and how many defective files were caught by the check
their name gives.

Then validate's time per good environment with the issue-29 checks (the scorer fuzzer, the
hash-seed sample and the training-shaped burst) on and off, measured side by side in this one
run on the seeds and the corpus goods: "off" is today's validate, "on" what the checks cost.

Then the same for issue 42's pay measured against chance (`measured-pay`), off and on.

Last, validate's growth line: the time per environment at 1x, 4x and 16x a seed's output size
and at the caps (benchmarks/scaled_env.py), with each time ratio over its size ratio."""

from __future__ import annotations

import dataclasses
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import scaled_env

from evoenv_cli.artifacts import EnvLibrary, prepare_out_dir, read_jsonl
from evoenv_cli.config import RuntimeConfig, ValidateConfig, load_recipe
from evoenv_cli.stages import validate

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "validate_corpus"
GOOD_GROUPS = {
    "seeds": sorted((ROOT / "seeds").glob("*.py")),
    "corpus_goods": sorted((CORPUS / "good").glob("*.py")),
    "written_apart": sorted((ROOT / "tests" / "dedupe_corpus").glob("*/*.py")),
}


def main() -> None:
    bad = sorted((CORPUS / "bad").glob("*.py"))
    with tempfile.TemporaryDirectory(prefix="evoenv-bench-") as tmp:
        lib = Path(tmp) / "lib"
        lib.mkdir()
        for f in [*(p for group in GOOD_GROUPS.values() for p in group), *bad]:
            assert not (lib / f.name).exists(), f"two benchmark files are named {f.name}"
            shutil.copy(f, lib / f.name)
        out = prepare_out_dir(Path(tmp) / "out", resume=False, clean=False)
        t = time.perf_counter()
        cfg = load_recipe(CORPUS / "recipe.yaml").validate
        summary = validate.run(EnvLibrary.open(lib), cfg, RuntimeConfig(workers=2), out)
        wall = time.perf_counter() - t
        records = {r["file"]: r for r in read_jsonl(out / "verdicts.jsonl")}
    good = [r["wall_s"] for r in records.values() if r["admitted"]]
    defective = [records[p.name] for p in bad]
    worst = max((r for r in defective if "wall_s" in r), key=lambda r: r["wall_s"], default=None)
    print(
        f"validate: {summary.entered} entered, {summary.admitted} admitted, rejected by stage "
        + ", ".join(f"{k}={v}" for k, v in summary.rejected_by_stage.items() if v)
    )
    if worst:
        print(f"slowest defective: {worst['file']} ({worst['stage']}) {worst['wall_s']:.2f} s")
    rates = []
    for group, files in GOOD_GROUPS.items():
        rejected = [records[p.name] for p in files if not records[p.name]["admitted"]]
        rates.append(f"{group}={len(rejected)}/{len(files)}")
        for r in rejected:
            print(f"  FALSE REJECTION {r['file']}: {r['stage']}: {r['reason']}")
    caught = sum(r["stage"] == Path(r["file"]).name.split("__")[0] for r in defective)
    print(
        f"bench validate: envs={summary.entered} wall_s={wall:.1f} per_good_env_s={statistics.median(good):.2f} "
        f"false_rejections {' '.join(rates)} defective_caught_at_their_stage={caught}/{len(defective)}"
    )


def _library(tmp: Path, files: list[Path]) -> Path:
    lib = tmp / "lib"
    lib.mkdir()
    for f in files:
        shutil.copy(f, lib / f.name)
    return lib


def side_by_side() -> None:
    files = GOOD_GROUPS["seeds"] + GOOD_GROUPS["corpus_goods"]
    base = load_recipe(CORPUS / "recipe.yaml").validate
    off = dataclasses.replace(base, fuzz_instances=0, hash_seed_samples=0, burst_distinct_instances=0)
    per_env = {}
    with tempfile.TemporaryDirectory(prefix="evoenv-bench-") as tmp:
        lib = _library(Path(tmp), files)
        for label, cfg in (("off", off), ("on", base), ("off_again", off)):
            out = prepare_out_dir(Path(tmp) / f"out-{label}", resume=False, clean=False)
            validate.run(EnvLibrary.open(lib), cfg, RuntimeConfig(workers=2), out)
            records = list(read_jsonl(out / "verdicts.jsonl"))
            per_env[label] = statistics.median(r["wall_s"] for r in records if r["admitted"])
            if label == "on":
                calls = statistics.median(r.get("fuzz_calls", 0) for r in records if r["admitted"])
                admitted = sum(r["admitted"] for r in records)
    today = min(per_env["off"], per_env["off_again"])
    print(
        f"bench validate fuzzer: envs={len(files)} admitted_with_checks={admitted}/{len(files)} "
        f"per_good_env_s today={today:.2f} with_fuzzer={per_env['on']:.2f} "
        f"ratio={per_env['on'] / today:.2f} fuzz_calls_per_env={calls:.0f}"
    )


def _off_and_on(off: ValidateConfig, on: ValidateConfig) -> tuple[dict, dict, dict]:
    """validate on the seeds and the corpus goods under `off` and `on`, alternating off, on, off,
    on so that load weighs on both alike: per label, the least median wall time of an admitted
    environment, how many were admitted, and the median fuzz calls of an admitted one."""
    files = GOOD_GROUPS["seeds"] + GOOD_GROUPS["corpus_goods"]
    per_env: dict[str, list[float]] = {"off": [], "on": []}
    admitted, calls = {}, {}
    with tempfile.TemporaryDirectory(prefix="evoenv-bench-") as tmp:
        lib = _library(Path(tmp), files)
        for k, (label, cfg) in enumerate((("off", off), ("on", on), ("off", off), ("on", on))):
            out = prepare_out_dir(Path(tmp) / f"out-{k}", resume=False, clean=False)
            validate.run(EnvLibrary.open(lib), cfg, RuntimeConfig(workers=2), out)
            records = list(read_jsonl(out / "verdicts.jsonl"))
            per_env[label].append(statistics.median(r["wall_s"] for r in records if r["admitted"]))
            admitted[label] = sum(r["admitted"] for r in records)
            calls[label] = statistics.median(r.get("fuzz_calls", 0) for r in records if r["admitted"])
    return {label: min(times) for label, times in per_env.items()}, admitted, calls


def training_seen_side_by_side() -> None:
    """Issue 42's checks (instances at `sample`'s seeds, the collapsed group) off and on."""
    on = load_recipe(CORPUS / "recipe.yaml").validate
    off = dataclasses.replace(on, sample_seed_instances=0, collapsed_group=1)
    seconds, admitted, _ = _off_and_on(off, on)
    before, after = seconds["off"], seconds["on"]
    print(
        f"bench validate training-seen: envs={len(GOOD_GROUPS['seeds'] + GOOD_GROUPS['corpus_goods'])} "
        f"admitted off={admitted['off']} on={admitted['on']} "
        f"per_good_env_s before={before:.2f} after={after:.2f} ratio={after / before:.2f}"
    )


def measured_pay_side_by_side() -> None:
    """Issue 42's pay measured against chance (checks/pay.py: the chance answers, the planted
    kinds at partial pay, the constant answer against an option's chance rate) off and on. "off"
    is the settings at 1 (full pay alone, no chance answers scored, no partial-pay kinds planned)."""
    on = load_recipe(CORPUS / "recipe.yaml").validate
    off = dataclasses.replace(on, min_paid_excess=1.0, max_mean_excess=1.0, min_constant_excess=1.0)
    seconds, admitted, calls = _off_and_on(off, on)
    before, after = seconds["off"], seconds["on"]
    print(
        f"bench validate measured-pay: envs={len(GOOD_GROUPS['seeds'] + GOOD_GROUPS['corpus_goods'])} "
        f"admitted off={admitted['off']} on={admitted['on']} "
        f"per_good_env_s before={before:.2f} after={after:.2f} ratio={after / before:.2f} "
        f"fuzz_calls_per_env before={calls['off']:.0f} after={calls['on']:.0f}"
    )


def growth() -> None:
    """validate's time per environment as its output grows (benchmarks/scaled_env.py): 1x, 4x
    and 16x what a seed writes, and just under the caps; each judged alone, on 2 workers. The
    time may grow no faster than the size: time ratio / size ratio at most ~1."""
    sizes = {"1x": scaled_env.scaled(1), "4x": scaled_env.scaled(4), "16x": scaled_env.scaled(16)}
    sizes["caps"] = scaled_env.AT_CAPS
    seconds, admitted = {}, []
    with tempfile.TemporaryDirectory(prefix="evoenv-bench-") as tmp:
        for label, size in sizes.items():
            lib = Path(tmp) / f"lib-{label}"
            lib.mkdir()
            (lib / f"scaled_{label}.py").write_text(scaled_env.source(*size, f"scaled_{label}"))
            out = prepare_out_dir(Path(tmp) / f"out-{label}", resume=False, clean=False)
            validate.run(EnvLibrary.open(lib), ValidateConfig(), RuntimeConfig(workers=2), out)
            (record,) = read_jsonl(out / "verdicts.jsonl")
            seconds[label] = record["wall_s"]
            admitted.append(record["admitted"])
    base_size = sum(sizes["1x"])
    parts = []
    for label, size in sizes.items():
        ratio, grown = seconds[label] / seconds["1x"], sum(size) / base_size
        parts.append(f"{label}={seconds[label]:.2f}s(time_x{ratio:.1f}/size_x{grown:.0f}={ratio / grown:.2f})")
    print(
        f"bench validate growth: per_env_s {' '.join(parts)} admitted={sum(admitted)}/{len(admitted)} "
        f"caps=ref{sizes['caps'][0]}/prompt{sizes['caps'][1]}/instance{sizes['caps'][2]}"
    )


if __name__ == "__main__":
    main()
    side_by_side()
    training_seen_side_by_side()
    measured_pay_side_by_side()
    growth()
