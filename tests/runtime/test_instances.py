"""The one path stages make instances by (`runtime.instances.make_instances`): it generates,
prompts and solves a seed environment in a real sandbox; a generate that raises, crashes or
times out reads the same in every stage that makes instances; and no stage module goes around it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evoenv_cli.checks import context
from evoenv_cli.config import AnswerConfig, DedupeConfig, ReviewConfig, SampleConfig, ValidateConfig
from evoenv_cli.conversations import Draw, prepare
from evoenv_cli.envfile import EnvFile
from evoenv_cli.novelty.minhash import behaviour_pairs
from evoenv_cli.runtime.instances import Order, first_failure, make_instances
from evoenv_cli.runtime.workers import Call, Limits, SandboxWorkers, describe_failure
from evoenv_cli.stages import dedupe, review

ROOT = Path(__file__).resolve().parents[2]
LIMITS = Limits(generate_s=0.5, prompt_s=1, solve_s=1, score_s=1, grace_s=0.3, import_s=5, memory_mb=512)

BROKEN = '''"""Its generate {how}; everything else would work."""

NAME = "broken_{tag}"


def generate(seed: int, difficulty: int) -> dict:
{body}


def prompt(instance: dict) -> str:
    return "p"


def solve(instance: dict) -> str:
    return "0"


def score(instance: dict, answer: str) -> float:
    return 0.0
'''
BODIES = {  # by the status the pool gives the call
    "error": ("raises", "    raise RuntimeError('boom')"),
    "crash": ("kills its worker", "    import os\n    os._exit(3)"),
    "timeout": ("never returns", "    while True:\n        pass"),
}

# Stage modules that still ask the pool for generate or prompt themselves, and why.
GOES_AROUND = {
    # validate's determinism check regenerates and re-prompts instances it already has, twice in
    # one worker's batch and once in a fresh pool, to compare: a probe, not a way to make instances
    "checks/determinism.py",
}


def _pool(workers: int = 2) -> SandboxWorkers:
    return SandboxWorkers(limits=LIMITS, sandbox_mode="process", workers=workers)


def test_makes_instances_of_a_seed_as_the_pool_answers_them():
    env = EnvFile.from_path(ROOT / "seeds" / "edit_distance.py")
    pairs = [(5, 1), (6, 4), (7, 9)]
    with _pool() as pool:
        [made, generated_only] = make_instances(pool, [Order(env, pairs), Order(env, [(8, 2)], ask=())])
        direct = pool.run(env, [Call.generate(s, d) for s, d in pairs])
        asked = pool.run(env, [c for r in direct for c in (Call.prompt(r.value), Call.solve(r.value))])
        scores = pool.run(env, [Call.score(m.instance, m.answer) for m in made])
    assert [(m.seed, m.difficulty) for m in made] == pairs
    assert [m.instance for m in made] == [r.value for r in direct]
    assert [m.task for m in made] == [r.value for r in asked[0::2]]
    assert [m.answer for m in made] == [r.value for r in asked[1::2]]
    assert all(m.failure() is None for m in made) and first_failure(made) is None
    assert [r.value for r in scores] == [1.0] * len(pairs)
    [only] = generated_only
    assert only.instance is not None and list(only.results) == ["generate"]


def test_each_environment_keeps_its_worker_from_its_generates_to_its_asks():
    """Six seeds on two workers: every environment is generated, prompted and solved by one
    worker, so six are spawned. One pass of generates over all six and then one of asks would
    find each environment's worker taken by another and spawn twelve."""
    seeds = sorted(p for p in (ROOT / "seeds").glob("*.py") if not p.name.startswith("_"))[:6]
    envs = [EnvFile.from_path(p) for p in seeds]
    with _pool() as pool:
        made = make_instances(pool, [Order(env, [(1, 1), (2, 3)]) for env in envs])
        assert pool.spawned == len(envs), pool.spawned
    assert all(m.failure() is None for ms in made for m in ms)
    assert [[(m.env.path.name, m.seed) for m in ms] for ms in made] == [[(p.name, 1), (p.name, 2)] for p in seeds]


@pytest.fixture(scope="module", params=sorted(BODIES))
def broken(request, tmp_path_factory):
    how, body = BODIES[request.param]
    path = tmp_path_factory.mktemp("broken") / f"broken_{request.param}.py"
    path.write_text(BROKEN.format(how=how, tag=request.param, body=body))
    return request.param, EnvFile.from_path(path)


def test_a_failed_generate_reads_the_same_in_every_stage(broken):
    status, env = broken
    review_cfg, dedupe_cfg = ReviewConfig(), DedupeConfig()
    validate_cfg = ValidateConfig(levels=[3], seeds_per_level=1, diversity_levels=[3], diversity_seeds=2)
    validate_seed = context.training_seeds(env.env_id, "level:3", 1)[0]
    with _pool() as pool, _pool(workers=1) as fresh:
        [r] = pool.run(env, [Call.generate(7, 3)])
        assert r.status == status

        def label(seed: int, difficulty: int) -> str:
            return describe_failure("generate", r, seed, difficulty)

        _, [skip] = prepare(pool, [Draw(env, env.name, [(7, 3)])], SampleConfig(), AnswerConfig())
        with pytest.raises(ValueError) as reviewed:
            review.sample_instances(env, review_cfg, pool)
        sampled = dedupe.sample_behaviour(env, pool, dedupe_cfg)
        with pytest.raises(context.Rejected) as rejected:
            context.Checker(env, validate_cfg, pool, fresh).run()

    words = {"error": "raised", "crash": "crashed", "timeout": "timed out"}[status]
    assert re.fullmatch(rf"generate at seed 7 difficulty 3 {words}: .+", label(7, 3))
    assert skip["reason"] == label(7, 3)
    assert str(reviewed.value) == label(review_cfg.seed, review_cfg.levels[0])
    assert sampled.prompts is None and sampled.failure == label(*behaviour_pairs(dedupe_cfg)[0])
    # a call past the time limit is over budget whichever check meets it (checks/context.failed)
    assert rejected.value.stage == ("budget" if status == "timeout" else "run")
    assert rejected.value.reason == label(validate_seed, 3)


def test_no_stage_makes_instances_around_the_one_path():
    package = ROOT / "evoenv_cli"
    asking = {
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if p.parent.name != "runtime" and re.search(r"\bCall\.(generate|prompt)\(", p.read_text())
    }
    assert asking == GOES_AROUND, "make instances with runtime.instances.make_instances"
