"""`evoenv dedupe`: the novelty contract. Keeps the pool from collapsing into renamed copies of
one template by rejecting near-duplicates, found with MinHash + LSH (evoenv_cli/novelty) over
two signatures:

- code: the source as normalized tokens (comments, docstrings and layout dropped, literals
  bucketed, identifiers renamed by recency), shingled within each top-level statement, so a
  renamed, re-commented or reordered copy has the same shingle set and a lightly edited one
  nearly so;
- behaviour: the words of prompts sampled in the sandbox at fixed seeds and difficulties
  (numbers bucketed), so the same task posed by other code is caught.

Code similarity alone rejects only when it is very high (`code_sure_threshold`): from
`code_threshold` up it must be corroborated by behaviour (the same member's prompts, or the
solve signature), because programs written in one template share scaffolding that can outweigh
what they compute.

Streaming and index-based: each environment queries the LSH indexes and, when kept, is inserted;
nothing compares all pairs. The pool (`--against`) goes in first, then the candidates in the
library's order, so of two colliding environments the earlier one is kept. A pool's index
(its signatures) can be saved beside it and reused next round (novelty/index_file.py).

This module is the stage: sampling prompts and solves in the sandbox, the pools, the admission
log and the resume cache, and the stage's record.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evoenv_cli import artifacts, origins
from evoenv_cli.admission import SUMMARY, AdmissionLog, Summary, Verdict
from evoenv_cli.checks import solve_signature
from evoenv_cli.config import DedupeConfig, RuntimeConfig, check_values, to_dict
from evoenv_cli.envfile import EnvFile
from evoenv_cli.novelty.index import KINDS, Member, NoveltyIndex, decide, sure_code_threshold
from evoenv_cli.novelty.index_file import INDEX_FILE, load_index, save_index, settings_key
from evoenv_cli.novelty.minhash import (  # noqa: F401  old paths (tests/test_old_paths.py)
    SHIPPED_SCAFFOLD,
    behaviour_pairs,
    behaviour_signature,
    code_signature,
    scaffold_for,
    write_shipped_scaffold,
)
from evoenv_cli.operators import REGISTRY
from evoenv_cli.pool import merge_libraries
from evoenv_cli.runtime import contract
from evoenv_cli.runtime.instances import Order, first_failure, make_instances
from evoenv_cli.runtime.session import Runtime, shared
from evoenv_cli.runtime.workers import SandboxWorkers
from evoenv_cli.stage import Context, Input, Round, Stage, register

STAGES = ("run", "duplicate_code", "duplicate_behaviour", "duplicate_structure")
SIGNATURE_CACHE = "dedupe-signatures.jsonl"
CANDIDATES = "candidates"  # round-NN/candidates/: the round's new candidates and composites, merged for dedupe


# -- what the stage reads of an environment --------------------------------------------------------
@dataclass
class Sampled:
    """What the sandbox gave for one environment at the behaviour seeds: its prompts (None and
    `failure` when it could not), and with the solve signature on, its instances with its own
    answers (None when its solve failed on them)."""

    prompts: list[str] | None
    failure: str | None = None
    solved: solve_signature.Sample | None = None


def sample_behaviour(env: EnvFile, pool: SandboxWorkers, cfg: DedupeConfig) -> Sampled:
    [made] = make_instances(pool, [Order(env, behaviour_pairs(cfg), ask=("prompt",))], stop_on_failure=True)
    if why := first_failure(made):
        return Sampled(None, why)
    solved = None
    if cfg.solve_signature:
        solved = solve_signature.Sample(env, [m.instance for m in made])
        if not solve_signature.answers(pool, solved):
            solved = None
    return Sampled([m.task for m in made], None, solved)


def static_name(source: bytes) -> str | None:
    """The NAME a verdict cites for an environment, as the contract reads it."""
    return contract.declared(source).name


_OPERATOR = re.compile(rb"""^OPERATOR\s*=\s*(['"])([a-z]+)\1""", re.M)


def composite_structure(env: EnvFile, record: dict) -> tuple | None:
    """(operator, parents) of a composite `evoenv compose` made, or None. A composite's code
    embeds its parents', so it is judged by what it is built from, not by its text; the
    lineage must come from compose's own index record and agree with the file's OPERATOR."""
    if not isinstance(record, dict) or record.get("origin") != origins.COMPOSE.key:
        return None
    op, parents = record.get("operator"), record.get("parents")
    if (
        op not in REGISTRY  # compose's operator records are the one list of operators
        or not isinstance(parents, list)
        or not parents
        or not all(isinstance(x, str) for x in parents)
    ):
        return None
    m = _OPERATOR.search(env.source)
    if m is None or m.group(2).decode() != op:
        return None
    return (op, *sorted(parents)) if REGISTRY[op].unordered_parts else (op, *parents)


# -- the stage -------------------------------------------------------------------------------------
def check_config(cfg: DedupeConfig) -> None:
    """Settings that cannot work are an InputError (exit 2), before anything runs: the field
    rules of config.DedupeConfig, the one mechanism recipes and flags are checked by."""
    check_values(cfg, "dedupe")


def _sample_many(envs: list[EnvFile], pools: Runtime, cfg: DedupeConfig) -> dict[str, Sampled]:
    """{file name: Sampled} for `envs`, sampled in parallel on the pool's workers (the Runtime
    starts its workers only when some prompts must actually be sampled)."""
    if not envs:
        return {}
    pool = pools.workers
    with ThreadPoolExecutor(max_workers=pools.cfg.workers) as ex:
        results = list(ex.map(lambda e: sample_behaviour(e, pool, cfg), envs))
    return {e.path.name: r for e, r in zip(envs, results)}


def _chunks(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def add_pool(index: NoveltyIndex, lib: artifacts.EnvLibrary, label: str, pools: Runtime) -> dict:
    """Put a pool's environments in the index (not judged), from its saved index when valid."""
    cfg = index.cfg
    saved, status = load_index(lib.root / INDEX_FILE, lib.files, cfg, index.scaffold)
    unsampled = 0
    if saved is not None:
        by_id = {e.env_id: e for e in lib.files}
        structures = {e.env_id: composite_structure(e, lib.index.get(e.env_id, {})) for e in lib.files}
        solved = _saved_solves(lib, pools, cfg)
        for i, (file, env_id, name) in enumerate(saved.members):
            index.add(
                Member(file, label, env_id, name, True, structures.get(env_id)),
                saved.code[i] if saved.has_code[i] else None,
                saved.behaviour[i] if saved.has_behaviour[i] else None,
                solved=solved.get(by_id[env_id].path.name),
            )
            unsampled += not saved.has_behaviour[i]
    else:
        status = f"built ({status})"
        for chunk in _chunks(lib.files, 8 * pools.cfg.workers):
            sampled = _sample_many(chunk, pools, cfg)
            for env in chunk:
                got = sampled[env.path.name]
                unsampled += got.prompts is None
                index.add(
                    Member(
                        env.path.name,
                        label,
                        env.env_id,
                        static_name(env.source),
                        True,
                        composite_structure(env, lib.index.get(env.env_id, {})),
                    ),
                    code_signature(env.source, cfg, index.scaffold),
                    behaviour_signature(got.prompts, cfg) if got.prompts is not None else None,
                    solved=got.solved,
                )
    return {"library": label, "files": len(lib.files), "index": status, "behaviour_unsampled": unsampled}


def _solve_record(sample: solve_signature.Sample | None) -> dict | None:
    return None if sample is None else {"instances": sample.instances, "answers": sample.answers}


def _solve_sample(env: EnvFile, record) -> solve_signature.Sample | None:
    """A cached solve sample, when it is well formed."""
    if not isinstance(record, dict):
        return None
    instances, answers = record.get("instances"), record.get("answers")
    if (
        not isinstance(instances, list)
        or not instances
        or not all(isinstance(i, dict) for i in instances)
        or not isinstance(answers, list)
        or len(answers) != len(instances)
        or not all(isinstance(a, str) for a in answers)
    ):
        return None
    return solve_signature.Sample(env, instances, answers)


def _saved_solves(lib: artifacts.EnvLibrary, pools: Runtime, cfg: DedupeConfig) -> dict[str, solve_signature.Sample]:
    """{file: solve sample} of a pool whose saved index was loaded: from the signature cache
    the run that saved it kept beside it, and sampled for the files it lacks."""
    if not cfg.solve_signature:
        return {}
    key = settings_key(cfg)
    cached = {
        r.get("env_id"): r.get("solve")
        for r in artifacts.read_jsonl_tolerant(lib.root / SIGNATURE_CACHE)
        if isinstance(r, dict) and r.get("settings") == key
    }
    out = {e.path.name: s for e in lib.files if (s := _solve_sample(e, cached.get(e.env_id))) is not None}
    missing = [e for e in lib.files if e.path.name not in out]
    for name, got in _sample_many(missing, pools, cfg).items():
        if got.solved is not None:
            out[name] = got.solved
    return out


def _encode(values: np.ndarray | None) -> str | None:
    return None if values is None else base64.b64encode(values.astype("<u4").tobytes()).decode()


def _decode(text: str | None, num_perm: int) -> np.ndarray | None:
    if not isinstance(text, str):
        return None
    values = np.frombuffer(base64.b64decode(text), dtype="<u4").astype(np.uint32)
    return values if len(values) == num_perm else None


def run(
    library: artifacts.EnvLibrary,
    cfg: DedupeConfig,
    runtime: RuntimeConfig,
    out: Path,
    against: list[artifacts.EnvLibrary] = (),
    on_verdict: Callable[[Verdict], None] | None = None,
    note: Callable[[str], None] | None = None,
    session: Runtime | None = None,
) -> Summary:
    """Judge every file of `library` into `out` (already prepared) against the pools and the
    earlier files of the batch, resuming what is final."""
    index = NoveltyIndex(cfg, scaffold_for([lib.files for lib in against], cfg))
    reports = []
    with AdmissionLog(out, library.files) as log, shared(runtime, session) as pools:
        for lib in against:
            report = add_pool(index, lib, str(lib.root), pools)
            reports.append(report)
            if note:
                note(
                    f"dedupe: compared against {report['library']} ({report['files']} environments; "
                    f"their signatures: {report['index']})"
                )
        # behaviour signatures of the kept ones, so that a resumed run puts them back in the
        # index without sampling them again (only records made with the same settings count)
        cache_path = out / SIGNATURE_CACHE
        key = settings_key(cfg)
        cached = {r.get("env_id"): r for r in artifacts.read_jsonl_tolerant(cache_path) if r.get("settings") == key}
        label = str(library.root)
        rows: dict[str, int] = {}  # file -> row of the batch's kept environments
        with artifacts.JsonlAppender(cache_path) as cache:
            for chunk in _chunks(library.files, 8 * runtime.workers):
                codes = {e.path.name: code_signature(e.source, cfg, index.scaffold) for e in chunk}
                shapes = {e.path.name: composite_structure(e, library.index.get(e.env_id, {})) for e in chunk}
                need = []
                for env in chunk:
                    done = log.done.get(env.path.name)
                    if done is not None:
                        hit = cached.get(env.env_id)
                        if done["admitted"] and (hit is None or (cfg.solve_signature and "solve" not in hit)):
                            need.append(env)
                        continue
                    shape = shapes[env.path.name]
                    if shape is not None:  # a repeated structure needs no run
                        if shape not in index.structures:
                            need.append(env)
                        continue
                    near = index.nearest("code", codes[env.path.name])
                    if not (near and near[1] >= sure_code_threshold(cfg)):  # a sure duplicate needs no run
                        need.append(env)
                sampled = _sample_many(need, pools, cfg)
                for env in chunk:
                    file = env.path.name
                    got = sampled.get(file, Sampled(None))
                    member = Member(file, label, env.env_id, static_name(env.source), False, shapes[file])
                    done = log.done.get(file)
                    if done is not None:
                        if done["admitted"]:
                            hit = cached.get(env.env_id)
                            beh = (
                                _decode(hit.get("behaviour"), cfg.num_perm)
                                if hit is not None and got.prompts is None
                                else (behaviour_signature(got.prompts, cfg) if got.prompts is not None else None)
                            )
                            solved = got.solved or (_solve_sample(env, hit.get("solve")) if hit is not None else None)
                            rows[file] = index.add(member, codes[file], beh, solved=solved)
                        continue
                    beh = behaviour_signature(got.prompts, cfg) if got.prompts is not None else None
                    decision = decide(
                        index,
                        codes[file],
                        beh,
                        got.failure,
                        shapes[file],
                        lambda got=got: index.solves_like(pools.workers, got.solved),
                    )
                    if decision.admitted:
                        record = {"env_id": env.env_id, "settings": key, "behaviour": _encode(beh)}
                        if cfg.solve_signature:
                            record["solve"] = _solve_record(got.solved)
                        cache.append(record)
                        rows[file] = index.add(member, codes[file], beh, solved=got.solved)
                    verdict = Verdict(
                        file,
                        env.env_id,
                        member.name,
                        decision.admitted,
                        decision.stage,
                        decision.reason,
                        decision.measurements,
                    )
                    log.add(verdict)
                    if on_verdict:
                        on_verdict(verdict)
        saved_to = None
        if cfg.save_index:  # the admitted files, in the order the output library will list them
            files = [e for e in library.files if e.path.name in rows]
            saved_to = out / INDEX_FILE
            save_index(saved_to, files, index, [rows[e.path.name] for e in files])
            if note:
                note(f"index of the {len(files)} admitted environments saved to {saved_to}")
        summary = log.finish(
            "dedupe",
            STAGES,
            library,
            {"dedupe": to_dict(cfg), "runtime": to_dict(runtime)},
            manifest_extra={
                "against": reports,
                "lsh_bands_rows": {k: list(index.params(k)) for k in KINDS},
                "index_saved": str(saved_to) if saved_to else None,
            },
        )
        return summary


# -- the stage's record (evoenv_cli/stage.py) ------------------------------------------------------
def _run(ctx: Context, lib, out: Path, llm, bar) -> Summary:
    r = ctx.recipe
    pools = [artifacts.EnvLibrary.open(p, allow_empty=True) for p in ctx.inputs.get("against", [])]
    return run(lib, r.dedupe, r.runtime, out, pools, on_verdict=bar.advance, note=ctx.note, session=ctx.session)


def _in_round(rnd: Round, got: dict) -> dict:
    """In the loop: the round's candidates (what review admitted and what compose made, in one
    library) judged against the pool."""
    made = [got[kind].out for kind in ("library", "composites") if got[kind] is not None]
    candidates = merge_libraries(rnd.folder / CANDIDATES, made)
    return dict(library=candidates, inputs={"against": [rnd.pool.root]})


STAGE = register(
    Stage(
        "dedupe",
        sections=("dedupe", "runtime.limits"),
        marker=SUMMARY,
        settings=lambda ctx: dict(
            dedupe=ctx.recipe.dedupe, limits=ctx.recipe.runtime.limits, against=list(ctx.inputs.get("against", []))
        ),
        run=_run,
        place=5,  # before calibrate: the cheap contract first, so no solver call is spent on a copy
        funnel="were new",
        check=lambda ctx, lib: check_config(ctx.recipe.dedupe),
        in_round=_in_round,
        inputs=(
            Input(
                "against",
                "A pool (env library) the candidates must differ from; repeatable. "
                "Its saved dedupe-index.bin is reused when it matches.",
                "paths",
            ),
        ),
        takes=("library", "composites"),
        gives="library",
    )
)
