"""`evoenv compose`: RACES — new verifiable environments from old ones, with no LLM.

Four operators (SEQUENTIAL, PARALLEL, SORT, SELECT; one record each in `operators`, which
says what each builds) fuse parts into one standalone environment file (the parts' sources
embedded, no import of evoenv), which is then judged by the execution contract like any
candidate.

Difficulty: a composite at level d runs each part at level ceil(d / 2), so d = 10 asks for
two (or n) level-5 solves. Parts whose answers are not unique (tagged "planted") never feed
a SEQUENTIAL step and are never sorted or selected: another valid answer would change the task.
A part whose list answer may come in any order (`order_free`, measured by validate) is never
sorted or selected either, and feeds a SEQUENTIAL step in a canonical form, its items in
increasing order, which part 2's prompt says is what X stands for.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evoenv_cli import artifacts
from evoenv_cli.admission import AdmissionLog, Summary, Verdict
from evoenv_cli.checks import probes
from evoenv_cli.checks.composite_leaks import part_one_leak
from evoenv_cli.config import ComposeConfig, RuntimeConfig, ValidateConfig, to_dict
from evoenv_cli.envfile import EnvFile, env_id_of
from evoenv_cli.operators import COMMON, OPERATORS, REGISTRY, Operator, Part, Plan
from evoenv_cli.runtime.contract import check_source, embed
from evoenv_cli.runtime.instances import Order, make_instances
from evoenv_cli.runtime.session import Runtime, shared
from evoenv_cli.runtime.workers import Call, EnvLoadError, SandboxPool
from evoenv_cli.stage import Context, Stage, register
from evoenv_cli.stages import validate


def _doc_line(part: Part, meta_doc: str | None) -> str:
    first = (meta_doc or "").strip().split("\n\n")[0]
    first = " ".join(first.split())
    return f"{part.name}: {first[:300]}" if first else part.name


def render(plan: Plan, docs: dict[str, str | None], partial_credit: bool = False) -> str:
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
    lines += [f"OPERATOR = {op.name!r}", f"PARENTS = {[p.name for p in parts]!r}", ""]
    for k, eid in enumerate(unique):
        lines += ["", embed(sources[eid], f"_part_{k}")]
    index = {eid: k for k, eid in enumerate(unique)}
    lines.append("")
    lines += op.bind(plan, lambda p: f"_part_{index[p.env.env_id]}", partial_credit)
    body = COMMON + op.template + (op.template_from if input_type else "")
    return "\n".join(lines) + "\n" + body


# -- choosing what to compose ------------------------------------------------------------------------
def candidates(parts: list[Part], ops: tuple[str, ...], rng: random.Random, min_depth: int) -> dict[str, list[Plan]]:
    """Every plan an operator accepts whose deepest part has depth min_depth - 1, by operator."""
    out: dict[str, list[Plan]] = {op: [] for op in ops}
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


def round_robin(by_op: dict[str, list[Plan]]) -> list[Plan]:
    """Interleave operators so every one is represented in a small sample."""
    order, queues = [], [list(v) for v in by_op.values()]
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop(0))
    return order


def measure_order_free(env: EnvFile, pool: SandboxPool, levels: tuple[int, ...] = (1, 3, 5, 7)) -> bool:
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


def describe_parts(library: artifacts.EnvLibrary, pool: SandboxPool) -> tuple[list[Part], dict, list[str]]:
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
) -> Summary:
    """Sample up to cfg.n composites (split over depths 1..max_depth), judge each with the
    execution contract, and write the admitted ones; verdicts already in `out` are reused."""
    rng = random.Random(f"compose:{cfg.seed}")
    made: list[EnvFile] = []
    lineage: dict[str, dict] = {}
    with shared(runtime, session) as rt, AdmissionLog(out, None) as log:
        pool, fresh = rt.pool, rt.fresh
        parts, docs, skipped = describe_parts(library, pool)
        for depth, want in enumerate(_split(cfg.n, cfg.max_depth), start=1):
            plans = round_robin(candidates(parts, tuple(cfg.ops), rng, depth))
            got = 0
            while got < want and plans:
                batch, plans = plans[: want - got], plans[want - got :]
                for plan, env, record in _judge(batch, docs, cfg, vcfg, pool, fresh, log, on_verdict):
                    made.append(env)
                    if record["admitted"]:
                        got += 1
                        parts.append(_as_part(plan, env))
                        docs[env.env_id] = f"{plan.operator} of {', '.join(p.name for p in plan.parts)}"
                        lineage[env.path.name] = {
                            "origin": "compose",
                            "operator": plan.operator,
                            "parents": record["parents"],
                            "depth": plan.depth,
                        }
        composed = artifacts.EnvLibrary(library.root, made, {})
        return log.finish(
            "compose",
            validate.stage_names(),
            composed,
            {"compose": to_dict(cfg), "validate": to_dict(vcfg), "runtime": to_dict(runtime)},
            index_extra=lineage,
            manifest_extra={"parts": len(parts), "skipped_parts": skipped},
        )


def _judge(batch: list[Plan], docs, cfg, vcfg, pool, fresh, log: AdmissionLog, on_verdict):
    """(plan, file, verdict record) per plan, judged in parallel; a verdict already final in
    the log (a resumed run) is reused."""
    envs = []
    for plan in batch:
        source = render(plan, docs, cfg.partial_credit).encode()
        envs.append(EnvFile(log.out / "envs" / f"{plan.name()}.py", source, env_id_of(source)))
    todo = [
        (plan, env) for plan, env in zip(batch, envs) if (log.done.get(env.path.name) or {}).get("env_id") != env.env_id
    ]

    def one(item):
        plan, env = item
        verdict = validate.judge(env, vcfg, pool, fresh, plan.name())
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
            **verdict.measurements,
        }
        return verdict

    with ThreadPoolExecutor(max_workers=max(1, pool.workers)) as ex:
        for verdict, (_, env) in zip(ex.map(one, todo), todo):
            log.add(verdict, env.source)
            if on_verdict:
                on_verdict(verdict)
    return [(plan, env, log.done[env.path.name]) for plan, env in zip(batch, envs)]


def _as_part(plan: Plan, env: EnvFile) -> Part:
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
def _run(ctx: Context, lib, out: Path, llm, bar) -> Summary:
    r = ctx.recipe
    return run(lib, r.compose, r.validate, r.runtime, out, on_verdict=bar.advance, session=ctx.session)


STAGE = register(
    Stage(
        "compose",
        sections=("compose", "validate", "runtime.limits"),
        marker="summary.json",
        settings=lambda ctx: dict(
            compose=ctx.recipe.compose, validate=ctx.recipe.validate, limits=ctx.recipe.runtime.limits
        ),
        run=_run,
        place=4,
        funnel="composition made",
        allow_empty=False,
        total=lambda ctx, lib: ctx.recipe.compose.n,
    )
)
