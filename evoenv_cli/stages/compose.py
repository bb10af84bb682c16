"""`evoenv compose`: RACES — new verifiable environments from old ones, with no LLM.

Four operators (SEQUENTIAL, PARALLEL, SORT, SELECT; one record each in `operators`, which
says what each builds) fuse parts into one standalone environment file (the parts' sources
embedded, no import of evoenv), which is then judged by the execution contract like any
candidate.

Difficulty: a composite at level d runs part k at levels[k] + ceil(d / 2) - 1 (operators.py).
Aim: compose reads what calibration measured of each part (the pool's index, and in the loop
the round's rotation): per (environment, level) its pass rate and guess rate. Each candidate
gets the part levels, among the measured ones, whose predicted pass rate (the operator's
`predict`, operators.py) is inside calibration's band and furthest above the guess rate it
implies, and candidates are proposed in that order: first those predicted in band (by that
margin), then those whose parts were never measured, then the rest, which compose later as
the policy grows into them and their re-measured rates move. The prediction is recorded in the
composite's verdict and index record, beside what calibration then measures; and what it
measured of an operator's earlier composites scales that operator's predictions (`realised`:
the parts' rates predict how the policy answers each part alone, not whether it answers them
together in the composite's form). Parts whose answers are not unique (tagged "planted") never feed
a SEQUENTIAL step and are never sorted or selected: another valid answer would change the task.
A part whose list answer may come in any order (`order_free`, measured by validate) is never
sorted or selected either, and feeds a SEQUENTIAL step in a canonical form, its items in
increasing order, which part 2's prompt says is what X stands for.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from evoenv_cli import artifacts, origins
from evoenv_cli.admission import SUMMARY, VERDICTS, AdmissionLog, Summary, Verdict
from evoenv_cli.checks import probes
from evoenv_cli.checks.composite_leaks import part_one_leak
from evoenv_cli.checks.composite_parts import PartProbes
from evoenv_cli.config import ComposeConfig, RuntimeConfig, ValidateConfig, to_dict
from evoenv_cli.envfile import EnvFile, env_id_of
from evoenv_cli.operators import COMMON, OPERATORS, REGISTRY, Blueprint, Operator, Part
from evoenv_cli.runtime.contract import check_source, embed
from evoenv_cli.runtime.instances import Order, make_instances
from evoenv_cli.runtime.session import Runtime, shared
from evoenv_cli.runtime.workers import Call, EnvLoadError, SandboxWorkers
from evoenv_cli.stage import Context, Input, Round, Stage, register, round_name
from evoenv_cli.stages import validate


def _doc_line(part: Part, meta_doc: str | None) -> str:
    first = (meta_doc or "").strip().split("\n\n")[0]
    first = " ".join(first.split())
    return f"{part.name}: {first[:300]}" if first else part.name


def render(plan: Blueprint, docs: dict[str, str | None], partial_credit: bool = False) -> str:
    """The composite's standalone source."""
    op, parts, name = plan.op, plan.parts, plan.name()
    doc = "\n".join(
        [op.what(plan), "Built by evoenv compose (RACES); each part keeps its own asymmetry:", ""]
        + [f"- {_doc_line(p, docs.get(p.env.env_id))}" for p in parts]
    )
    doc = doc.replace("\\", "\\\\").replace('"""', "'''")
    unique = list(dict.fromkeys(p.env.env_id for p in parts))
    sources = {eid: next(p for p in parts if p.env.env_id == eid).env.source.decode("utf-8") for eid in unique}
    input_type = plan.input_type
    lines = [
        f'"""{doc}\n"""',
        "",
        "from __future__ import annotations",
        "",
        "import re",
        "",
        f"NAME = {name!r}",
        f"TAGS = {plan.tags!r}",
        f"ANSWER_TYPE = {plan.answer_type!r}",
    ]
    if input_type:
        lines.append(f"INPUT_TYPE = {input_type!r}")
    lines += [
        f"OPERATOR = {op.name!r}",
        f"PARENTS = {[p.name for p in parts]!r}",
        f"_START = {plan.start_levels!r}",
        "",
    ]
    for k, eid in enumerate(unique):
        lines += ["", embed(sources[eid], f"_part_{k}")]
    index = {eid: k for k, eid in enumerate(unique)}
    lines.append("")
    lines += op.bind(plan, lambda p: f"_part_{index[p.env.env_id]}", partial_credit)
    body = COMMON + op.template + (op.template_from if input_type else "")
    return "\n".join(lines) + "\n" + body


# -- choosing what to compose ------------------------------------------------------------------------
def candidates(
    parts: list[Part], ops: tuple[str, ...], rng: random.Random, min_depth: int
) -> dict[str, list[Blueprint]]:
    """Every plan an operator accepts whose deepest part has depth min_depth - 1, by operator."""
    out: dict[str, list[Blueprint]] = {op: [] for op in ops}
    chosen = [REGISTRY[name] for name in OPERATORS if name in ops]

    def propose(op: Operator, members: list[Part]) -> None:
        if op.accepts(members):
            plan = op.plan(members, rng)
            if plan.depth == min_depth:
                out[op.name].append(plan)

    for a in parts:
        for b in parts:
            if a.env.env_id != b.env.env_id:
                for op in (o for o in chosen if o.arity == 2):
                    propose(op, [a, b])
        for op in (o for o in chosen if o.arity == 1):
            propose(op, [a])
    for plans in out.values():
        rng.shuffle(plans)
    return out


def round_robin(by_op: dict[str, list[Blueprint]]) -> list[Blueprint]:
    """Interleave operators so every one is represented in a small sample."""
    order, queues = [], [list(v) for v in by_op.values()]
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop(0))
    return order


# -- aiming at the policy's reach -------------------------------------------------------------------
Rates = dict[str, dict[int, tuple[float, float]]]  # env_id -> level -> (pass rate, guess rate)


@dataclass
class Aim:
    """What compose aims at: calibration's band and the parts' measured rates."""

    band: tuple[float, float]
    rates: Rates = field(default_factory=dict)
    partial_credit: bool = False
    levels: tuple[int, ...] = (1, 2, 3)  # the composite levels to predict (calibration's coarse ones)
    # operator -> what calibration measured of its earlier composites over what was predicted
    scale: dict[str, float] = field(default_factory=dict)


@dataclass
class Prediction:
    """A plan's chosen part levels and what they predict: pass rate and guess rate per
    composite level (where every part's rate is measured), and its tier (0 in band, 1 parts
    unmeasured, 2 out of band)."""

    levels: list[int]
    pass_rate: dict[int, float]
    chance: dict[int, float]
    tier: int
    margin: float  # predicted minus guess rate at the composite's level 1
    scale: float = 1.0  # the operator's measured over predicted pass rate so far (Aim.scale)

    def record(self) -> dict:
        return {
            "levels": self.levels,
            "pass_rate": {str(d): round(p, 4) for d, p in self.pass_rate.items()},
            "guess_rate": {str(d): round(g, 4) for d, g in self.chance.items()},
            **({"scale": round(self.scale, 4)} if self.scale != 1.0 else {}),
        }


def curve_rates(curve: dict) -> dict[int, tuple[float, float]]:
    """A calibration curve ({level: {pass_rate, guess_rate, ...}}) as level -> (pass, guess)."""
    out = {}
    for lv, m in (curve or {}).items():
        p = m.get("pass_rate") if isinstance(m, dict) else None
        if str(lv).isdigit() and isinstance(p, (int, float)):
            g = m.get("guess_rate")
            out[int(lv)] = (float(p), float(g) if isinstance(g, (int, float)) else 0.0)
    return out


def measured_rates(index: dict[str, dict], records: list[dict]) -> Rates:
    """Rates per env_id from the pool's index (`calibration.curve`), overridden by newer
    calibration verdict records (which carry a curve whether admitted or not)."""
    out: Rates = {}
    for env_id, rec in index.items():
        cal = rec.get("calibration") if isinstance(rec, dict) else None
        if isinstance(cal, dict) and (rates := curve_rates(cal.get("curve"))):
            out[env_id] = rates
    for rec in records:
        if isinstance(rec.get("env_id"), str) and (rates := curve_rates(rec.get("curve"))):
            out[rec["env_id"]] = rates
    return out


def realised(records: list[dict]) -> dict[str, float]:
    """Per operator, the pass rate calibration measured of its composites over the one compose
    predicted from their parts (before any scale), summed over every (composite, level) with
    both. Compose's verdicts carry the prediction and the operator, calibration's the curve;
    they are paired by env_id."""
    made = {
        r["env_id"]: r
        for r in records
        if isinstance(r.get("env_id"), str) and isinstance(r.get("predicted"), dict) and r.get("operator") in REGISTRY
    }
    sums: dict[str, list[float]] = {}
    for r in records:
        curve, plan = r.get("curve"), made.get(r.get("env_id"))
        if plan is None or not isinstance(curve, dict):
            continue
        scaled = plan["predicted"].get("scale")
        for lv, predicted in (plan["predicted"].get("pass_rate") or {}).items():
            measured = (curve.get(str(lv)) or {}).get("pass_rate") if isinstance(curve.get(str(lv)), dict) else None
            if isinstance(measured, (int, float)) and isinstance(predicted, (int, float)):
                total = sums.setdefault(plan["operator"], [0.0, 0.0])
                total[0] += measured
                total[1] += predicted / scaled if isinstance(scaled, (int, float)) and scaled > 0 else predicted
    return {op: got / want for op, (got, want) in sums.items() if want > 0}


def predict(plan: Blueprint, aim: Aim) -> Prediction:
    """The part levels (among those measured) that put the plan's predicted pass rate at its
    level 1 in the band, furthest above its guess rate; level 1 for parts never measured.
    In band (tier 0) means inside the band and above the guess rate by the band's low edge.
    The operator's prediction is scaled by what its earlier composites measured (Aim.scale)."""
    lo = aim.band[0]
    scale = aim.scale.get(plan.operator, 1.0)
    known = [aim.rates.get(p.env.env_id) or {} for p in plan.parts]
    if not all(known):
        return Prediction([1] * len(plan.parts), {}, {}, 1, 0.0)
    best = None
    for starts in itertools.product(*(sorted(k) for k in known)):
        pred, chance = {}, {}
        for d in aim.levels:
            at = [start + (d + 1) // 2 - 1 for start in starts]
            if all(lv in k for lv, k in zip(at, known)):
                rates = [k[lv][0] for lv, k in zip(at, known)]
                guesses = [k[lv][1] for lv, k in zip(at, known)]
                pred[d] = min(1.0, plan.op.predict(plan, rates, aim.partial_credit) * scale)
                chance[d] = plan.op.chance(plan, rates, guesses, aim.partial_credit)
        if aim.levels[0] not in pred:  # its lowest composite level asks a part at an unmeasured level
            continue
        guess = Prediction(list(starts), pred, chance, 2, pred[aim.levels[0]] - chance[aim.levels[0]], scale)
        guess.tier = 0 if _rank(guess, aim)[1] == 0.0 and guess.margin >= lo and 0.0 < pred[aim.levels[0]] < 1.0 else 2
        if best is None or _rank(guess, aim) < _rank(best, aim):
            best = guess
    return best or Prediction([1] * len(plan.parts), {}, {}, 1, 0.0)


def _rank(guess: Prediction, aim: Aim) -> tuple[int, float, float]:
    """Its tier, how far outside the band its level-1 prediction is, and minus its margin
    over guessing: smaller is proposed first."""
    p1 = guess.pass_rate.get(aim.levels[0])
    if p1 is None:
        return (guess.tier, 0.0, 0.0)
    lo, hi = aim.band
    return (guess.tier, round(max(lo - p1, p1 - hi, 0.0), 6), round(-guess.margin, 6))


def aimed(plans: list[Blueprint], aim: Aim | None) -> list[tuple[Blueprint, Prediction | None]]:
    """The plans with their chosen levels, in the order to propose them: predicted in band
    (largest margin over guessing first), parts unmeasured, the rest (nearest the band, then
    largest margin, first); the given order (operators interleaved) breaks ties."""
    if aim is None:
        return [(plan, None) for plan in plans]
    out = []
    for plan in plans:
        guess = predict(plan, aim)
        plan.levels = guess.levels
        out.append((plan, guess))
    return sorted(out, key=lambda item: _rank(item[1], aim))  # stable: the given order breaks ties


def measure_order_free(env: EnvFile, pool: SandboxWorkers, levels: tuple[int, ...] = (1, 3, 5, 7)) -> bool:
    """Whether a list answer is accepted with its items reordered on most of a few instances
    (what validate measures, for a part whose index record does not say)."""
    [made] = make_instances(
        pool, [Order(env, [(seed, d) for d in levels for seed in (0, 1)], ask=("solve",))], stop_on_failure=True
    )
    if any(m.failure(("generate", "solve")) for m in made):
        return False
    pairs = [(m.instance, moved) for m in made if (moved := probes.reordered(m.answer)) is not None]
    if not pairs:
        return False
    scores = pool.run(env, [Call.score(inst, moved) for inst, moved in pairs])
    return sum(1 for r in scores if r.ok and r.value >= 1.0) / len(pairs) >= 0.5


def describe_parts(library: artifacts.EnvLibrary, pool: SandboxWorkers) -> tuple[list[Part], dict, list[str]]:
    parts, docs, skipped = [], {}, [f"{r.file}: {r.reason}" for r in library.refused]
    for env in library.files:
        report = check_source(env.source)
        if not report.ok:
            skipped.append(f"{env.path.name}: {report.reason}")
            continue
        try:
            meta = pool.describe(env)
        except EnvLoadError as exc:
            skipped.append(f"{env.path.name}: {exc}")
            continue
        record = library.index.get(env.env_id, {})
        answer_type = meta.get("ANSWER_TYPE")
        order_free = record.get("order_free")
        if not isinstance(order_free, bool):
            order_free = bool(answer_type and answer_type.startswith("list")) and measure_order_free(env, pool)
        parts.append(
            Part(
                env,
                meta.get("NAME") or env.name,
                answer_type,
                meta.get("INPUT_TYPE"),
                list(meta.get("TAGS") or []),
                int(record.get("depth", 0) or 0),
                list(record.get("parents") or []),
                order_free,
            )
        )
        docs[env.env_id] = meta.get("doc")
    return parts, docs, skipped


def run(
    library: artifacts.EnvLibrary,
    cfg: ComposeConfig,
    vcfg: ValidateConfig,
    runtime: RuntimeConfig,
    out: Path,
    on_verdict: Callable[[Verdict], None] | None = None,
    session: Runtime | None = None,
    aim: Aim | None = None,
) -> Summary:
    """Sample up to cfg.n composites (split over depths 1..max_depth), judge each with the
    execution contract, and write the admitted ones; verdicts already in `out` are reused.
    With `aim`, candidates are ordered and their part levels chosen by predicted pass rate."""
    rng = random.Random(f"compose:{cfg.seed}")
    made: list[EnvFile] = []
    lineage: dict[str, dict] = {}
    with shared(runtime, session) as rt, AdmissionLog(out, None) as log:
        pool, fresh = rt.workers, rt.fresh
        parts, docs, skipped = describe_parts(library, pool)
        part_probes = PartProbes(vcfg, pool, fresh) if cfg.probe_parts else None
        for depth, want in enumerate(_split(cfg.n, cfg.max_depth), start=1):
            plans = aimed(round_robin(candidates(parts, tuple(cfg.ops), rng, depth)), aim)
            got = 0
            while got < want and plans:
                batch, plans = plans[: want - got], plans[want - got :]
                judged = _judge(batch, docs, cfg, vcfg, pool, fresh, log, on_verdict, part_probes)
                for (plan, _), env, record in judged:
                    made.append(env)
                    if record["admitted"]:
                        got += 1
                        parts.append(_as_part(plan, env))
                        docs[env.env_id] = f"{plan.operator} of {', '.join(p.name for p in plan.parts)}"
                        lineage[env.path.name] = {
                            "origin": origins.COMPOSE.key,
                            "operator": plan.operator,
                            "parents": record["parents"],
                            "depth": plan.depth,
                            **({"predicted": record["predicted"]} if record.get("predicted") else {}),
                        }
        composed = artifacts.EnvLibrary(library.root, made, {})
        return log.finish(
            "compose",
            validate.stage_names(),
            composed,
            {"compose": to_dict(cfg), "validate": to_dict(vcfg), "runtime": to_dict(runtime)},
            index_extra=lineage,
            manifest_extra={
                "parts": len(parts),
                "skipped_parts": skipped,
                "measured_parts": len((aim or Aim((0, 1))).rates),
                "operator_scale": {op: round(v, 4) for op, v in (aim or Aim((0, 1))).scale.items()},
                "probed_parts": part_probes.manifest() if part_probes is not None else None,
            },
        )


def _judge(
    batch: list[tuple[Blueprint, Prediction | None]],
    docs,
    cfg,
    vcfg,
    pool,
    fresh,
    log: AdmissionLog,
    on_verdict,
    part_probes: PartProbes | None = None,
):
    """((plan, prediction), file, verdict record) per plan, judged in parallel; a verdict
    already final in the log (a resumed run) is reused. A composite validate admits is then
    probed per part (`part_probes`, checks/composite_parts.py) and for leaks across its parts
    (checks/composite_leaks.py)."""
    envs = []
    for plan, _ in batch:
        source = render(plan, docs, cfg.partial_credit).encode()
        envs.append(EnvFile(log.out / "envs" / f"{plan.name()}.py", source, env_id_of(source)))
    todo = [
        (item, env) for item, env in zip(batch, envs) if (log.done.get(env.path.name) or {}).get("env_id") != env.env_id
    ]

    def one(item):
        (plan, guess), env = item
        verdict = validate.judge(env, vcfg, pool, fresh, plan.name())
        if verdict.admitted and part_probes is not None:
            verdict.measurements["part_probes"] = part_probes.record(plan)
            found = part_probes.finding(plan)
            if found is not None:
                verdict.admitted, verdict.stage = False, found.stage
                verdict.reason = f"{found.verdict_reason()} [probe {found.probe}]"
                verdict.measurements["probe"] = found.probe
        leak = part_one_leak(plan, env, pool, vcfg) if verdict.admitted else None
        if leak is not None:
            verdict.admitted, verdict.stage = False, "leak"
            what = "part 1's answer (X)" if plan.operator == "sequential" else f"part {leak.part}'s answer"
            rest = "part 2 alone" if plan.operator == "sequential" else "the other parts alone"
            verdict.reason = (
                f"the prompt-only solver {leak.solver} reads {what} out of the prompt on "
                f"{leak.share:.0%} of instances, against a chance rate of {leak.baseline:.0%}: the composite "
                f"is {rest} [probe {leak.probe}]"
            )
            verdict.measurements["probe"] = leak.probe
        verdict.measurements = {
            "operator": plan.operator,
            "depth": plan.depth,
            "parents": [p.env.path.name for p in plan.parts],
            **({"predicted": guess.record()} if guess is not None and guess.pass_rate else {}),
            **verdict.measurements,
        }
        return verdict

    with ThreadPoolExecutor(max_workers=max(1, pool.workers)) as ex:
        for verdict, (_, env) in zip(ex.map(one, todo), todo):
            log.add(verdict, env.source)
            if on_verdict:
                on_verdict(verdict)
    return [(item, env, log.done[env.path.name]) for item, env in zip(batch, envs)]


def _as_part(plan: Blueprint, env: EnvFile) -> Part:
    """The admitted composite as a part, declaring what its file declares."""
    return Part(
        env,
        plan.name(),
        plan.answer_type,
        plan.input_type,
        plan.tags,
        plan.depth,
        [p.env.path.name for p in plan.parts],
        plan.order_free,
    )


def _split(n: int, depth: int) -> list[int]:
    """n composites over depths 1..depth, the remainder to depth 1."""
    base = [n // depth] * depth
    base[0] += n - sum(base)
    return base


# -- the stage's record (evoenv_cli/stage.py) ------------------------------------------------------
def measured_records(folders) -> list[dict]:
    """The verdicts of the given calibrate and compose folders, in their order (newest last)."""
    records = []
    for folder in folders or []:
        path = Path(folder) / VERDICTS
        if path.exists():
            records += artifacts.read_jsonl_tolerant(path)
    return records


def aim_of(ctx: Context, lib: artifacts.EnvLibrary) -> Aim:
    """Calibration's band and levels from the recipe; the rates from the library's index and
    `ctx.inputs["measured"]` (calibration folders measured since: the loop's rotation), and the
    operators' scales from the compose and calibrate folders among them (earlier rounds')."""
    r = ctx.recipe
    records = measured_records(ctx.inputs.get("measured"))
    return Aim(
        (r.calibrate.band[0], r.calibrate.band[1]),
        measured_rates(lib.index, records),
        r.compose.partial_credit,
        tuple(sorted(r.calibrate.coarse_levels)),
        realised(records),
    )


def _run(ctx: Context, lib, out: Path, llm, bar) -> Summary:
    r = ctx.recipe
    return run(
        lib, r.compose, r.validate, r.runtime, out, on_verdict=bar.advance, session=ctx.session, aim=aim_of(ctx, lib)
    )


def _in_round(rnd: Round, got: dict) -> dict:
    """In the loop: compose from the pool, aiming at the pass rates this round's rotation
    measured (every seed's, at round 1), with each operator's predictions scaled by what the
    earlier rounds' calibration measured of the composites their compose predicted."""
    from evoenv_cli import stages  # every stage registered (calibrate's folder is its record's)

    steps = [stages.get(name) for name in ("compose", "calibrate")]
    earlier = [st.out_in(rnd.folder.parent / round_name(k)) for k in range(1, rnd.number) for st in steps]
    measured = [f for f in earlier if (f / VERDICTS).is_file()]
    rotated = [got["measured"].out] if got["measured"] is not None else []
    return dict(recipe=rnd.seeded("compose"), library=rnd.pool.root, inputs={"measured": measured + rotated})


STAGE = register(
    Stage(
        "compose",
        sections=("compose", "validate", "runtime.limits"),
        marker=SUMMARY,
        settings=lambda ctx: dict(
            compose=ctx.recipe.compose,
            validate=ctx.recipe.validate,
            limits=ctx.recipe.runtime.limits,
            aim=dict(band=ctx.recipe.calibrate.band, levels=ctx.recipe.calibrate.coarse_levels),
        ),
        run=_run,
        place=4,
        funnel="composition made",
        allow_empty=False,
        total=lambda ctx, lib: ctx.recipe.compose.n,
        in_round=_in_round,
        inputs=(
            Input(
                "measured",
                "A calibrate output folder whose pass rates compose aims at (besides the library's index), "
                "or an earlier compose folder whose predictions those scale per operator; repeatable.",
                "paths",
            ),
        ),
        takes=("measured",),
        gives="composites",
    )
)
