"""`evoenv calibrate`: the difficulty contract, and pool rotation.

The solver (by default the policy) answers M fresh instances K times at a few difficulty
levels; answers are extracted and scored in the sandbox. A coarse sweep (1, 4, 7, 10 by
default) is refined between coarse levels where the pass rate crosses the band, and the levels
whose pass rate lies in [LO, HI] are the environment's calibrated levels. Every request of a
sweep, over all environments, goes to the backend as one batch.

Pass rate = the mean score over every response, as training rewards it: a response without an
extractable answer scores 0 (so a model that runs out of tokens does not make a hard
environment look easy), and the no-answer share is reported beside it. Only when no response
at all had an answer is the verdict `no_answers` (a format problem, not a difficulty signal).
A pass rate of exactly 0 or 1 is never in the band, whatever its edges. Every response is kept
in `responses.jsonl` (raw text, extracted answer, score), so a calibration can be audited.

Chance and sample size. A level is in band only when its pass rate also beats guessing: each
level's guess rate is measured, not assumed. `guess_instances` fresh instances are made at the
level, and each scores the other instances' distinct reference answers as guesses (answers of
the reference's type and shape; for label answers, such as a SELECT composite's, that is the
label set, so the rate is an exact count: 1/k for k labels) in the sandbox. The
pass rate must beat that rate in a one-sided exact binomial test at `alpha`. While a level's
95% interval (Wilson) straddles a band edge, its instances are doubled, up to `max_samples`
responses; a pass rate of exactly 0 or 1 is decided at once (no group there has variance to
learn from). Each level's record carries n, its interval, the guess rate and the test's
p-value beside the pass rate.

Run on a pool that was calibrated before (its index.jsonl carries `calibration`), the same
command is pool rotation (the loop's step: stages/rotate.py): an environment that misses the
band (widened by a margin) on `retire_after` consecutive calibrations retires as
retired_too_easy / retired_too_hard.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evoenv_cli import artifacts
from evoenv_cli.admission import SUMMARY, AdmissionLog, Summary, Verdict
from evoenv_cli.confidence import above_chance_p_value, wilson_interval
from evoenv_cli.config import AnswerConfig, CalibrateConfig, RuntimeConfig, SampleConfig, prompt_settings, to_dict
from evoenv_cli.conversations import Draw, prepare
from evoenv_cli.envfile import EnvFile
from evoenv_cli.integrations.rewards import extract_answer
from evoenv_cli.llm.base import Backend, SamplingConfig
from evoenv_cli.runtime.instances import Order, make_instances
from evoenv_cli.runtime.session import Runtime, shared
from evoenv_cli.runtime.workers import Call, EnvLoadError, SandboxWorkers
from evoenv_cli.stage import Context, Stage, register

CHECKS = (
    "run",
    "backend_error",
    "no_answers",
    "too_easy",
    "too_hard",
    "flat",
    "at_chance",
    "missed_band",
    "retired_too_easy",
    "retired_too_hard",
)
GROWTH_PASSES = 8  # doublings of a level's instances at most (max_samples stops them first)


def calibration_seed(base: int, env_name: str, level: int, i: int, kind: str = "calibrate") -> int:
    """Instance seeds of calibration: stable per (base, env, level, i), salted apart from the
    seeds `sample` and `evaluate` use (and, with `kind="guess"`, from the asked ones)."""
    digest = hashlib.sha256(f"{kind}:{base}:{env_name}:{level}:{i}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


@dataclass
class Level:
    """One level's measurement. Every response the model gave counts, as training rewards it:
    a response without an extractable answer scores 0 (its share is reported beside the pass
    rate); completions the backend failed to return are not the model's and are left out."""

    scores: list[float] = field(default_factory=list)  # one per response, 0.0 without an answer
    no_answer: int = 0
    errors: int = 0  # completions the backend failed to return
    failed: int = 0  # instances that could not be made in the sandbox
    asked: int = 0  # instances asked so far (a grown level continues the same seed sequence)
    guess: float | None = None  # the measured guess rate (None: not measured, taken as 0)
    guesses: int = 0  # (instance, guess) pairs it was measured on

    @property
    def responses(self) -> int:
        return len(self.scores)

    @property
    def pass_rate(self) -> float | None:
        return sum(self.scores) / len(self.scores) if self.scores else None

    @property
    def p_value(self) -> float | None:
        """One-sided: how likely guessing scores this well (partial credit summed into successes)."""
        if not self.scores:
            return None
        return above_chance_p_value(round(sum(self.scores)), len(self.scores), self.guess or 0.0)

    def record(self) -> dict:
        p, pv = self.pass_rate, self.p_value
        return {
            "pass_rate": None if p is None else round(p, 4),
            "n": len(self.scores),
            "ci95": wilson_interval(p, len(self.scores)),
            "guess_rate": None if self.guess is None else round(self.guess, 4),
            "p_value": None if pv is None else round(pv, 6),
            "no_answer_share": round(self.no_answer / self.responses, 4) if self.responses else None,
        }


@dataclass
class Subject:
    env: EnvFile
    name: str
    curve: dict[int, Level] = field(default_factory=dict)
    error: str | None = None


def in_band(p: float, lo: float, hi: float) -> bool:
    """A pass rate of exactly 0 or 1 is never in a band, whatever its edges: every group of
    such a level has zero reward variance, so GRPO learns nothing there."""
    return lo <= p <= hi and 0.0 < p < 1.0


def level_in_band(m: Level, lo: float, hi: float, cfg: CalibrateConfig) -> bool:
    """The level rule: in the band, and above chance by a margin its sample size supports."""
    p, pv = m.pass_rate, m.p_value
    return p is not None and in_band(p, lo, hi) and pv is not None and pv < cfg.alpha


def decided(m: Level, cfg: CalibrateConfig) -> bool:
    """Whether a level's verdict stands: its interval lies inside the band (and it beats
    guessing) or outside it, it cannot beat guessing, its rate is exactly 0 or 1, or it was
    measured on `max_samples` responses already."""
    p = m.pass_rate
    if p is None or p in (0.0, 1.0) or m.responses >= cfg.max_samples or m.asked == 0:
        return True
    lo, hi = cfg.band
    a, b = wilson_interval(p, m.responses)
    if b < lo or a > hi or b <= (m.guess or 0.0):
        return True
    return lo <= a and b <= hi and level_in_band(m, lo, hi, cfg)


def measure_guesses(subjects: list[Subject], cfg: CalibrateConfig, pool: SandboxWorkers) -> None:
    """The guess rate of every measured level that has none yet: `guess_instances` fresh
    instances at the level; each scores, in the sandbox, the distinct reference answers of the
    others (at most 16) as guesses, and the rate is the mean score."""
    wanted = [
        (s, lv) for s in subjects if not s.error for lv, m in sorted(s.curve.items()) if m.guess is None and m.asked
    ]
    if not wanted:
        return
    by_env: dict[EnvFile, list[tuple[Subject, int]]] = {}
    for s, lv in wanted:
        by_env.setdefault(s.env, []).append((s, lv))

    def one(job: tuple[EnvFile, list[tuple[Subject, int]]]) -> None:
        # one environment's instances, their answers and the guesses scored, on its worker
        env, levels = job
        orders = [
            Order(
                env,
                [(calibration_seed(cfg.seed, s.name, lv, i, "guess"), lv) for i in range(cfg.guess_instances)],
                ask=("solve",),
            )
            for s, lv in levels
        ]
        calls: list[Call] = []
        spans: list[tuple[Subject, int, int]] = []
        for (s, lv), ms in zip(levels, make_instances(pool, orders)):
            ok = [m for m in ms if m.failure() is None]
            # each instance against the *other* instances' answers: its own reference among the
            # guesses would make any task look guessable at 1 / (distinct answers)
            mine = [
                Call.score(m.instance, g)
                for i, m in enumerate(ok)
                for g in list(dict.fromkeys(o.answer for j, o in enumerate(ok) if j != i))[:16]
            ]
            spans.append((s, lv, len(mine)))
            calls += mine
        results = pool.run(env, calls) if calls else []
        start = 0
        for s, lv, n in spans:
            values = [r.value if r.ok else 0.0 for r in results[start : start + n]]
            start += n
            s.curve[lv].guesses = n
            s.curve[lv].guess = sum(values) / n if n else 0.0
        if len(by_env) > 1:
            pool.retire(env)

    pool.per_env(one, list(by_env.items()))


def sweep(
    subjects: list[Subject],
    levels_of: Callable[[Subject], list[int]],
    cfg: CalibrateConfig,
    sample_cfg: SampleConfig,
    pool: SandboxWorkers,
    backend: Backend,
    responses: artifacts.JsonlAppender | None = None,
    answer: AnswerConfig | None = None,
    grow: bool = False,
) -> None:
    """Measure the given levels of every subject: instances in the sandbox (prompts built as
    for training), one backend batch for all of them, answers scored in the sandbox. Every
    response is appended to `responses` (the raw text, the extracted answer and its score).
    With `grow`, levels already measured are asked as many new instances again (up to
    `max_samples` responses); otherwise only levels not measured yet are asked."""
    plans, levels_asked = [], []
    for s in subjects:
        if s.error:
            continue
        pairs = []
        for lv in levels_of(s):
            m = s.curve.get(lv)
            if m is None:
                m = s.curve[lv] = Level()
                count = cfg.instances
            elif grow:  # double the instances, up to max_samples responses
                count = min(m.asked, -(-(cfg.max_samples - m.responses) // cfg.samples))
            else:
                continue
            pairs += [(calibration_seed(cfg.seed, s.name, lv, i), lv) for i in range(m.asked, m.asked + count)]
            m.asked += max(count, 0)
        if pairs:
            plans.append(Draw(s.env, s.name, pairs))
            levels_asked.append(s)
    if not plans:
        return
    answer = answer or AnswerConfig()
    prepared, skipped = prepare(pool, plans, sample_cfg, answer)
    by_file = {s.env.path.name: s for s in levels_asked}
    for skip in skipped:
        by_file[skip["env"]].curve[skip["difficulty"]].failed += 1
    asked = []
    for s, made in zip(levels_asked, prepared):
        if not made:
            first = next(k for k in skipped if k["env"] == s.env.path.name)
            s.error = f"{first['reason']} (every instance failed)"
        asked += [(s, p) for p in made]
    if not asked:
        return
    sampling = SamplingConfig(
        n=cfg.samples, temperature=cfg.temperature, top_p=cfg.top_p, max_tokens=cfg.max_tokens, seed=cfg.seed
    )
    generations = backend.generate([p.messages for _, p in asked], sampling, prompt_ids=[p.seed for _, p in asked])
    score_jobs: dict[str, tuple[EnvFile, list[Call], list[int]]] = {}
    rows: list[dict] = []
    for (s, p), gen in zip(asked, generations):
        for j, c in enumerate(gen.completions):
            row = {
                "file": s.env.path.name,
                "env_id": s.env.env_id,
                "name": s.name,
                "level": p.difficulty,
                "seed": p.seed,
                "sample": j,
                "response": c.text,
                "finish_reason": c.finish_reason,
                "tokens": c.tokens,
                "answer": None,
                "score": None,
                "reference": p.answer,
            }
            rows.append(row)
            if c.finish_reason == "error":
                s.curve[p.difficulty].errors += 1
                continue
            extracted = extract_answer(
                c.text, answer.tag, opened=getattr(backend, "opens_think", None), truncated=c.finish_reason == "length"
            )
            row["answer"] = extracted
            if extracted is None:
                s.curve[p.difficulty].no_answer += 1
                s.curve[p.difficulty].scores.append(0.0)
                row["score"] = 0.0
                continue
            job = score_jobs.setdefault(s.env.env_id, (s.env, [], []))
            job[1].append(Call.score(p.instance, extracted))
            job[2].append(len(rows) - 1)
    jobs = list(score_jobs.values())
    for (_, _, where), rs in zip(jobs, pool.run_many([(e, calls) for e, calls, _ in jobs])):
        for k, r in zip(where, rs):
            value = r.value if r.ok else 0.0
            rows[k]["score"] = value
            by_file[rows[k]["file"]].curve[rows[k]["level"]].scores.append(value)
    if responses is not None:
        for row in rows:
            responses.append(row)


def undecided(s: Subject, cfg: CalibrateConfig) -> list[int]:
    """The measured levels whose verdict is not yet supported by their sample size."""
    return [] if s.error else [lv for lv, m in sorted(s.curve.items()) if not decided(m, cfg)]


def refine_levels(s: Subject, cfg: CalibrateConfig) -> list[int]:
    """Levels between coarse neighbours whose pass rates bracket or touch the band."""
    lo, hi = cfg.band
    known = sorted(lv for lv, m in s.curve.items() if m.pass_rate is not None)
    extra = []
    for a, b in zip(known, known[1:]):
        pa, pb = s.curve[a].pass_rate, s.curve[b].pass_rate
        crosses = min(pa, pb) <= hi and max(pa, pb) >= lo and min(pa, pb) < 1 and max(pa, pb) > 0
        if crosses and b - a > 1:
            extra += range(a + 1, b)
    return extra


def judge(s: Subject, cfg: CalibrateConfig, previous: dict | None) -> Verdict:
    curve = {str(lv): s.curve[lv].record() for lv in sorted(s.curve)}
    responses = sum(m.responses for m in s.curve.values())
    no_answer = sum(m.no_answer for m in s.curve.values())
    m = {
        "curve": curve,
        "no_answer_share": round(no_answer / responses, 4) if responses else None,
        "band": list(cfg.band),
    }

    def verdict(admitted: bool, stage: str, reason: str, **extra) -> Verdict:
        return Verdict(s.env.path.name, s.env.env_id, s.name, admitted, stage, reason, {**m, **extra})

    if s.error:
        return verdict(False, "run", f"could not sample instances: {s.error}")
    rates = {lv: lvl.pass_rate for lv, lvl in s.curve.items() if lvl.pass_rate is not None}
    if not responses:
        errors = sum(m.errors for m in s.curve.values())
        return verdict(False, "backend_error", f"the backend returned no response ({errors} failed completions)")
    if no_answer == responses:
        why = (
            f"no response had an extractable answer ({no_answer} responses): a format problem, not a difficulty signal"
        )
        if cfg.on_no_answers == "admit":
            return verdict(
                True, "admitted", f"uncalibrated: {why}", levels=list(range(1, 11)), misses=0, uncalibrated=True
            )
        return verdict(False, "no_answers", why)
    lo, hi = cfg.band
    chosen = sorted(lv for lv in rates if level_in_band(s.curve[lv], lo, hi, cfg))
    chance = sorted(lv for lv, p in rates.items() if in_band(p, lo, hi) and lv not in chosen)
    low_level, high_level = min(rates), max(rates)
    spread = max(rates.values()) - min(rates.values())
    if all(p > hi or p >= 1.0 for p in rates.values()):
        kind, why = "too_easy", f"pass rate {rates[high_level]:.2f} > {hi} even at level {high_level}"
    elif all(p < lo or p <= 0.0 for p in rates.values()):
        kind, why = "too_hard", f"pass rate {rates[low_level]:.2f} < {lo} even at level {low_level}"
    elif len(rates) >= 3 and spread < cfg.flat_tolerance:
        kind, why = (
            "flat",
            (f"the pass rate does not respond to difficulty (it spans {spread:.2f} over levels {sorted(rates)})"),
        )
    elif chosen:
        return verdict(
            True, "admitted", f"pass rate in [{lo}, {hi}] above chance at levels {chosen}", levels=chosen, misses=0
        )
    elif chance:
        shown = ", ".join(
            f"{rates[lv]:.2f} vs guessing {s.curve[lv].guess or 0.0:.2f} at level {lv} "
            f"(n={s.curve[lv].responses}, p={s.curve[lv].p_value:.2g})"
            for lv in chance[:3]
        )
        kind, why = "at_chance", f"the pass rate does not beat guessing where it is in the band: {shown}"
    else:
        kind, why = "missed_band", "the pass rate jumps over the band between adjacent levels"
    if previous is None or not previous.get("curve"):  # never measured before: no hysteresis to give
        return verdict(False, kind, why, misses=int((previous or {}).get("misses", 0) or 0) + 1)
    # pool rotation: an environment already in the pool gets hysteresis
    wide = [lv for lv in rates if level_in_band(s.curve[lv], lo - cfg.margin, hi + cfg.margin, cfg)]
    if wide:
        return verdict(
            True, "admitted", f"within the band's margin at levels {sorted(wide)}", levels=sorted(wide), misses=0
        )
    misses = int(previous.get("misses", 0) or 0) + 1
    if misses >= cfg.retire_after and kind in ("too_easy", "too_hard"):
        return verdict(False, f"retired_{kind}", f"{why}; missed the band {misses} times in a row", misses=misses)
    if misses >= cfg.retire_after:
        return verdict(False, kind, f"{why}; missed the band {misses} times in a row", misses=misses)
    kept = [lv for lv in previous.get("levels", []) if type(lv) is int]
    if not kept:  # out of band before too: nothing measured in band to keep
        return verdict(False, kind, f"{why} (miss {misses} of {cfg.retire_after})", misses=misses)
    return verdict(
        True,
        "admitted",
        f"kept on its earlier levels: {why} (miss {misses} of {cfg.retire_after})",
        levels=kept,
        misses=misses,
    )


def run(
    library: artifacts.EnvLibrary,
    cfg: CalibrateConfig,
    sample_cfg: SampleConfig,
    runtime: RuntimeConfig,
    backend: Backend,
    out: Path,
    model_name: str,
    on_verdict: Callable[[Verdict], None] | None = None,
    session: Runtime | None = None,
    answer: AnswerConfig | None = None,
) -> Summary:
    answer = answer or AnswerConfig()
    with AdmissionLog(out, library.files, retry_stages=("backend_error",)) as log, shared(runtime, session) as rt:
        pool = rt.workers
        responses = _responses_log(out / "responses.jsonl", set(log.done))
        subjects = []
        for env in log.pending():
            try:
                name = pool.describe(env).get("NAME") or env.name
                subjects.append(Subject(env, name))
            except EnvLoadError as exc:
                subjects.append(Subject(env, env.name, error=str(exc)))
        for start in range(0, len(subjects), cfg.chunk):
            group = subjects[start : start + cfg.chunk]
            sweep(group, lambda s: list(cfg.coarse_levels), cfg, sample_cfg, pool, backend, responses, answer)
            measure_guesses(group, cfg, pool)
            sweep(group, lambda s: refine_levels(s, cfg), cfg, sample_cfg, pool, backend, responses, answer)
            measure_guesses(group, cfg, pool)
            # each pass doubles the undecided levels' instances; bounded, for responses that never come back
            for _ in range(GROWTH_PASSES):
                if not any(undecided(s, cfg) for s in group):
                    break
                sweep(group, lambda s: undecided(s, cfg), cfg, sample_cfg, pool, backend, responses, answer, grow=True)
            for s in group:
                previous = (library.index.get(s.env.env_id) or {}).get("calibration")
                v = judge(s, cfg, previous if isinstance(previous, dict) else None)
                log.add(v)
                if on_verdict:
                    on_verdict(v)
        responses.close()
        extra = {}
        for f, r in log.done.items():
            if r["admitted"]:
                extra[f] = {
                    "calibration": {
                        "curve": r["curve"],
                        "levels": r["levels"],
                        "band": r["band"],
                        "misses": r.get("misses", 0),
                        "model": model_name,
                        "no_answer_share": r["no_answer_share"],
                    }
                }
        return log.finish(
            "calibrate",
            CHECKS,
            library,
            {
                "calibrate": to_dict(cfg),
                "answer": to_dict(answer),
                "runtime": to_dict(runtime),
                "model": model_name,
                "backend": backend.name,
            },
            index_extra=extra,
            count_uncalibrated=True,
        )


def _responses_log(path: Path, final: set[str]) -> artifacts.JsonlAppender:
    """responses.jsonl, keeping (on resume) only the responses of files whose verdict is final:
    the others are measured again and would be counted twice."""
    if path.exists():
        rows = artifacts.read_jsonl_tolerant(path)
        kept = [r for r in rows if r.get("file") in final]
        if len(kept) != len(rows):
            artifacts.write_jsonl_atomic(path, kept)
    return artifacts.JsonlAppender(path)


# -- the stage's record (evoenv_cli/stage.py) ------------------------------------------------------
def _settings(ctx: Context) -> dict:
    r = ctx.recipe
    return dict(calibrate=r.calibrate, prompts=prompt_settings(r), backend=ctx.model.settings, limits=r.runtime.limits)


def _run(ctx: Context, lib, out: Path, llm, bar) -> Summary:
    r = ctx.recipe
    return run(
        lib,
        r.calibrate,
        r.sample,
        r.runtime,
        llm,
        out,
        ctx.model.name,
        on_verdict=bar.advance,
        session=ctx.session,
        answer=r.answer,
    )


STAGE = register(
    Stage(
        "calibrate",
        sections=("calibrate", "sample", "answer", "backend", "runtime.limits"),
        marker=SUMMARY,
        settings=_settings,
        run=_run,
        place=6,
        funnel="had the right difficulty",
        uses_model=True,
        in_round=lambda rnd, got: dict(library=got["library"].out, model=rnd.policy),  # the new candidates
        takes=("library",),
        gives="library",
    )
)
