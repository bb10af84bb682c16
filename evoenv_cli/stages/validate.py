"""`evoenv validate`: the execution contract. Decides, with no LLM, whether a Python file is
a working environment, by staged checks run cheapest first; the first failing check decides
and names itself in the verdict, and a probe that decided names itself too (`probe`).

The checks are not here: each is one module of `evoenv_cli/checks/` (static.py, load.py,
run.py, determinism.py, ...) that registers one record (`Check`: its name, what it guards,
the function that runs it, its place in the order) in `checks/registry.py`'s `CHECKS`, and
the `Checker` they share is `checks/context.py`. This module is the stage: the source checks
of every file first, then the sandboxed ones on the pools, the verdicts and the summary;
`STAGES`, the admission summary's funnel and the validate command's help read the names and
order from the registry. Everything that executes environment code goes through the
sandboxed pool, and a broken candidate is a verdict, never a crash.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evoenv_cli import artifacts
from evoenv_cli.admission import SUMMARY, AdmissionLog, Summary, Verdict
from evoenv_cli.checks.context import Checker, Rejected
from evoenv_cli.checks.registry import CHECKS, Check, checks, register, stage_names  # noqa: F401  old paths (tests/test_old_paths.py)
from evoenv_cli.config import RuntimeConfig, ValidateConfig, to_dict
from evoenv_cli.runtime.session import Runtime, shared
from evoenv_cli.runtime.workers import EnvFile, SandboxWorkers
from evoenv_cli.stage import Context as StageContext
from evoenv_cli.stage import Stage
from evoenv_cli.stage import register as register_stage

STAGES = stage_names()  # the built-in checks' names, in order (validate.run reads the registry)


def judge(
    env: EnvFile, cfg: ValidateConfig, pool: SandboxWorkers, fresh: SandboxWorkers, static_name: str | None
) -> Verdict:
    started = time.perf_counter()
    checker = Checker(env, cfg, pool, fresh)
    try:
        checker.run()
        stage, reason, admitted = "admitted", "passed all checks", True
    except Rejected as rej:
        stage, reason, admitted = rej.stage, rej.reason, False
        if rej.probe:
            checker.m["probe"] = rej.probe
    finally:
        # its workers go with its judgement: the next environment takes their slots instead of
        # killing a worker of one still being judged (SandboxWorkers._acquire)
        for workers in (pool, fresh):
            if workers is not None:
                workers.discard(env)
    checker.m["wall_s"] = round(time.perf_counter() - started, 3)
    checker.m["sandbox"] = pool.plan.jail  # which jail judged it: bwrap, process+landlock, process
    return Verdict(env.path.name, env.env_id, static_name, admitted, stage, reason, checker.m)


def run(
    library: artifacts.EnvLibrary,
    cfg: ValidateConfig,
    runtime: RuntimeConfig,
    out: Path,
    on_verdict: Callable[[Verdict], None] | None = None,
    session: Runtime | None = None,
) -> Summary:
    """Judge every file of `library` into `out` (already prepared), resuming what is final;
    on `session`'s pools when given (left open), else on pools of its own."""
    with AdmissionLog(out, library.files) as log:

        def finish(verdict: Verdict) -> None:
            log.add(verdict)
            if on_verdict:
                on_verdict(verdict)

        # the source checks and NAME uniqueness (across files) in file order, before anything runs
        names = {r["name"]: f for f, r in log.done.items() if r.get("admitted")}
        todo: list[tuple[EnvFile, str | None]] = []
        for env in log.pending():
            checker = Checker(env, cfg)
            try:
                for check in checks(sandboxed=False):
                    check.run(checker)
            except Rejected as rej:
                probe = {"probe": rej.probe} if rej.probe else {}
                finish(Verdict(env.path.name, env.env_id, checker.static_name, False, rej.stage, rej.reason, probe))
                continue
            name = checker.static_name
            if name in names and names[name] != env.path.name:
                finish(
                    Verdict(
                        env.path.name,
                        env.env_id,
                        name,
                        False,
                        "load",
                        f"NAME {name!r} is already used by {names[name]}",
                    )
                )
            else:
                names[name] = env.path.name
                todo.append((env, name))
        if todo:
            with shared(runtime, session) as rt, contextlib.ExitStack() as stack:
                pool, fresh = rt.workers, rt.fresh
                # `workers` judgements in flight per lane (a cluster's node), each on its lane's workers
                lanes = [stack.enter_context(ThreadPoolExecutor(runtime.workers)) for _ in range(rt.lanes)]
                futures = [lanes[rt.lane(env)].submit(judge, env, cfg, pool, fresh, name) for env, name in todo]
                for f in futures:
                    finish(f.result())
        # order_free is a fact about the environment that composition needs: at the top level
        order_free = {f: {"order_free": bool(r.get("order_free"))} for f, r in log.done.items() if r["admitted"]}
        return log.finish(
            "validate",
            stage_names(),
            library,
            {"validate": to_dict(cfg), "runtime": to_dict(runtime)},
            index_extra=order_free,
        )


# -- the stage's record (evoenv_cli/stage.py) ------------------------------------------------------
def _run(ctx: StageContext, lib, out: Path, llm, bar) -> Summary:
    r = ctx.recipe
    return run(lib, r.validate, r.runtime, out, on_verdict=bar.advance, session=ctx.session)


STAGE = register_stage(
    Stage(
        "validate",
        sections=("validate", "runtime.limits"),
        marker=SUMMARY,
        settings=lambda ctx: dict(validate=ctx.recipe.validate, limits=ctx.recipe.runtime.limits),
        run=_run,
        place=2,
        funnel="passed the contracts",
        in_round=lambda rnd, got: dict(library=got["library"].out),  # the round's new candidates
        takes=("library",),
        gives="library",
    )
)
