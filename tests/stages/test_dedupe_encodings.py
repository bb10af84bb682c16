"""`evoenv dedupe` sees through re-encodings of the instance (issue 42, rule 8): the same task
with a list delta-encoded or run-length encoded, or two fields joined into one, passed as new.

The family is generated (tests/support/reencodings.py): every seed, re-encoded in every way its
instance's shapes admit, under new keys and a new prompt. For each member the old comparison
(no decoded views: `novelty.views.MAX_VIEWS = 0`) admits it as new, and the new one finds its
seed, in either order (the seed kept first, or the re-encoding). The false-positive guard is
tests/stages/test_dedupe_reskins.py's distinct set (the seeds, the validate corpus's good files and
tests/dedupe_corpus/distinct), judged with the decoded views on.
"""

import pytest
from conftest import SEEDS
from support import reencodings

from evoenv_cli.checks import solve_signature
from evoenv_cli.config import DedupeConfig
from evoenv_cli.envfile import EnvFile
from evoenv_cli.novelty import views as decoded
from evoenv_cli.novelty.index import Member, NoveltyIndex, decide
from evoenv_cli.novelty.minhash import behaviour_signature, code_signature
from evoenv_cli.runtime.workers import SandboxWorkers
from evoenv_cli.stages import dedupe

CFG = DedupeConfig()
SEED_FILES = sorted(SEEDS.glob("*.py"))


def test_decoded_views_come_from_the_shapes():
    ss = solve_signature
    env = EnvFile(__import__("pathlib").Path("x.py"), b"NAME = 'x'\n", "x")

    def views(instances):
        return {
            v.decoding: v.instances[0] for v in decoded.decoded_views(ss.Sample(env, instances, ["1"] * len(instances)))
        }

    got = views([{"d": [3, 1, -2], "n": 4}, {"d": [5, 2], "n": 1}])
    assert got["prefix_sums(d)"] == {"d": [3, 4, 2], "n": 4}
    # a delta list of odd length in one instance: no flat runs or halves (they must fit every instance)
    assert not any(k.startswith(("flat_runs", "halves")) for k in got)
    got = views([{"r": [[7, 2], [4, 1]]}, {"r": [[1, 3]]}])
    assert got["runs_count_last(r)"] == {"r": [7, 7, 4]}
    assert got["runs_count_first(r)"] == {"r": [2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1]}
    got = views([{"s": "abc|ab"}, {"s": "x|yz"}])
    assert got['split_on_"|"(s)'] == {"s": "abc", "s#2": "ab"}
    got = views([{"j": [4, 5, "|", 6]}, {"j": [1, "|", 2, 3]}])
    assert got['split_on_"|"(j)'] == {"j": [4, 5], "j#2": [6]}
    got = views([{"rec": {"w": [1], "v": [2]}, "c": 3}, {"rec": {"w": [4], "v": [5]}, "c": 6}])
    assert got["fields_of(rec)"] == {"rec": [1], "rec#2": [2], "c": 3}
    # bounded: an expansion past MAX_EXPANDED is no view, and at most MAX_VIEWS are made
    assert "runs_count_last(r)" not in views([{"r": [[1, decoded.MAX_EXPANDED + 1]]}])
    wide = {f"f{i}": [1, 2, 3, 4] for i in range(6)}
    assert len(decoded.decoded_views(ss.Sample(env, [wide], ["1"]))) == decoded.MAX_VIEWS


def test_the_family_is_generated_from_shapes():
    members = reencodings.family(SEED_FILES)
    kinds = {k for _, k in members}
    assert kinds == set(reencodings.KINDS), kinds
    assert len({s for s, _ in members}) >= 6
    assert len(members) >= 20


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    out = tmp_path_factory.mktemp("reencoded")
    names = reencodings.write_family(SEED_FILES, out)
    envs = {p.name: EnvFile.from_path(p) for p in SEED_FILES} | {n: EnvFile.from_path(out / n) for n in names}
    with SandboxWorkers(workers=2) as pool:
        got = {n: dedupe.sample_behaviour(e, pool, CFG) for n, e in envs.items()}
        yield names, envs, got, pool


def _judge(pool, envs, got, kept: list[str], name: str):
    index = NoveltyIndex(CFG)

    def fresh(n):
        s = got[n].solved
        return None if s is None else solve_signature.Sample(s.env, s.instances, s.answers)

    for n in kept:
        member = Member(n, "lib", n, n, False)
        index.add(
            member, code_signature(envs[n].source, CFG), behaviour_signature(got[n].prompts, CFG), solved=fresh(n)
        )
    mine = fresh(name)
    beh = behaviour_signature(got[name].prompts, CFG)
    return decide(index, code_signature(envs[name].source, CFG), beh, None, None, lambda: index.solves_like(pool, mine))


@pytest.mark.slow  # ~26 members, each judged four times in the sandbox
def test_old_dedupe_admits_every_member_and_the_new_finds_its_seed(sampled, monkeypatch, capsys):
    names, envs, got, pool = sampled
    seeds = [p.name for p in SEED_FILES]
    rows, wrong = [], []
    for name, seed in sorted(names.items()):
        assert got[name].solved is not None, name  # the member runs: its solve answers its own instances
        with monkeypatch.context() as m:
            m.setattr(decoded, "MAX_VIEWS", 0)
            old = _judge(pool, envs, got, seeds, name)
        new = _judge(pool, envs, got, seeds, name)
        back = _judge(pool, envs, got, [name], seed)  # the re-encoding kept first, the seed after it
        rows.append((name, old.stage, new.stage, new.measurements.get("duplicate_of", {}).get("decoding"), back.stage))
        found = (new.measurements.get("duplicate_of") or {}).get("file")
        found_back = (back.measurements.get("duplicate_of") or {}).get("file")
        if not old.admitted or found != seed or found_back != name:
            wrong.append((name, old.reason, new.reason, back.reason))
    with capsys.disabled():
        print("\nmember | old | new | decoding | seed after it")
        for r in rows:
            print(" | ".join(map(str, r)))
    assert not wrong, wrong
