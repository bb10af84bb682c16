"""`evoenv review`: the semantic contract. The policy reads each candidate's source and a few
instances it produced (computed in the sandbox) and votes, as JSON, on whether the reference
answers the prompt, the task is well posed, the answer format is stated, the answer is not
guessable, and which asymmetry it has. A majority of K votes admits; an unparseable vote
counts against. Every vote keeps the model's raw response (`text`), parsed or not, so a
review can be audited.

Backend failures are not verdicts: a candidate whose votes could not all be obtained is
recorded as `backend_error` and judged again on --resume.

A candidate a person offered (origin `offered`: `evoenv synthesize --offered`, `evoenv iterate
--offered`) is admitted unvoted, as the seeds are: its review is its author's. Every other
contract still judges it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from evoenv_cli import artifacts, origins
from evoenv_cli.admission import SUMMARY, AdmissionLog, Summary, Verdict
from evoenv_cli.config import ReviewConfig, RuntimeConfig, to_dict
from evoenv_cli.envfile import EnvFile
from evoenv_cli.llm.base import Backend, SamplingConfig, strip_thinking
from evoenv_cli.prompts import template
from evoenv_cli.runtime.instances import Order, first_failure, make_instances
from evoenv_cli.runtime.session import Runtime, shared
from evoenv_cli.runtime.workers import EnvLoadError, SandboxWorkers
from evoenv_cli.stage import Context, Stage, register

CHECKS = ("run", "review", "backend_error")
QUESTIONS = {
    "reference_answers_prompt": True,
    "well_posed": True,
    "format_stated": True,
    "trivially_guessable": False,
}
ASYMMETRIES = ("algorithmic", "planted", "none")
OFFERED = "offered by a person: its review is its author's (no vote asked)"


def parse_vote(text: str, opened: bool | None = False, truncated: bool = False) -> tuple[dict | None, str]:
    """The last JSON object in a response's final part (see `thinking`) with every field well
    typed, or (None, why). `opened`: the chat template opened `<think>` in the prompt (None: not
    known); `truncated`: the response was cut at the length limit."""
    body = strip_thinking(text, opened=opened, truncated=truncated)
    decoder = json.JSONDecoder()
    found = None
    for m in re.finditer(r"\{", body):
        try:
            obj, _ = decoder.raw_decode(body[m.start() :])
        except ValueError:
            continue
        if isinstance(obj, dict) and "well_posed" in obj:
            found = obj
    if found is None:
        return None, "no JSON verdict in the response"
    for key in QUESTIONS:
        if not isinstance(found.get(key), bool):
            return None, f"verdict field {key!r} is not true/false"
    if found.get("asymmetry") not in ASYMMETRIES:
        return None, "verdict field 'asymmetry' is not algorithmic/planted/none"
    rationale = found.get("rationale")
    found["rationale"] = " ".join(rationale.split())[:400] if isinstance(rationale, str) else ""
    return {k: found[k] for k in (*QUESTIONS, "asymmetry", "rationale")}, ""


def approves(vote: dict) -> tuple[bool, str]:
    for key, wanted in QUESTIONS.items():
        if vote[key] != wanted:
            return False, f"{key}={str(vote[key]).lower()}"
    if vote["asymmetry"] == "none":
        return False, "asymmetry=none"
    return True, ""


def instances_text(samples: list[tuple[int, str, str]]) -> str:
    return "\n\n".join(
        f"## Instance {k + 1} (difficulty {d})\nPrompt:\n{p}\n\nReference answer: {a}"
        for k, (d, p, a) in enumerate(samples)
    )


def sample_instances(env: EnvFile, cfg: ReviewConfig, pool: SandboxWorkers) -> list[tuple[int, str, str]]:
    """(difficulty, prompt, reference) for a few instances; raises ValueError naming the call."""
    levels = [cfg.levels[k % len(cfg.levels)] for k in range(cfg.instances)]
    [made] = make_instances(pool, [Order(env, [(cfg.seed + k, d) for k, d in enumerate(levels)])], stop_on_failure=True)
    if why := first_failure(made):
        raise ValueError(why)
    return [(m.difficulty, m.task, m.answer) for m in made]


def review_prompt(env: EnvFile, samples, cfg: ReviewConfig) -> str:
    source = env.source.decode("utf-8", "replace")
    if len(source) > cfg.max_source_chars:
        source = source[: cfg.max_source_chars] + "\n# ... (truncated)"
    return template("review.txt").format(source=source, instances=instances_text(samples))


def decide(env: EnvFile, name: str | None, generation, votes_wanted: int, opened: bool | None = False) -> Verdict:
    votes, approvals, reasons = [], 0, []
    errors = [c for c in generation.completions if c.finish_reason == "error"]
    if errors or len(generation.completions) < votes_wanted:
        return Verdict(
            env.path.name,
            env.env_id,
            name,
            False,
            "backend_error",
            f"votes could not be obtained: {generation.error or 'missing completions'}",
        )
    for c in generation.completions:
        vote, why = parse_vote(c.text, opened, c.finish_reason == "length")
        if vote is None:
            votes.append({"parsed": False, "reason": why, "finish_reason": c.finish_reason, "text": c.text})
            reasons.append(f"unparseable verdict ({why})")
            continue
        ok, why = approves(vote)
        vote.update(parsed=True, approve=ok, finish_reason=c.finish_reason, text=c.text)
        votes.append(vote)
        approvals += ok
        if not ok:
            reasons.append(f"{why}: {vote['rationale']}" if vote["rationale"] else why)
    admitted = approvals * 2 > votes_wanted
    if admitted:
        reason = f"{approvals}/{votes_wanted} votes approve"
    else:
        reason = f"{approvals}/{votes_wanted} votes approve; " + (reasons[0] if reasons else "")
    return Verdict(
        env.path.name,
        env.env_id,
        name,
        admitted,
        "admitted" if admitted else "review",
        reason,
        {"votes": votes, "approvals": approvals},
    )


def run(
    library: artifacts.EnvLibrary,
    cfg: ReviewConfig,
    runtime: RuntimeConfig,
    backend: Backend,
    out: Path,
    model_name: str,
    on_verdict: Callable[[Verdict], None] | None = None,
    session: Runtime | None = None,
) -> Summary:
    sampling = SamplingConfig(
        n=cfg.votes, temperature=cfg.temperature, top_p=cfg.top_p, max_tokens=cfg.max_tokens, seed=cfg.seed
    )
    order = {e.path.name: k for k, e in enumerate(library.files)}
    with AdmissionLog(out, library.files, retry_stages=("backend_error",)) as log, shared(runtime, session) as rt:
        pool = rt.workers

        def finish(v: Verdict) -> None:
            log.add(v)
            if on_verdict:
                on_verdict(v)

        pending = []
        for env in log.pending():
            if (library.index.get(env.env_id) or {}).get("origin") == origins.OFFERED.key:
                finish(Verdict(env.path.name, env.env_id, env.name, True, "admitted", OFFERED, {"offered": True}))
            else:
                pending.append(env)
        for start in range(0, len(pending), cfg.chunk):
            asks = []
            for env in pending[start : start + cfg.chunk]:
                try:
                    name = pool.describe(env).get("NAME")
                    samples = sample_instances(env, cfg, pool)
                except (EnvLoadError, ValueError) as exc:
                    finish(
                        Verdict(
                            env.path.name, env.env_id, None, False, "run", f"could not sample instances to show: {exc}"
                        )
                    )
                    continue
                asks.append((env, name, review_prompt(env, samples, cfg)))
            if not asks:
                continue
            conversations = [[{"role": "user", "content": text}] for _, _, text in asks]
            generations = backend.generate(
                conversations, sampling, prompt_ids=[order[env.path.name] for env, _, _ in asks]
            )
            for (env, name, _), gen in zip(asks, generations):
                finish(decide(env, name, gen, cfg.votes, getattr(backend, "opens_think", None)))
        return log.finish(
            "review",
            CHECKS,
            library,
            {
                "review": to_dict(cfg),
                "runtime": to_dict(runtime),
                "model": model_name,
                "backend": backend.name,
                "sampling": sampling.record(),
            },
        )


# -- the stage's record (evoenv_cli/stage.py) ------------------------------------------------------
def _run(ctx: Context, lib, out: Path, llm, bar) -> Summary:
    r = ctx.recipe
    return run(lib, r.review, r.runtime, llm, out, ctx.model.name, on_verdict=bar.advance, session=ctx.session)


STAGE = register(
    Stage(
        "review",
        sections=("review", "backend", "runtime.limits"),
        marker=SUMMARY,
        settings=lambda ctx: dict(
            review=ctx.recipe.review, backend=ctx.model.settings, limits=ctx.recipe.runtime.limits
        ),
        run=_run,
        place=3,
        funnel="passed review",
        uses_model=True,
        in_round=lambda rnd, got: dict(library=got["library"].out, model=rnd.policy),
        takes=("library",),
        gives="library",
    )
)
