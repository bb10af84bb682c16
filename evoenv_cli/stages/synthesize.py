"""`evoenv synthesize`: the policy writes candidate environments.

Each request is built from the environment contract, the two forms of solve-verify asymmetry,
k example environments drawn from the seeds and the pool (varied per request), the names and
descriptions already in the pool to steer away from, and a topic hint. Every response is
recorded in generations.jsonl, parsed or not; candidates land in envs/ with unique names.
Request i is the same text for the same seed, whatever the backend, so runs can be replayed.
"""

from __future__ import annotations

import ast
import hashlib
import random
import re
from dataclasses import dataclass
from pathlib import Path

from evoenv_cli import artifacts, origins
from evoenv_cli.admission import SUMMARY
from evoenv_cli.config import SynthesizeConfig, to_dict
from evoenv_cli.envfile import EnvFile
from evoenv_cli.errors import InputError
from evoenv_cli.llm.base import Backend, SamplingConfig, strip_thinking
from evoenv_cli.prompts import PROMPTS, contract_text, template
from evoenv_cli.runtime import contract
from evoenv_cli.runtime.contract import REQUIRED_FUNCTIONS, parse_python
from evoenv_cli.stage import Context, Input, Result, Round, Stage, register

GENERATIONS = "generations.jsonl"  # every reply, parsed or not, with its prompt: the partial records
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


@dataclass
class Example:
    name: str
    source: str
    summary: str


def load_examples(libraries: list[artifacts.EnvLibrary]) -> list[Example]:
    """Every environment of the seeds and pool, by NAME (first library wins)."""
    out: dict[str, Example] = {}
    for lib in libraries:
        for env in lib.files:
            found = contract.declared(env.source)
            name = found.name or env.name
            summary = " ".join((found.doc or "").split())[:200]
            out.setdefault(name, Example(name, env.source.decode("utf-8", "replace"), summary))
    return list(out.values())


def topics(cfg: SynthesizeConfig) -> list[str]:
    if cfg.topics:
        return list(cfg.topics)
    path = Path(cfg.topics_file) if cfg.topics_file else PROMPTS / "topics.txt"
    if not path.is_file():
        raise InputError(f"{path}: no such topics file")
    found = [t.strip() for t in path.read_text(encoding="utf-8").splitlines() if t.strip() and not t.startswith("#")]
    if not found:
        raise InputError(f"{path}: no topics in it")
    return found


def build_prompt(
    i: int, cfg: SynthesizeConfig, examples: list[Example], topic_list: list[str]
) -> tuple[str, list[str], str]:
    """Request i's text, the examples it shows, and its topic: a function of (seed, i) only."""
    rng = random.Random(f"synthesize:{cfg.seed}:{i}")
    shown = rng.sample(examples, min(cfg.examples, len(examples)))
    topic = rng.choice(topic_list)
    blocks = "\n\n".join(f"## {e.name}\n```python\n{e.source.strip()}\n```" for e in shown)
    avoid = sorted(examples, key=lambda e: e.name)[: cfg.max_avoid]
    avoid_text = "\n".join(f"- {e.name}: {e.summary}" if e.summary else f"- {e.name}" for e in avoid)
    text = template("synthesize.txt").format(
        contract=contract_text(),
        asymmetry=template("asymmetry.txt").strip(),
        examples=blocks,
        avoid=avoid_text or "(nothing yet)",
        topic=topic,
    )
    return text, [e.name for e in shown], topic


def extract_code(response: str, opened: bool | None = False, truncated: bool = False) -> tuple[str | None, str]:
    """(code, outcome): the last fenced block that parses and defines the contract's functions;
    thinking text and several blocks are expected. Outcomes: ok, no_code, syntax_error,
    missing_functions."""
    text = strip_thinking(response, opened=opened, truncated=truncated)
    blocks = [body for lang, body in _FENCE.findall(text) if lang.lower() in ("", "python", "py", "python3")]
    if not blocks:
        return None, "no_code"
    outcome = "syntax_error"
    for body in reversed(blocks):
        try:
            tree = parse_python(body)
        except (SyntaxError, ValueError):
            continue
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        if all(fn in names for fn in REQUIRED_FUNCTIONS):
            return body.strip() + "\n", "ok"
        outcome = "missing_functions"
    return None, outcome


def declared_name(code: str) -> str | None:
    """The candidate's NAME as the contract reads it (None when it cannot be used)."""
    return contract.declared(code.encode("utf-8", "replace")).name


def run(
    seeds: artifacts.EnvLibrary,
    pools: list[artifacts.EnvLibrary],
    cfg: SynthesizeConfig,
    backend: Backend,
    out: Path,
    model_name: str,
    on_round=None,
    offered: artifacts.EnvLibrary | None = None,
) -> dict:
    """Request candidates until cfg.n parse, or cfg.max_requests requests were made; then add
    the environment files a person `offered` beside them (origin `offered`), as they are."""
    started = artifacts.now_iso()
    examples = load_examples([seeds, *pools])
    if not examples:
        raise InputError(f"{seeds.root}: no example environments to show the model")
    topic_list = topics(cfg)
    log_path = out / GENERATIONS
    records = artifacts.read_jsonl_tolerant(log_path)
    done_ids = {r["prompt_id"] for r in records}
    have = sum(r["outcome"] == "ok" for r in records)
    sampling = SamplingConfig(
        n=1, temperature=cfg.temperature, top_p=cfg.top_p, max_tokens=cfg.max_tokens, seed=cfg.seed
    )
    next_id = max(done_ids, default=-1) + 1
    limit = cfg.max_requests or 4 * cfg.n
    with artifacts.JsonlAppender(log_path) as log:
        while have < cfg.n and next_id < limit:
            count = min(cfg.n - have, cfg.batch, limit - next_id)
            ids = list(range(next_id, next_id + count))
            built = [build_prompt(i, cfg, examples, topic_list) for i in ids]
            conversations = [[{"role": "user", "content": text}] for text, _, _ in built]
            generations = backend.generate(conversations, sampling, prompt_ids=ids)
            for i, (text, parents, topic), gen in zip(ids, built, generations):
                completion = gen.completions[0]
                code, outcome = (
                    (None, "error")
                    if completion.finish_reason == "error"
                    else extract_code(
                        completion.text, getattr(backend, "opens_think", None), completion.finish_reason == "length"
                    )
                )
                file = None
                if code is not None:
                    name = declared_name(code) or "candidate"
                    file = f"g{i:05d}_{name}.py"
                    artifacts.write_text_atomic(out / "envs" / file, code)
                    have += 1
                log.append(
                    {
                        "prompt_id": i,
                        "prompt_hash": hashlib.sha256(text.encode()).hexdigest()[:16],
                        "prompt": text,
                        "response": completion.text,
                        "parents": parents,
                        "topic": topic,
                        "model": model_name,
                        "backend": backend.name,
                        "sampling": sampling.record(),
                        "seed": completion.seed,
                        "finish_reason": completion.finish_reason,
                        "tokens": completion.tokens,
                        "outcome": outcome,
                        "error": gen.error,
                        "file": file,
                    }
                )
            next_id += count
            if on_round and have < cfg.n and next_id < limit:  # the closing line says the last count
                on_round(have, next_id)
    records = artifacts.read_jsonl_tolerant(log_path)
    return _finish(out, records, cfg, seeds, pools, model_name, backend.name, started, offered)


def _offer(out: Path, offered: artifacts.EnvLibrary, taken: set[str]) -> list[dict]:
    """The offered files copied into OUT/envs under their own names (a name the policy's
    candidates took gets an `o_` prefix), with their index records."""
    index = []
    for env in offered.files:
        file = env.path.name if env.path.name not in taken else f"o_{env.path.name}"
        artifacts.write_bytes_atomic(out / "envs" / file, env.source)
        index.append(
            {
                "file": file,
                "env_id": env.env_id,
                "name": Path(file).stem,
                "origin": origins.OFFERED.key,
                "parents": [],
                "offered_from": str(env.path),
            }
        )
    return index


def _finish(out: Path, records: list[dict], cfg, seeds, pools, model_name, backend_name, started, offered=None) -> dict:
    outcomes: dict[str, int] = {}
    for r in records:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    files = [r for r in records if r["file"]]
    index = [
        {
            "file": r["file"],
            "env_id": EnvFile.from_path(out / "envs" / r["file"]).env_id,
            "name": Path(r["file"]).stem,
            "origin": origins.SYNTHESIZE.key,
            "parents": r["parents"],
            "topic": r["topic"],
            "prompt_id": r["prompt_id"],
            "model": model_name,
        }
        for r in files
    ]
    index += _offer(out, offered, {r["file"] for r in files}) if offered is not None else []
    artifacts.write_jsonl_atomic(out / artifacts.INDEX, index)
    summary = {
        "stage": "synthesize",
        "requests": len(records),
        "candidates": len(files),  # the policy's
        "offered": len(index) - len(files),
        "outcomes": outcomes,
        "target": cfg.n,
    }
    inputs = [e for lib in [seeds, *pools] for e in lib.files] + (offered.files if offered is not None else [])
    artifacts.write_json_atomic(
        out / artifacts.MANIFEST,
        artifacts.manifest(
            "synthesize",
            {"synthesize": to_dict(cfg), "model": model_name, "backend": backend_name},
            inputs,
            started,
            {"requests": len(records), "candidates": len(files), "offered": summary["offered"], **outcomes},
            {
                "seeds": str(seeds.root),
                "pools": [str(p.root) for p in pools],
                "offered": None if offered is None else str(offered.root),
            },
            out=out,
        ),
    )
    artifacts.write_json_atomic(out / SUMMARY, summary)  # the marker last (a rerun redoes the rest)
    return summary


# -- the stage's record (evoenv_cli/stage.py) ------------------------------------------------------
def _settings(ctx: Context) -> dict:
    cfg = ctx.recipe.synthesize  # --resume may raise n (and max_requests): not in the settings
    wanted = {k: v for k, v in to_dict(cfg).items() if k not in ("n", "max_requests")}
    offered = ctx.inputs.get("offered")
    return dict(
        synthesize=wanted,
        backend=ctx.model.settings,
        seeds=ctx.inputs["seeds"],
        pools=list(ctx.inputs["pools"]),
        **({"offered": str(offered)} if offered is not None else {}),
    )


def _check(ctx: Context, lib: None) -> None:
    """The examples' libraries and the offered files, opened before OUT is touched (and kept
    for the run): an offered folder must hold at least one environment file."""
    offered = ctx.inputs.get("offered")
    ctx.inputs["examples"] = (
        artifacts.EnvLibrary.open(ctx.inputs["seeds"]),
        [artifacts.EnvLibrary.open(p, allow_empty=True) for p in ctx.inputs["pools"]],
        None if offered is None else artifacts.EnvLibrary.open(offered),
    )


def _run(ctx: Context, lib: None, out: Path, llm, bar) -> dict:
    seeds, pools, offered = ctx.inputs["examples"]
    return run(
        seeds,
        pools,
        ctx.recipe.synthesize,
        llm,
        out,
        ctx.model.name,
        on_round=lambda have, asked: ctx.say(
            f"synthesize: {have} candidates from {asked} requests so far, asking for more"
        ),
        offered=offered,
    )


def _in_round(rnd: Round, got: dict) -> dict:
    """In the loop: the policy writes, from the seeds and the pool, drawing with the round's seed;
    what a person offered this round (`iterate --offered`) is added beside it."""
    inputs = {"seeds": rnd.seeds, "pools": [rnd.pool.root]}
    if rnd.offered is not None:
        inputs["offered"] = rnd.offered
    return dict(recipe=rnd.seeded("synthesize"), model=rnd.policy, inputs=inputs)


def _line(label: str, done: Result, ctx: Context) -> str:
    n = done.value
    more = f" and {n['offered']} offered by a person" if n.get("offered") else ""
    return f"synthesize: {n['candidates']} candidates from {n['requests']} requests{more} -> {done.out}"


STAGE = register(
    Stage(
        "synthesize",
        sections=("synthesize", "backend"),
        marker=SUMMARY,
        settings=_settings,
        run=_run,
        place=1,
        partial=("generations", GENERATIONS),
        funnel="that parsed",
        uses_model=True,
        check=_check,
        library_optional=True,  # its examples are inputs: the seeds and the pools
        in_round=_in_round,
        gives="library",  # the candidates that parsed
        inputs=(
            Input("seeds", "The seed environments shown as examples.", "path", required=True),
            Input("pools", "A pool library whose environments are examples and names to avoid (repeatable).", "paths"),
            Input(
                "offered",
                "Environment files a person offers as candidates, added beside the policy's "
                "(origin 'offered'; review admits them unvoted: their review is their author's).",
                "path",
            ),
            Input("examples", "The seeds, pools and offered files opened (its check opens them).", "object"),
        ),
        line=_line,
    )
)
