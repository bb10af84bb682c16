"""The numbers behind every figure of `evoenv report`, computed from a run's files alone.

One function per figure, each returning plain JSON-ready data: the page draws exactly these
numbers and tables them beside each figure, and `evoenv report --json` prints them. Counts
come from the records themselves (verdicts.jsonl, generations.jsonl, metrics.jsonl), not from
summary.json, so a stage still running or killed part way counts what it has decided so far.
A missing file or field is None (shown as missing), never an error.

Why one module: one function per figure of the report, each short; they share the readers of the
run folder, and the page and `--json` import them from one place.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

from evoenv_cli import artifacts, origins, stages
from evoenv_cli.admission import VERDICTS
from evoenv_cli.loop import LOOP_FILE, ROUNDS_FILE
from evoenv_cli.report.run_files import Line, RunFiles
from evoenv_cli.stage import Stage, round_name
from evoenv_cli.stages.dedupe import CANDIDATES
from evoenv_cli.stages.synthesize import GENERATIONS
from evoenv_cli.stages.train import METRICS_FILE

CONTRACTS = ("dedupe", "calibrate")  # the two contracts, whose order a round records in loop.json
ADMISSION_BEFORE = (("validate", "synthesize"), ("review", "validate"), ("compose", None))
PARSE_REASONS = {
    "no_code": "no fenced Python block in the response",
    "syntax_error": "no fenced block that parses as Python",
    "missing_functions": "the code lacks generate/prompt/solve/score",
    "error": "the backend returned an error",
}
TOP_REASONS = 8
EXAMPLES_PER_REASON = 3


def step_summary(run: RunFiles, r: int, name: str) -> dict | None:
    """Step `name`'s summary in round r, from its Result (None: it has not finished)."""
    done = run.results(rdir(r)).get(name)
    return done.summary if done is not None else None


def rdir(r: int) -> str:
    return round_name(r)


def step_dir(r: int, name: str) -> str:
    """Round r's folder of step `name` (relative to RUN), where its record puts it; a folder the
    loop merges for a step (dedupe's candidates) by the name its module gives it."""
    if name == CANDIDATES:
        return f"{rdir(r)}/{CANDIDATES}"
    return str(stages.get(name).out_in(Path(rdir(r))))


def marker_of(r: int, name: str) -> str:
    """Round r's marker of step `name` (relative to RUN), as its record names it."""
    st = stages.get(name)
    return str(st.out_in(Path(rdir(r))) / st.marker)


def mean(values: list[float]) -> float | None:
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return round(sum(values) / len(values), 4) if values else None


def obj(value) -> dict:
    """A field that should hold a JSON object: itself, or {} when it holds anything else."""
    return value if isinstance(value, dict) else {}


def items(value) -> list:
    """A field that should hold a JSON list: itself, or [] when it holds anything else."""
    return value if isinstance(value, list) else []


def number(value) -> float | None:
    """A finite real number from a record, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if value == value and abs(value) != float("inf") else None


def delta(a, b) -> float | None:
    a, b = number(a), number(b)
    return None if a is None or b is None else round(a - b, 4)


def stem(file: str) -> str:
    return Path(file).stem


def files_of(lines: list[Line], admitted_only: bool = False) -> set[str]:
    """The `file` names of verdict lines (only the admitted ones, if asked)."""
    return {
        ln.record["file"]
        for ln in lines
        if isinstance(ln.record.get("file"), str) and (not admitted_only or ln.record.get("admitted") is True)
    }


def unique_by_file(lines: list[Line]) -> list[Line]:
    """One verdict per file (the last one written wins, as a resumed stage's would)."""
    seen: dict[str, Line] = {}
    for line in lines:
        f = line.record.get("file")
        if isinstance(f, str):
            seen[f] = line
    return list(seen.values())


def loop_order() -> tuple[str, str]:
    """The order the loop runs the two contracts in: their records' `place`."""
    names = [st.name for st in stages.round_steps() if st.name in CONTRACTS]
    return names[0], names[1]


def contract_order(run: RunFiles, r: int) -> tuple[str, str]:
    """The order round r ran dedupe and calibrate in, as it recorded it: round-NN/loop.json
    books each step as it runs (or is found finished). A round that reached neither runs the
    loop's order when resumed; one that reached them in a run with no loop.json at all predates
    loop.json, when every round calibrated first."""
    ran = [name for name in obj(obj(run.json(f"{rdir(r)}/{LOOP_FILE}")).get("stages")) if name in CONTRACTS]
    if len(ran) == 2:
        return ran[0], ran[1]
    reached = any(run.exists(step_dir(r, name)) for name in CONTRACTS)
    if reached and not any(run.exists(f"{rdir(k)}/{LOOP_FILE}") for k in run.rounds()):
        return CONTRACTS[1], CONTRACTS[0]
    return loop_order()


def admission(order: tuple[str, str]) -> tuple[tuple[str, str | None], ...]:
    """Admission stages in the order they ran: (folder, the folder whose envs/ holds the files
    it judged)."""
    first, second = order
    return (*ADMISSION_BEFORE, (first, CANDIDATES), (second, first))


def funnel_steps(order: tuple[str, str]) -> tuple[str, ...]:
    return ("generations", "parsed", "validate", "review", CANDIDATES, *order, "joined")


def round_steps(order: tuple[str, str]) -> list[Stage]:
    """The round's own steps' records, in the loop's order (the stage registry's); the two
    contracts in the order this round ran them. A step run once a run (the baseline) is the
    run's: the evaluation's section reads it."""
    out = []
    for st in stages.round_steps():
        if st.per_run:
            continue
        if st.name in order:
            if st.name == loop_order()[0]:  # where the contracts stand in the loop's own order
                out += [stages.get(name) for name in order]
            continue
        out.append(st)
    return out


_NUMBER = re.compile(r"\d+(\.\d+)?(e-?\d+)?")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_FILE = re.compile(r"\S+\.py\b")


def reason_pattern(reason: str) -> str:
    """A verdict's reason with its particulars (numbers, quoted values, file names) blanked, so
    that reasons of one kind group together."""
    text = _FILE.sub("FILE", str(reason).splitlines()[0] if reason else "")
    text = _QUOTED.sub("'…'", text)
    text = _NUMBER.sub("N", text)
    return text[:160]


# -- the round's progress --------------------------------------------------------------------------
def rounds_status(run: RunFiles) -> list[dict]:
    finished = {r["round"]: r for r in run.records(ROUNDS_FILE) if type(r.get("round")) is int}
    out = []
    for r in run.rounds():
        order = contract_order(run, r)
        steps, done = {}, run.results(rdir(r))
        for st in round_steps(order):
            folder = st.out_in(Path(rdir(r)))
            if st.name in done:
                steps[st.name] = "done"
            elif folder != Path(rdir(r)) and run.exists(str(folder)):
                steps[st.name] = "partial"
            else:
                steps[st.name] = "not started"
        stopped = next((name for name, s in steps.items() if s != "done"), None)
        out.append(
            {
                "round": r,
                "finished": r in finished,
                "steps": steps,
                "contract_order": list(order),
                "stopped_in": None if r in finished else stopped,
                "summary": finished.get(r),
            }
        )
    return out


# -- the admission funnel --------------------------------------------------------------------------
def _examples(run: RunFiles, lines: list[Line], verdicts: str, inputs: str | None) -> list[dict]:
    """A few rejected verdicts: where the verdict line is, and the judged file where it still is."""
    out = []
    for line in lines[:EXAMPLES_PER_REASON]:
        f = line.record.get("file")
        source = f"{inputs}/envs/{f}" if inputs and isinstance(f, str) and "/" not in f else None
        out.append(
            {
                "file": f,
                "name": line.record.get("name"),
                "verdicts": verdicts,
                "line": line.number,
                "check": line.record.get("stage"),
                "reason": line.record.get("reason"),
                "source": source if source and run.exists(source) else None,
            }
        )
    return out


def reasons(run: RunFiles, rejected: list[Line], verdicts: str, inputs: str | None) -> list[dict]:
    """Rejections grouped by the check that decided and the pattern of the reason, most
    frequent first, each with a few example verdicts."""
    groups: dict[tuple[str, str], list[Line]] = defaultdict(list)
    for line in rejected:
        check = str(line.record.get("stage") or "?")
        groups[(check, reason_pattern(line.record.get("reason") or ""))].append(line)
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    out = [
        {"check": check, "pattern": pattern, "count": len(lines), "examples": _examples(run, lines, verdicts, inputs)}
        for (check, pattern), lines in ranked[:TOP_REASONS]
    ]
    rest = ranked[TOP_REASONS:]
    if rest:
        out.append(
            {
                "check": "other",
                "pattern": f"{len(rest)} more kinds of reason",
                "count": sum(len(lines) for _, lines in rest),
                "examples": [],
            }
        )
    return out


def admission_stage(run: RunFiles, r: int, stage: str, inputs: str | None, composites: set[str]) -> dict:
    rel = step_dir(r, stage)
    if not run.exists(rel):
        return {
            "stage": stage,
            "status": "not started",
            "entered": None,
            "admitted": None,
            "rejected": None,
            "by_check": {},
            "reasons": [],
            "admitted_files": [],
        }
    lines = unique_by_file(run.jsonl(f"{rel}/{VERDICTS}"))
    admitted = [ln for ln in lines if ln.record.get("admitted") is True]
    rejected = [ln for ln in lines if ln.record.get("admitted") is not True]
    files = [ln.record["file"] for ln in admitted]
    return {
        "stage": stage,
        "status": "done" if stage in run.results(rdir(r)) else "partial",
        "entered": len(lines),
        "admitted": len(admitted),
        "rejected": len(rejected),
        "admitted_by_origin": {
            origins.SYNTHESIZE.label: sum(f not in composites for f in files),
            origins.COMPOSE.label: sum(f in composites for f in files),
        },
        "by_check": dict(Counter(str(ln.record.get("stage") or "?") for ln in rejected).most_common()),
        "reasons": reasons(run, rejected, f"{rel}/{VERDICTS}", step_dir(r, inputs) if inputs else None),
        "admitted_files": files,
    }


def synthesize_stage(run: RunFiles, r: int) -> dict:
    rel = f"{step_dir(r, 'synthesize')}"
    if not run.exists(rel):
        return {
            "stage": "synthesize",
            "status": "not started",
            "entered": None,
            "admitted": None,
            "rejected": None,
            "by_check": {},
            "reasons": [],
        }
    gens = run.jsonl(f"{rel}/{GENERATIONS}")
    failed = [ln for ln in gens if ln.record.get("outcome") != "ok"]
    groups: dict[str, list[Line]] = defaultdict(list)
    for ln in failed:
        groups[str(ln.record.get("outcome") or "?")].append(ln)
    reason_rows = []
    for outcome, lines in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        examples = [
            {
                "file": ln.record.get("file"),
                "name": f"request {ln.record.get('prompt_id')}",
                "verdicts": f"{rel}/{GENERATIONS}",
                "line": ln.number,
                "check": outcome,
                "reason": PARSE_REASONS.get(outcome, outcome),
                "source": None,
                "topic": ln.record.get("topic"),
            }
            for ln in lines[:EXAMPLES_PER_REASON]
        ]
        reason_rows.append(
            {
                "check": outcome,
                "pattern": PARSE_REASONS.get(outcome, outcome),
                "count": len(lines),
                "examples": examples,
            }
        )
    offered = sum(ln.record.get("origin") == origins.OFFERED.key for ln in run.jsonl(f"{rel}/{artifacts.INDEX}"))
    return {
        "stage": "synthesize",
        "status": "done" if "synthesize" in run.results(rdir(r)) else "partial",
        "entered": len(gens),
        "admitted": len(gens) - len(failed),
        "offered": offered,  # files a person offered, added beside the policy's (not generations)
        "rejected": len(failed),
        "by_check": {k: len(v) for k, v in groups.items()},
        "reasons": reason_rows,
    }


def pool_update(run: RunFiles, r: int) -> dict | None:
    return run.json(marker_of(r, "pool update"))


def joined_names(update: dict | None) -> list[str] | None:
    if update is None:
        return None
    joined = update.get("joined")
    return [j for j in joined if isinstance(j, str)] if isinstance(joined, list) else []


def funnel(run: RunFiles, r: int) -> dict:
    """One round's admission funnel: how many candidates survived each step, split into
    synthesized candidates and composites, and why the others were rejected."""
    compose_files = files_of(run.jsonl(f"{step_dir(r, 'compose')}/{VERDICTS}"))
    synth = synthesize_stage(run, r)
    stages = {"synthesize": synth}
    order = contract_order(run, r)
    for stage, inputs in admission(order):
        stages[stage] = admission_stage(run, r, stage, inputs, compose_files)
    update = pool_update(run, r)
    joined = joined_names(update)
    dedupe_origin = {
        ln.record["name"]: ln.record.get("origin")
        for ln in run.jsonl(f"{step_dir(r, 'dedupe')}/{artifacts.INDEX}")
        if isinstance(ln.record.get("name"), str)
    }

    def joined_composite(name: str) -> bool:
        origin = dedupe_origin.get(name)
        return origin == origins.COMPOSE.key if origin else f"{name}.py" in compose_files

    def split(stage: str) -> tuple[int | None, int | None]:
        s = stages[stage]
        if s["admitted"] is None:
            return None, None
        by = s.get("admitted_by_origin", {})
        return by.get(origins.SYNTHESIZE.label), by.get(origins.COMPOSE.label)

    rev_s = stages["review"]["admitted"]
    comp_c = stages["compose"]["admitted"]
    steps = [
        ("generations", synth["entered"], None),
        ("parsed", synth["admitted"], None),
        *((("offered", synth["offered"], None),) if synth.get("offered") else ()),
        ("validate", stages["validate"]["admitted"], None),
        ("review", rev_s, None),
        ("candidates", rev_s, comp_c),
        *((stage, *split(stage)) for stage in order),
        (
            "joined",
            None if joined is None else sum(not joined_composite(n) for n in joined),
            None if joined is None else sum(joined_composite(n) for n in joined),
        ),
    ]
    for s in stages.values():
        s.pop("admitted_files", None)
    return {
        "round": r,
        "contract_order": list(order),
        "steps": [{"step": name, "synthesized": s, "composite": c} for name, s, c in steps],
        "stages": stages,
        "joined": joined,
    }


# -- the pool over rounds --------------------------------------------------------------------------
def pool_over_rounds(run: RunFiles) -> dict:
    """After each round's pool update: size, joined, retired (too easy, too hard), and what the
    pool is made of (seeds, composites, synthesized environments)."""
    rounds = run.rounds()
    origin: dict[str, str] = {}
    for r in rounds:
        for ln in run.jsonl(f"{step_dir(r, 'dedupe')}/{artifacts.INDEX}"):
            if isinstance(ln.record.get("name"), str):
                origin[ln.record["name"]] = origins.label(ln.record.get("origin"))
    pool_index = run.records(f"pool/{artifacts.INDEX}")
    for rec in pool_index:
        if isinstance(rec.get("name"), str):
            origin.setdefault(rec["name"], origins.label(rec.get("origin")))
    first = run.jsonl(f"{step_dir(rounds[0], 'rotate')}/{VERDICTS}") if rounds else []
    if first:
        members = {stem(ln.record["file"]) for ln in first if isinstance(ln.record.get("file"), str)}
    else:  # no rotation measured yet: the pool is still the seeds it started with
        members = {rec["name"] for rec in pool_index if isinstance(rec.get("name"), str)}
    start = {"round": 0, "pool_size": len(members), "composition": _composition(members, origin)}
    rows = []
    for r in rounds:
        update = pool_update(run, r)
        if update is None:
            rows.append(
                {
                    "round": r,
                    "pool_size": None,
                    "joined": None,
                    "retired_too_easy": None,
                    "retired_too_hard": None,
                    "composition": None,
                    "retired": [],
                    "joined_names": None,
                }
            )
            continue
        retired = [x for x in items(update.get("retired")) if isinstance(x, dict) and isinstance(x.get("name"), str)]
        joined = joined_names(update)
        rotate = {
            stem(ln.record["file"]): ln
            for ln in run.jsonl(f"{step_dir(r, 'rotate')}/{VERDICTS}")
            if isinstance(ln.record.get("file"), str)
        }
        members = (members - {x.get("name") for x in retired}) | set(joined)
        size = update.get("pool_size")
        rows.append(
            {
                "round": r,
                "pool_size": size if isinstance(size, int) else len(members),
                "joined": len(joined),
                "retired_too_easy": sum(x.get("stage") == "retired_too_easy" for x in retired),
                "retired_too_hard": sum(x.get("stage") == "retired_too_hard" for x in retired),
                "composition": _composition(members, origin),
                "joined_names": joined,
                "retired": [
                    {
                        "name": x.get("name"),
                        "stage": x.get("stage"),
                        "reason": x.get("reason"),
                        "verdicts": f"{step_dir(r, 'rotate')}/{VERDICTS}" if x.get("name") in rotate else None,
                        "line": rotate[x["name"]].number if x.get("name") in rotate else None,
                        "origin": origin.get(x.get("name"), origins.SEED.label),
                    }
                    for x in retired
                ],
            }
        )
    return {"start": start, "rounds": rows}


def _composition(members: set[str], origin: dict[str, str]) -> dict[str, int]:
    """A member never recorded as joining is a seed: only seeds start the pool."""
    counts = Counter(origin.get(m, origins.SEED.label) for m in members)
    out = {o.label: counts.pop(o.label, 0) for o in (origins.SEED, origins.COMPOSE, origins.SYNTHESIZE)}
    out.update(counts)
    return out


# -- calibration of the pool -------------------------------------------------------------------------
def calibration(run: RunFiles) -> dict:
    """Pass rate against level for every environment of the pool as it stands (RUN/pool, after
    the last pool update), with the band and the levels calibration chose."""
    updated = [r for r in run.rounds() if run.exists(marker_of(r, "pool update"))]
    envs = []
    for rec in run.records(f"pool/{artifacts.INDEX}"):
        cal = obj(rec.get("calibration"))
        curve_in = obj(cal.get("curve"))
        curve = []
        for level, m in curve_in.items():
            if not str(level).isdigit() or not isinstance(m, dict):
                continue
            curve.append(
                {
                    "level": int(level),
                    "pass_rate": number(m.get("pass_rate")),
                    "n": m.get("n"),
                    "no_answer_share": number(m.get("no_answer_share")),
                    "guess_rate": number(m.get("guess_rate")),  # what guessing scores at the level
                }
            )
        curve.sort(key=lambda c: c["level"])
        band = cal.get("band")
        if band is None:
            band = obj(rec.get("calibrate")).get("band")
        band = [number(b) for b in band] if isinstance(band, list) and len(band) == 2 else None
        levels = [lv for lv in items(cal.get("levels")) if type(lv) is int]
        file = rec.get("file")
        envs.append(
            {
                "name": rec.get("name"),
                "file": f"pool/envs/{file}" if isinstance(file, str) and run.exists(f"pool/envs/{file}") else None,
                "origin": origins.label(rec.get("origin")),
                "joined_round": rec.get("joined_round"),
                "levels": levels,
                "band": band,
                "misses": cal.get("misses"),
                "model": cal.get("model"),
                "no_answer_share": number(cal.get("no_answer_share")),
                "measured": any(c["pass_rate"] is not None for c in curve),
                "curve": curve,
            }
        )
    bands = {tuple(e["band"]) for e in envs if e["band"]}
    return {
        "after_round": updated[-1] if updated else None,
        "environments": envs,
        "band": list(next(iter(bands))) if len(bands) == 1 else None,
    }


# -- the environments that joined after the start ---------------------------------------------------
def newcomers(run: RunFiles) -> dict:
    """Per round, the newcomers it names (rounds.jsonl: where each came from, its predicted and
    measured pass rate, its training rows, its held-out pass@1), and the prediction's error
    (measured - predicted, per level) over every composite calibrated with a prediction
    (compose's verdict holds the prediction, calibrate's the measurement)."""
    rows = []
    for s in run.records(ROUNDS_FILE):
        for n in items(s.get("newcomers")):
            if isinstance(n, dict) and type(s.get("round")) is int:
                rows.append({"round": s["round"], **n})
    errors = []
    for r in run.rounds():
        composed = {
            v.get("env_id"): obj(v.get("predicted")) for v in run.records(f"{step_dir(r, 'compose')}/{VERDICTS}")
        }
        for v in run.records(f"{step_dir(r, 'calibrate')}/{VERDICTS}"):
            predicted = obj(composed.get(v.get("env_id"), {}).get("pass_rate"))
            for level, m in obj(v.get("curve")).items():
                p, q = number(obj(m).get("pass_rate")), number(predicted.get(level))
                if p is not None and q is not None:
                    errors.append({"round": r, "name": v.get("name"), "level": int(level), "error": p - q})
    gaps = [e["error"] for e in errors]
    return {
        "rows": rows,
        "errors": errors,
        "mean_error": mean(gaps),
        "mean_abs_error": mean([abs(g) for g in gaps]),
    }


# -- training ------------------------------------------------------------------------------------
def training(run: RunFiles) -> dict:
    """Per logged step of every round's training: reward mean and std, the share of groups
    whose rewards all agree (no GRPO signal), and each environment's pass rate."""
    steps, offset, rounds = [], 0, []
    for r in run.rounds():
        rel = f"{step_dir(r, 'train')}/{METRICS_FILE}"
        records = [ln.record for ln in run.jsonl(rel)]
        trained = step_summary(run, r, "train")  # the train step's Result (None: not finished)
        last = 0
        for rec in records:
            step = rec.get("step")
            if not isinstance(step, int):
                continue
            last = max(last, step)
            per_env = {}
            for name, m in obj(rec.get("per_env")).items():
                if isinstance(m, dict):
                    per_env[name] = {
                        "pass_rate": number(m.get("pass_rate")),
                        "n": m.get("n"),
                        "reward_mean": number(m.get("reward_mean")),
                    }
            steps.append(
                {
                    "round": r,
                    "step": step,
                    "global_step": offset + step,
                    "reward": number(rec.get("reward")),
                    "reward_std": number(rec.get("reward_std")),
                    "zero_std_share": number(rec.get("frac_reward_zero_std")),
                    # the same share judged on the environment's score alone (a format bonus hides it)
                    "score_zero_std_share": number(rec.get("train/zero_variance_share")),
                    "kl": number(rec.get("kl")),
                    "per_env": per_env,
                }
            )
        done = obj(trained)
        if records or trained is not None:
            rs = [s for s in steps if s["round"] == r]
            steps_done = done.get("steps") if type(done.get("steps")) is int else last
            rounds.append(
                {
                    "round": r,
                    "finished": trained is not None,
                    "steps": steps_done,
                    "first_global_step": offset + 1,
                    "mean_reward": mean([s["reward"] for s in rs]),
                    "mean_zero_std_share": mean([s["zero_std_share"] for s in rs]),
                    "mean_score_zero_std_share": mean([s["score_zero_std_share"] for s in rs]),
                }
            )
        offset += done.get("steps") if isinstance(done.get("steps"), int) else last
    per_env: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for s in steps:
        for name, m in s["per_env"].items():
            if m["pass_rate"] is not None:
                per_env[name][s["round"]].append(m["pass_rate"])
    env_rounds = {name: {str(r): mean(v) for r, v in sorted(by.items())} for name, by in sorted(per_env.items())}
    return {"steps": steps, "rounds": rounds, "env_pass_rate_by_round": env_rounds}


# -- evaluation ----------------------------------------------------------------------------------
def evaluation(run: RunFiles) -> dict:
    """Held-out pass@1 per round, per environment and per benchmark, for the trained model and
    the baseline, and the delta (model - baseline)."""
    rows = []
    for r in run.rounds():
        m = step_summary(run, r, "evaluate")
        if m is None:
            continue
        base = obj(m.get("baseline"))
        overall, b_overall = obj(m.get("overall")), obj(base.get("overall"))
        heads = {}
        for key, label in (
            ("pass@1", "overall"),
            ("env_mean", "environments (mean)"),
            ("bench_mean", "benchmarks (mean)"),
        ):
            heads[label] = {
                "model": number(overall.get(key)),
                "baseline": number(b_overall.get(key)),
                "delta": delta(overall.get(key), b_overall.get(key)),
            }
        sources = {}
        for kind, field in (("environment", "environments"), ("benchmark", "benchmarks")):
            mine, theirs = obj(m.get(field)), obj(base.get(field))
            for name, v in mine.items():
                a, b = obj(v).get("pass@1"), obj(theirs.get(name)).get("pass@1")
                sources[f"{kind}:{name}"] = {
                    "kind": kind,
                    "name": name,
                    "model": number(a),
                    "baseline": number(b),
                    "delta": delta(a, b),
                    "no_answer_share": number(obj(v).get("no_answer_share")),
                }
        rows.append(
            {
                "round": r,
                "model": m.get("model"),
                "baseline_model": base.get("model"),
                "headline": heads,
                "sources": sources,
                "no_answer_share": number(overall.get("no_answer_share")),
            }
        )
    return {"rounds": rows}


# -- did it learn? -------------------------------------------------------------------------------
def _pass_at_1(overall: dict) -> dict:
    ci = overall.get("ci95")
    ci = [number(x) for x in ci] if isinstance(ci, list) and len(ci) == 2 else None
    return {
        "pass@1": number(overall.get("pass@1")),
        "ci95": ci if ci and None not in ci else None,
        "items": overall.get("items"),
    }


def learning(run: RunFiles, training_numbers: dict) -> dict:
    """The first question: did the policy get better? pass@1 on the run's fixed evaluation set
    per round with its 95% interval, the starting model as round 0 (RUN/baseline, else the
    baseline a round's evaluation carries), the change against round 0, and beside each round
    the share of GRPO groups whose scores all tied (they teach nothing) and the round's learning
    signal as the loop recorded it."""
    measured = run.result("evaluate", "baseline")
    base = measured.summary if measured is not None else None
    rounds = [r for r in run.rounds() if step_summary(run, r, "evaluate") is not None]
    if base is None and rounds:
        base = obj(step_summary(run, rounds[0], "evaluate")).get("baseline")
    start = _pass_at_1(obj(obj(base).get("overall")))
    summaries = {x["round"]: x for x in run.records(ROUNDS_FILE) if type(x.get("round")) is int}
    trained = {t["round"]: t for t in training_numbers["rounds"]}
    rows = [
        {"round": 0, "model": obj(base).get("model"), **start, "delta": None, "zero_variance": None, "signal": None}
    ]
    for r in rounds:
        m = step_summary(run, r, "evaluate") or {}
        now = _pass_at_1(obj(m.get("overall")))
        t = trained.get(r, {})
        score_share = t.get("mean_score_zero_std_share")
        summary = obj(summaries.get(r))
        signal = summary.get("signal") or ("none" if summary.get("train_weights_unchanged") else None)
        rows.append(
            {
                "round": r,
                "model": m.get("model"),
                **now,
                "delta": delta(now["pass@1"], start["pass@1"]),
                # the change's 95% interval over the same items, paired (evaluate's bootstrap)
                "delta_ci95": obj(m.get("delta_ci95")).get("overall pass@1"),
                "zero_variance": score_share if score_share is not None else t.get("mean_zero_std_share"),
                "zero_variance_of": "score" if score_share is not None else "reward",
                "signal": signal if isinstance(signal, str) else None,
            }
        )
    last = rows[-1] if len(rows) > 1 else None
    return {"rounds": rows, "verdict": _verdict(rows[0], last)}


def _verdict(start: dict, last: dict | None) -> str:
    """One sentence: the last round against the start, and whether the intervals can tell."""
    if last is None or last["pass@1"] is None:
        return "no round has been evaluated yet"
    if start["pass@1"] is None:
        return f"round {last['round']}: pass@1 {last['pass@1']:.3f}; the starting model was not measured"
    change = f"round {last['round']}: pass@1 {last['pass@1']:.3f} against {start['pass@1']:.3f} at the start ({last['delta']:+.3f})"
    paired = last.get("delta_ci95")
    if paired:
        span = f"the paired 95% interval of the change, [{paired[0]:+.3f}, {paired[1]:+.3f}]"
        if paired[0] > 0:
            return change + f": better, and {span}, is above 0"
        if paired[1] < 0:
            return change + f": worse, and {span}, is below 0"
        return change + f": {span}, holds 0, so this run cannot tell the change from noise"
    a, b = start["ci95"], last["ci95"]
    if not a or not b:
        return change
    if b[0] > a[1]:
        return change + ": better, and the 95% intervals do not overlap"
    if b[1] < a[0]:
        return change + ": worse, and the 95% intervals do not overlap"
    return change + ": the 95% intervals overlap, so this run cannot tell the change from noise"


# -- synthesis yield -------------------------------------------------------------------------------
def yield_steps(orders: list[tuple[str, str]]) -> tuple[str, ...]:
    """The yield table's columns: the contracts in the order the last round ran them."""
    last = orders[-1] if orders else loop_order()
    return ("generations", "parsed", "validate", "review", *last, "joined")


def synthesis(run: RunFiles) -> dict:
    """How far each generation got, summed by the topic it was asked for and by each example
    environment (parent) its prompt showed."""
    by_topic: dict[str, Counter] = defaultdict(Counter)
    by_parent: dict[str, Counter] = defaultdict(Counter)
    total = Counter()
    orders = []
    for r in run.rounds():
        order = contract_order(run, r)
        orders.append(order)
        admitted = {}
        for stage in ("validate", "review", *order):
            admitted[stage] = files_of(run.jsonl(f"{step_dir(r, stage)}/{VERDICTS}"), admitted_only=True)
        joined = set(joined_names(pool_update(run, r)) or [])
        for ln in run.jsonl(f"{step_dir(r, 'synthesize')}/{GENERATIONS}"):
            g = ln.record
            reached = ["generations"]
            f = g.get("file")
            if g.get("outcome") == "ok" and isinstance(f, str):
                reached.append("parsed")
                for stage in ("validate", "review", *order):
                    if f not in admitted[stage]:
                        break
                    reached.append(stage)
                else:
                    if stem(f) in joined:
                        reached.append("joined")
            topic = str(g.get("topic") or "(none)")
            parents = [p for p in items(g.get("parents")) if isinstance(p, str)] or ["(none)"]
            for step in reached:
                by_topic[topic][step] += 1
                total[step] += 1
                for p in parents:
                    by_parent[p][step] += 1

    steps = yield_steps(orders)

    def table(groups: dict[str, Counter]) -> list[dict]:
        rows = []
        for key, c in groups.items():
            row = {"key": key, **{s: c.get(s, 0) for s in steps}}
            row["yield"] = round(row["joined"] / row["generations"], 4) if row["generations"] else None
            rows.append(row)
        return sorted(rows, key=lambda x: (-x["joined"], -x["parsed"], -x["generations"], x["key"]))

    return {
        "steps": list(steps),
        "total": {s: total.get(s, 0) for s in steps},
        "by_topic": table(by_topic),
        "by_parent": table(by_parent),
    }


# -- everything --------------------------------------------------------------------------------------
BOUND_FIELDS = (
    "checkpoint", "kind", "trained_parameters", "description_length_bits", "n", "errors", "accuracy",
    "accuracy_interval", "accuracy_lower_bound", "base_accuracy", "base_accuracy_interval", "delta",
    "temperature", "form", "statement", "code", "recorded",
)  # fmt: skip


def bounds(run: RunFiles) -> list[dict]:
    """Each checkpoint's latest `evoenv bound` under each code (bounds.jsonl), in the order
    first bounded, with the file it came from. A line without a checkpoint or a numeric bound
    is skipped; the page shows an interval of the wrong kind as its bare value."""
    latest: dict[tuple, dict] = {}
    for rel in run.bound_files():
        for line in run.jsonl(rel):
            r = line.record
            if not isinstance(r.get("checkpoint"), str) or number(r.get("accuracy_lower_bound")) is None:
                continue
            entry = {k: r.get(k) for k in BOUND_FIELDS}
            entry["file"] = rel
            entry["above_base"] = (
                entry["accuracy_lower_bound"] > r["base_accuracy"]
                if number(r.get("base_accuracy")) is not None
                else None
            )
            key = (rel, r.get("code"), r["checkpoint"])
            latest.pop(key, None)
            latest[key] = entry
    return list(latest.values())


def compute(run: RunFiles) -> dict:
    numbers = {
        "run": str(run.root),
        "rounds": rounds_status(run),
        "funnel": [funnel(run, r) for r in run.rounds()],
        "pool": pool_over_rounds(run),
        "calibration": calibration(run),
        "newcomers": newcomers(run),
        "training": training(run),
        "evaluation": evaluation(run),
        "synthesis": synthesis(run),
    }
    numbers["learning"] = learning(run, numbers["training"])
    numbers["bounds"] = bounds(run)
    numbers["problems"] = [p.record() for p in run.problems]
    return numbers
