"""`evoenv evaluate`: how well a model does on held-out environment instances and benchmarks.

Held-out instances (seeds with bit 31 set, so never a training or calibration seed),
benchmark files of {"question", "answer"} rows (math-verify or exact match) and reasoning-gym
tasks (`rg:TASK[:N]`, scored by the task's own `score_answer`) are asked in ONE backend batch;
pass@1 per item, environment, benchmark and overall, with the share of samples without an
answer, and with a baseline model the same items asked of it and the deltas. Models are
passed as factories so only one is loaded at a time. The rules in full: docs/stages.md
("evoenv evaluate").

Why one module: environment instances, benchmark files and reasoning-gym tasks are asked in
one backend batch and reported in one table; their builders share that batch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoenv_cli import artifacts
from evoenv_cli.artifacts import EnvLibrary
from evoenv_cli.confidence import paired_bootstrap, wilson_interval
from evoenv_cli.config import (
    AnswerConfig,
    EvaluateConfig,
    RuntimeConfig,
    SampleConfig,
    check_values,
    prompt_settings,
    to_dict,
)
from evoenv_cli.conversations import (
    Draw,
    draw_levels,
    levels_for,
    prepare,
    user_turn,
)
from evoenv_cli.envfile import EnvFile
from evoenv_cli.errors import InputError
from evoenv_cli.integrations import reasoning_gym_tasks as rg
from evoenv_cli.integrations.rewards import EnvReward, extract_answer
from evoenv_cli.llm.base import Backend, SamplingConfig
from evoenv_cli.runtime import contract
from evoenv_cli.runtime.instances import instance_seed
from evoenv_cli.runtime.session import Runtime
from evoenv_cli.runtime.workers import SandboxWorkers
from evoenv_cli.stage import Context, Input, Result, Round, Stage, register

HELDOUT_BIT = 1 << 31
RG_SEED_BASE = HELDOUT_BIT  # reasoning-gym items at held-out seeds, like every evaluation item
MAX_VERIFY_CHARS = 1000  # longer answers are compared by exact match only
STAGE_MARKER = "metrics.json"  # OUT/metrics.json: the evaluation finished (written last)


# -- benchmark files -------------------------------------------------------------------------------
@dataclass
class Bench:
    path: Path | None  # the JSONL file; None for a reasoning-gym task
    label: str  # the name metrics use: the file name (the path when two share a name), or the rg: spec
    rows: list[dict]  # {"question": str, "answer": str | None, "line": int}
    rg_items: rg.Items | None = None  # a reasoning-gym task: its items and its own scorer

    @property
    def source(self) -> str:
        return str(self.path) if self.path is not None else self.label

    def digest(self) -> str:
        """A hash of what was asked and expected, so two runs can be shown to share items."""
        if self.path is not None:
            return _file_hash(self.path)
        text = artifacts.dumps([[r["question"], r["answer"]] for r in self.rows])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_bench(path: str | Path, label: str | None = None) -> Bench:
    """A benchmark file: JSONL of {"question": str, "answer": str | number} rows. Anything else
    is an InputError naming the file and the line."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such benchmark file")
    rows = []
    try:
        with p.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as exc:
                    raise InputError(f"{p}:{n}: not valid JSON ({exc.msg})") from None
                if not isinstance(row, dict):
                    raise InputError(f'{p}:{n}: expected a JSON object with "question" and "answer"')
                q, a = row.get("question"), row.get("answer")
                if not isinstance(q, str) or not q.strip():
                    raise InputError(f'{p}:{n}: a benchmark row needs a non-empty "question" string')
                if isinstance(a, bool) or not isinstance(a, (str, int, float)) or not str(a).strip():
                    raise InputError(f'{p}:{n}: a benchmark row needs an "answer" (a string or a number)')
                rows.append({"question": q, "answer": str(a), "line": n})
    except UnicodeDecodeError:
        raise InputError(f"{p}: not UTF-8 text") from None
    if not rows:
        raise InputError(f"{p}: no benchmark rows")
    return Bench(p, label or p.name, rows)


def load_rg_bench(spec: str, seed: int = 0) -> Bench:
    """A reasoning-gym task spec (`rg:chain_sum:32`) as a benchmark: its items at the dataset
    seed RG_SEED_BASE + seed, scored later by the task's own score_answer."""
    items = rg.generate(rg.parse_spec(spec), RG_SEED_BASE + seed)
    rows = [{"question": e["question"], "answer": e.get("answer"), "line": i} for i, e in enumerate(items.entries)]
    return Bench(None, spec, rows, rg_items=items)


def load_benches(paths: Sequence[str | Path], seed: int = 0) -> list[Bench]:
    """Every benchmark: files, each labelled by its name (by its path where names collide),
    and reasoning-gym task specs (`rg:TASK[:N[:KEY=VALUE,...]]`), labelled by the spec."""
    files = [p for p in paths if not rg.is_spec(str(p))]
    names = [Path(p).name for p in files]
    out = []
    for p in paths:
        if rg.is_spec(str(p)):
            out.append(load_rg_bench(str(p), seed))
        else:
            out.append(load_bench(p, Path(p).name if names.count(Path(p).name) == 1 else str(p)))
    labels = [b.label for b in out]
    dup = next((x for x in labels if labels.count(x) > 1), None)
    if dup is not None:
        raise InputError(f"{dup}: benchmark given twice")
    return out


# -- answer checking -------------------------------------------------------------------------------
def load_math_verify():
    """math-verify, imported on first use; None when it is not installed."""
    try:
        import math_verify
    except Exception:
        return None
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its "timeout disabled" notes
    return math_verify


def normalize(text: str) -> str:
    return " ".join(str(text).split()).casefold()


_MATHY = set("0123456789\\^_{}=+-*/()[]<>|.,%")


def _latex(text: str) -> str:
    """An answer as math-verify's LaTeX extraction wants it: inside $...$ unless delimited."""
    if "$" in text or "\\(" in text or "\\[" in text:
        return text
    return f"${text}$"


class AnswerChecker:
    """Is an answer right? Exact match (normalized) first; then math-verify equivalence where
    both sides look like math and parse; otherwise wrong. Word answers never go to math-verify
    (it would read `stop` and `pots` as the same product of symbols)."""

    def __init__(self, timeout_s: int = 5, math_verify: Any = "auto"):
        self.mv = load_math_verify() if math_verify == "auto" else math_verify
        self.timeout_s = max(1, int(timeout_s))
        self._gold: dict[str, Any] = {}

    def check(self, answer: str | None, reference: str) -> tuple[bool, str]:
        """(correct, method): method is "no_answer", "exact" or "math_verify"."""
        if answer is None:
            return False, "no_answer"
        if normalize(answer) == normalize(reference):
            return True, "exact"
        if self.mv is None or len(answer) > MAX_VERIFY_CHARS or not self._mathy(answer) or not self._mathy(reference):
            return False, "exact"
        if reference not in self._gold:
            self._gold[reference] = self._parse(reference)
        gold, pred = self._gold[reference], self._parse(answer)
        if not gold or not pred:
            return False, "exact"
        return bool(self._bounded(self._verify, gold, pred)), "math_verify"

    @staticmethod
    def _mathy(text: str) -> bool:
        return any(c in _MATHY for c in text)

    def _parse(self, text: str) -> list:
        return self._bounded(self._parse_now, text) or []

    def _parse_now(self, text: str, timeout: int | None) -> list:
        return self.mv.parse(_latex(text), parsing_timeout=timeout)

    def _verify(self, gold: list, pred: list, timeout: int | None) -> bool:
        return self.mv.verify(gold, pred, timeout_seconds=timeout)

    def _bounded(self, fn: Callable, *args: Any) -> Any:
        """On the main thread math-verify bounds itself (signal.alarm); elsewhere the alarm is
        off and the call runs in a daemon thread we stop waiting for after the timeout (the
        result then counts as unparsable / not equal)."""
        if threading.current_thread() is threading.main_thread():
            try:
                return fn(*args, self.timeout_s)
            except Exception:
                return None
        box: list = []

        def work() -> None:
            try:
                box.append(fn(*args, None))
            except Exception:
                box.append(None)

        t = threading.Thread(target=work, daemon=True, name="evoenv-math-verify")
        t.start()
        t.join(self.timeout_s)
        return box[0] if box else None


# -- items -----------------------------------------------------------------------------------------
@dataclass
class Item:
    kind: str  # "env" | "bench"
    source: str  # environment NAME or benchmark label
    item: str  # id, unique in a run
    messages: list[dict]
    reference: str | None
    seed: int | None = None  # env: the held-out instance seed
    difficulty: int | None = None  # env
    index: int | None = None  # bench: the row's position in its file (0-based)
    env: EnvFile | None = None
    instance: dict | None = None
    rg_items: rg.Items | None = None  # bench from reasoning-gym: scored by its score_answer


@dataclass
class ModelSpec:
    """A model to evaluate: its name (recorded) and how to build its backend when its turn
    comes (a callable returning a Backend, used as a context manager and closed after), or a
    backend already open (a loop's, which outlives this evaluation: left open)."""

    name: str
    factory: Callable[[], Backend] | None = None
    backend: Backend | None = None

    def open(self) -> contextlib.AbstractContextManager[Backend]:
        if self.backend is not None:
            return contextlib.nullcontext(self.backend)
        return self.factory()


def env_items(
    library: EnvLibrary,
    cfg: EvaluateConfig,
    sample_cfg: SampleConfig,
    pool: SandboxWorkers,
    answer: AnswerConfig | None = None,
) -> tuple[list[Item], list[dict]]:
    """Held-out instances of every environment, generated and prompted in the sandbox.
    Environments or instances that fail are returned as skips ({"env", "seed", "difficulty",
    "reason"}), not raised."""
    skipped: list[dict] = [
        {"env": r.file, "seed": None, "difficulty": None, "reason": r.reason} for r in library.refused
    ]
    plans = []
    index_cfg = dataclasses.replace(sample_cfg, difficulty=None, difficulty_from="index")
    for env in library.files:
        error = pool.load_error(env)
        meta = {} if error else pool.describe(env)
        missing = [n for n in contract.REQUIRED_FUNCTIONS if n not in meta.get("callables", [])]
        if error or missing:
            skipped.append(
                {
                    "env": env.path.name,
                    "seed": None,
                    "difficulty": None,
                    "reason": error or f"missing {', '.join(missing)}",
                }
            )
            continue
        name = meta.get("NAME") or env.name
        levels = draw_levels(levels_for(env, library, index_cfg), cfg.instances)
        if not levels:
            skipped.append(
                {"env": env.path.name, "seed": None, "difficulty": None, "reason": "calibrated: no level in band"}
            )
            continue
        pairs = [(instance_seed(cfg.seed, name, i, split="heldout"), lv) for i, lv in enumerate(levels)]
        plans.append(Draw(env, name, pairs))
    prepared, more = prepare(pool, plans, sample_cfg, answer or AnswerConfig(), need_answer=False)
    skipped += more
    items = [
        Item(
            "env",
            p.name,
            f"{p.name}:{p.seed}",
            p.messages,
            p.answer,
            seed=p.seed,
            difficulty=p.difficulty,
            env=p.env,
            instance=p.instance,
        )
        for made in prepared
        for p in made
    ]
    return items, skipped


def bench_items(
    benches: Sequence[Bench], cfg: EvaluateConfig, sample_cfg: SampleConfig, answer: AnswerConfig | None = None
) -> list[Item]:
    """One item per benchmark row. With `sample.demonstrations = k`, each question is preceded
    by k other rows of the same file with their reference answers in the answer tags (few-shot,
    as for environment instances), chosen with an answer unlike the asked one where possible."""
    items = []
    answer = answer or AnswerConfig()
    for b in benches:
        for i, row in enumerate(b.rows):
            messages = [{"role": "system", "content": sample_cfg.system_prompt}] if sample_cfg.system_prompt else []
            for demo in bench_demonstrations(b.rows, i, sample_cfg.demonstrations):
                messages.append(user_turn(demo["question"], answer.bench_text))
                messages.append({"role": "assistant", "content": answer.tagged(demo["answer"])})
            messages.append(user_turn(row["question"], answer.bench_text))
            items.append(
                Item("bench", b.label, f"{b.label}:{i}", messages, row["answer"], index=i, rg_items=b.rg_items)
            )
    return items


def bench_demonstrations(rows: list[dict], i: int, wanted: int) -> list[dict]:
    """Up to `wanted` other rows, in file order after row i (wrapping), unlike answers first."""
    if not wanted:
        return []
    others = [rows[(i + k) % len(rows)] for k in range(1, len(rows))]
    mine = normalize(rows[i]["answer"])
    differ = [r for r in others if normalize(r["answer"]) != mine]
    return (differ + [r for r in others if normalize(r["answer"]) == mine])[:wanted]


# -- asking and scoring ----------------------------------------------------------------------------
def sampling_of(cfg: EvaluateConfig) -> SamplingConfig:
    return SamplingConfig(
        n=cfg.samples, temperature=cfg.temperature, top_p=cfg.top_p, max_tokens=cfg.max_tokens, seed=cfg.seed
    )


def ask(
    items: list[Item], backend: Backend, cfg: EvaluateConfig, reward: EnvReward, checker: AnswerChecker, model_name: str
) -> list[dict]:
    """Every item's n samples from one backend batch, scored; one record per sample."""
    if not items:
        return []
    generations = backend.generate([it.messages for it in items], sampling_of(cfg))
    records: list[dict] = []
    env_at: list[int] = []  # positions in records of env samples that have text to score
    texts, cuts, env_ids, instances, names = [], [], [], [], []
    for it, gen in zip(items, generations):
        for j, c in enumerate(gen.completions):
            error = c.finish_reason == "error"
            rec = {
                "model": model_name,
                "kind": it.kind,
                "source": it.source,
                "item": it.item,
                "seed": it.seed,
                "difficulty": it.difficulty,
                "index": it.index,
                "sample": j,
                "prompt": it.messages,
                "response": c.text,
                "answer": None,
                "reference": it.reference,
                "score": 0.0,
                "status": "backend_error" if error else "",
                "finish_reason": c.finish_reason,
            }
            cut = c.finish_reason == "length"
            if it.kind == "bench" and not error and it.rg_items is not None:
                answer = extract_answer(
                    c.text, reward.answer_tag, opened=getattr(backend, "opens_think", None), truncated=cut
                )
                raw, problem = it.rg_items.score(answer, it.index) if answer is not None else (0.0, None)
                rec.update(
                    answer=answer,
                    score=1.0 if raw >= 1.0 else 0.0,
                    rg_score=raw,
                    status="no_answer" if answer is None else ("score_answer_error" if problem else "score_answer"),
                )
                if problem:
                    rec["error"] = problem
            elif it.kind == "bench" and not error:
                answer = extract_answer(
                    c.text, reward.answer_tag, opened=getattr(backend, "opens_think", None), truncated=cut
                )
                ok, method = checker.check(answer, it.reference)
                rec.update(answer=answer, score=1.0 if ok else 0.0, status=method)
            elif it.kind == "env" and not error:
                env_at.append(len(records))
                texts.append(c.text)
                cuts.append(cut)
                env_ids.append(it.env.env_id)
                instances.append(it.instance)
                names.append(it.source)
            records.append(rec)
    if texts:  # the training reward's own path: extraction, then score() in the sandbox
        for k, d in zip(
            env_at,
            reward.details(texts, env_ids, instances, names, cuts=cuts, opened=getattr(backend, "opens_think", None)),
        ):
            records[k].update(answer=d["answer"], score=float(d["score"]), status=d["status"])
    return records


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def summarize(items: list[Item], records: list[dict], n: int) -> dict:
    """pass@1 and no-answer share per environment, per benchmark and overall."""
    per_item: dict[str, list[dict]] = {}
    for r in records:
        per_item.setdefault(r["item"], []).append(r)
    groups: dict[tuple[str, str], list[Item]] = {}
    for it in items:
        groups.setdefault((it.kind, it.source), []).append(it)

    def stats(group: list[Item]) -> dict:
        samples = [r for it in group for r in per_item.get(it.item, [])]
        item_means = [
            sum(r["score"] for r in per_item[it.item]) / len(per_item[it.item]) for it in group if per_item.get(it.item)
        ]
        no_answer = sum(r["answer"] is None for r in samples)
        out = {
            "pass@1": _mean(item_means),
            "ci95": wilson_interval(_mean(item_means), len(item_means)),
            "items": len(group),
            "n": n,
            "samples": len(samples),
            "no_answer_share": round(no_answer / len(samples), 4) if samples else None,
            "errors": sum(r["status"] == "backend_error" for r in samples),
        }
        return out, item_means

    envs, benches, all_means, raw = {}, {}, [], {"env": [], "bench": []}
    for (kind, source), group in groups.items():
        s, means = stats(group)
        all_means += means
        if means:
            raw[kind].append(sum(means) / len(means))
        if kind == "env":
            s["levels"] = sorted({it.difficulty for it in group})
            s["seeds"] = [it.seed for it in group]
            envs[source] = s
        else:
            methods = [r["status"] for it in group for r in per_item.get(it.item, [])]
            s["checked_by"] = {
                m: methods.count(m) for m in ("math_verify", "exact", "score_answer") if methods.count(m)
            }
            if group[0].rg_items is not None:  # reasoning-gym's own partial-credit mean
                partial = [
                    sum(r.get("rg_score", 0.0) for r in per_item[it.item]) / len(per_item[it.item])
                    for it in group
                    if per_item.get(it.item)
                ]
                s["mean_score"] = _mean(partial)
                s["score_answer_errors"] = methods.count("score_answer_error")
            benches[source] = s
    everything, _ = stats(items)
    # each item's pass rate, by item: a later comparison pairs the same items (delta_ci95)
    item_pass = {
        it.item: round(sum(r["score"] for r in per_item[it.item]) / len(per_item[it.item]), 4)
        for it in items
        if per_item.get(it.item)
    }
    overall = {
        "pass@1": _mean(all_means),
        "ci95": wilson_interval(_mean(all_means), len(all_means)),
        "env_mean": _mean(raw["env"]),
        "bench_mean": _mean(raw["bench"]),
        "items": everything["items"],
        "samples": everything["samples"],
        "no_answer_share": everything["no_answer_share"],
        "errors": everything["errors"],
        "item_pass": item_pass,
    }
    return {"overall": overall, "environments": envs, "benchmarks": benches}


def paired_change(results: dict, baseline: dict) -> list[float] | None:
    """The 95% paired-bootstrap interval of overall pass@1's change (model - baseline), over
    the items both were asked; None when either side has no per-item record (an older
    baseline) or no item in common."""
    a = results.get("overall", {}).get("item_pass") or {}
    b = baseline.get("overall", {}).get("item_pass") or {}
    common = [k for k in a if k in b]
    if not common:
        return None
    return paired_bootstrap([a[k] for k in common], [b[k] for k in common])[1]


def _reused_baseline(baseline: dict, mine: dict) -> dict:
    """A baseline measured earlier on the same items (a loop measures it once per run); its
    item counts must match this evaluation's, or the comparison would be of different sets."""
    theirs = {k: v.get("items") for k, v in baseline.get("environments", {}).items()}
    ours = {k: v.get("items") for k, v in mine.get("environments", {}).items()}
    if theirs != ours or baseline.get("overall", {}).get("items") != mine["overall"]["items"]:
        raise ValueError(
            f"the cached baseline of {baseline.get('model')} was measured on other items "
            f"({baseline.get('overall', {}).get('items')} vs {mine['overall']['items']})"
        )
    return baseline


def flat(results: dict) -> dict[str, float | None]:
    """The numbers a comparison shows, in table order: name -> value."""
    o = results["overall"]
    out = {"overall pass@1": o["pass@1"]}
    if results["environments"]:
        out["environments pass@1 (mean)"] = o["env_mean"]
        out.update({f"  env {k}": v["pass@1"] for k, v in results["environments"].items()})
    if results["benchmarks"]:
        out["benchmarks pass@1 (mean)"] = o["bench_mean"]
        out.update({f"  bench {k}": v["pass@1"] for k, v in results["benchmarks"].items()})
    out["no-answer share"] = o["no_answer_share"]
    return out


def deltas(results: dict, baseline: dict) -> dict[str, float | None]:
    a, b = flat(results), flat(baseline)
    return {k.strip(): None if a[k] is None or b.get(k) is None else round(a[k] - b[k], 4) for k in a}


def table_rows(metrics: dict) -> list[tuple[str, float | None, float | None, float | None]]:
    """(metric, model, baseline, delta) for the side-by-side table (baseline/delta None
    without a baseline)."""
    mine = flat(metrics)
    base = flat(metrics["baseline"]) if metrics.get("baseline") else {}
    d = metrics.get("delta") or {}
    return [(k, v, base.get(k), d.get(k.strip())) for k, v in mine.items()]


# -- the stage -------------------------------------------------------------------------------------
def check_config(cfg: EvaluateConfig) -> None:
    """The field rules of config.EvaluateConfig, then the sampling settings as a backend takes them."""
    check_values(cfg, "evaluate")
    sampling_of(cfg)  # a BackendError (exit 2) for a bad n, temperature, top_p or max_tokens


def _file_hash(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()[:16]


def run(
    out: Path,
    cfg: EvaluateConfig,
    model: ModelSpec,
    *,
    library: EnvLibrary | None = None,
    benches: Sequence[Bench] = (),
    baseline: ModelSpec | None = None,
    sample_cfg: SampleConfig | None = None,
    answer: AnswerConfig | None = None,
    runtime: RuntimeConfig | None = None,
    checker: AnswerChecker | None = None,
    note: Callable[[str], None] | None = None,
    session: Runtime | None = None,
    baseline_results: dict | None = None,
) -> dict:
    """Evaluate `model` (and `baseline`) into `out` (a prepared, empty folder): samples.jsonl
    (appended per model as it finishes), metrics.json (rewritten after each model) and
    manifest.json. Returns the metrics. `baseline_results`: the baseline's numbers measured
    earlier on the same items (its metrics' model part), compared with instead of asking it.
    `session`: the program's sandbox workers (a Runtime), scored on and left open."""
    check_config(cfg)
    if library is None and not benches:
        raise InputError("nothing to evaluate: give a library, benchmark files, or both")
    sample_cfg = sample_cfg or SampleConfig()
    answer = answer or AnswerConfig()
    runtime = runtime or RuntimeConfig()
    checker = checker or AnswerChecker(cfg.verify_timeout_s)
    started = artifacts.now_iso()
    envs = library.files if library is not None else []
    reward = EnvReward(
        envs,
        answer_tag=answer.tag,
        sandbox=runtime.sandbox,
        workers=runtime.workers,
        limits=runtime.limits,
        pool=session.workers if session is not None and envs else None,
    )
    metrics: dict = {}
    try:
        items, skipped = env_items(library, cfg, sample_cfg, reward.pool, answer) if envs else ([], [])
        items += bench_items(benches, cfg, sample_cfg, answer)
        if note:
            note(
                f"evaluate: {sum(it.kind == 'env' for it in items)} held-out instances, "
                f"{sum(it.kind == 'bench' for it in items)} benchmark questions, n={cfg.samples}"
            )
        base_metrics = {
            "n": cfg.samples,
            "config": to_dict(cfg),
            "answer": to_dict(answer),
            "sampling": sampling_of(cfg).record(),
            "library": str(library.root) if library is not None else None,
            "bench_files": [b.source for b in benches],
            "reasoning_gym": {b.label: b.rg_items.record() for b in benches if b.rg_items},
            "seeds": {"base": cfg.seed, "split": "heldout", "min_heldout_seed": HELDOUT_BIT, "environments": {}},
            "skipped": skipped,
            "math_verify": checker.mv is not None,
        }
        results = {}
        with artifacts.JsonlAppender(out / "samples.jsonl") as samples:
            for role, spec in (("model", model), ("baseline", baseline)):
                if spec is None:
                    continue
                if note:
                    note(f"evaluate: asking {spec.name} ({role})")
                with spec.open() as backend:
                    records = ask(items, backend, cfg, reward, checker, spec.name)
                for r in records:
                    samples.append({**r, "role": role})
                results[role] = {"model": spec.name, **summarize(items, records, cfg.samples)}
                if role == "model" and baseline_results is not None:
                    results["baseline"] = _reused_baseline(baseline_results, results["model"])
                metrics = {**results["model"], "baseline": None, "delta": None, **base_metrics}
                metrics["seeds"]["environments"] = {k: v["seeds"] for k, v in results["model"]["environments"].items()}
                if "baseline" in results:
                    metrics["baseline"] = results["baseline"]
                    metrics["delta"] = deltas(results["model"], results["baseline"])
                    change = paired_change(results["model"], results["baseline"])
                    if change is not None:
                        metrics["delta_ci95"] = {"overall pass@1": change}
    finally:
        reward.close()
    inputs: list = list(envs) + [b.path for b in benches if b.path is not None]
    artifacts.write_json_atomic(
        out / artifacts.MANIFEST,
        artifacts.manifest(
            "evaluate",
            {
                "evaluate": to_dict(cfg),
                "sample": to_dict(sample_cfg),
                "answer": to_dict(answer),
                "runtime": to_dict(runtime),
            },
            inputs,
            started,
            {"items": len(items), "skipped": len(skipped)},
            extra={
                "model": model.name,
                "baseline": baseline.name if baseline else (baseline_results or {}).get("model"),
                "baseline_reused": baseline_results is not None,
                "bench_hashes": {b.source: b.digest() for b in benches},
            },
            out=out,
        ),
    )
    # the marker last: a kill before it (between two roles, or before the manifest) leaves the
    # evaluation unfinished, so a rerun evaluates again instead of taking half of it as done
    artifacts.write_json_atomic(out / STAGE_MARKER, metrics)
    return metrics


__all__ = [
    "AnswerChecker",
    "Bench",
    "Item",
    "ModelSpec",
    "ask",
    "bench_items",
    "check_config",
    "deltas",
    "env_items",
    "flat",
    "load_bench",
    "load_benches",
    "load_math_verify",
    "load_rg_bench",
    "normalize",
    "run",
    "summarize",
    "table_rows",
]


# -- the stage's record (evoenv_cli/stage.py) ------------------------------------------------------
def _check(ctx: Context, lib: EnvLibrary | None) -> None:
    if ctx.library is None and not ctx.inputs.get("bench"):
        raise InputError("nothing to evaluate: pass --library, --bench FILE, or both")
    check_config(ctx.recipe.evaluate)
    if "benches" not in ctx.inputs:  # the loop passes them loaded once for the run
        ctx.inputs["benches"] = load_benches(ctx.inputs.get("bench", []), seed=ctx.recipe.evaluate.seed)
    base = ctx.inputs.get("baseline_model")
    if base is not None and base.check is not None:  # the baseline too, before OUT is touched
        base.check()


def _settings(ctx: Context) -> dict:
    r = ctx.recipe
    return dict(
        evaluate=r.evaluate,
        prompts=prompt_settings(r),
        backend=ctx.model.settings,
        baseline=ctx.inputs.get("baseline"),
        library=ctx.library,
        bench=list(ctx.inputs.get("bench", [])),
        limits=r.runtime.limits,
    )


def _run(ctx: Context, lib: EnvLibrary | None, out: Path, llm, bar) -> dict:
    """A command's models load in turn when their items come (and close after); the loop's
    policy is already loaded and stays so. Either shows its completions on the progress bar."""

    def shown(model) -> ModelSpec:
        def made():
            backend = model.get()
            backend.progress = getattr(bar, "generation", None)
            return backend

        return ModelSpec(model.name, made) if model.owned else ModelSpec(model.name, backend=made())

    r = ctx.recipe
    base = ctx.inputs.get("baseline_model")
    try:
        return run(
            out,
            r.evaluate,
            shown(ctx.model),
            library=lib,
            benches=ctx.inputs.get("benches", ()),
            baseline=shown(base) if base is not None else None,
            sample_cfg=r.sample,
            answer=r.answer,
            runtime=r.runtime,
            note=ctx.note,
            session=ctx.session,
            baseline_results=ctx.inputs.get("baseline_results"),
        )
    finally:
        if not ctx.model.owned and ctx.model.get() is not None:
            ctx.model.get().progress = None


def headline(metrics: dict) -> dict:
    """The evaluation numbers worth a line: pass@1 overall with its item count and 95%
    interval, on held-out environment instances and on benchmark files, and the overall change
    against the baseline."""
    overall = metrics.get("overall") or {}
    out = {
        "pass@1": overall.get("pass@1"),
        "items": overall.get("items"),
        "ci95": overall.get("ci95"),
        "env_pass@1": overall.get("env_mean"),
        "bench_pass@1": overall.get("bench_mean"),
    }
    delta = metrics.get("delta") or {}
    if isinstance(delta, dict) and "overall pass@1" in delta:
        out["delta_vs_baseline"] = delta["overall pass@1"]
        change = (metrics.get("delta_ci95") or {}).get("overall pass@1")
        if change:
            out["delta_ci95"] = change
    return {k: v for k, v in out.items() if v is not None}


def _line(label: str, done: Result, ctx: Context) -> str:
    shown = " ".join(f"{k}={v:.3f}" for k, v in headline(done.value).items() if isinstance(v, float))
    return f"{label}: {shown or '-'} -> {done.out}"


BASELINE_KEYS = ("model", "overall", "environments", "benchmarks")  # what a round's evaluation keeps of it


def _in_round(rnd: Round, got: dict) -> dict:
    """In the loop: the round's policy on the evaluation set frozen at round 1 (RUN/eval-set/)
    and the run's benchmarks, against the baseline's numbers when it was measured."""
    base = got["baseline"].summary if got["baseline"] is not None else None
    return dict(
        library=rnd.pool.eval_set,
        model=got["checkpoint"].policy,
        inputs={
            "bench": list(rnd.iterate.bench),
            "baseline": (base or {}).get("model"),
            "baseline_results": {k: base.get(k) for k in BASELINE_KEYS} if base is not None else None,
        },
    )


STAGE = register(
    Stage(
        "evaluate",
        sections=("evaluate", "sample", "answer", "backend", "runtime.limits"),
        marker=STAGE_MARKER,
        settings=_settings,
        run=_run,
        place=11,
        partial=("samples", "samples.jsonl"),
        rerun="rerun with --clean to start over",
        envs=False,
        resumable=False,
        library_optional=True,
        check=_check,
        in_round=_in_round,
        inputs=(
            Input(
                "bench",
                'A benchmark JSONL file of {"question", "answer"} rows, or a reasoning-gym task '
                "rg:TASK[:N[:KEY=VALUE,...]] (N items at fixed held-out seeds, scored by the task's own "
                "score_answer; needs the [rg] extra); repeatable.",
            ),
            Input("baseline", "A second model asked the same items; metrics.json gets both and the deltas."),
            Input("baseline_model", "The baseline's policy, opened when its items come.", "object"),
            Input(
                "baseline_results",
                "The baseline's numbers measured before (the loop's RUN/baseline): reused, not measured again.",
            ),
            Input("benches", "The benchmarks loaded (its check loads them from bench).", "object"),
        ),
        takes=("checkpoint", "baseline"),
        gives="metrics",
        line=_line,
    )
)
