"""`evoenv dedupe` judges novelty by what a program does, not by how it looks.

- tests/dedupe_corpus/scaffolded: two pairs written in one template (the shared helpers
  outweigh the task: estimated code Jaccard 0.45-0.73), computing unrelated things (a circle
  elimination vs coin-change ways; ones in a binary range vs a modular power). Code similarity
  alone must not reject them; behaviour (prompts, solve) does not corroborate it, so all are kept.
- tests/dedupe_corpus/reskin_layouts: thirteen re-skins of the ten seeds, each the same
  computation under a new story, names and instance layout (records zipped or unzipped, story
  fields such as an airline or a station name around the data, other keys and key order). At
  least half must be caught, each naming its seed, with no loss on the distinct set (seeds,
  the validate corpus's good files and tests/dedupe_corpus/distinct). The scaffolded files are
  not in that set: each re-tells a task of it (josephus_survivor, popcount_range_total,
  modular_power), and the solve signature rightly finds them so.

`test_signals_on_the_reskin_corpus` measures each signal on every pair apart (printed with
-s): code, prompts, the solve signature on the original layout, the solve signature across
layouts, and the answers' shapes at matched (seed, level) pairs (measured only, printed with the
same measure on the distinct pairs of seeds: a re-skin keeps the computation but not its
generator's level schedule, so at matched levels its answers are not shaped alike).
"""

import itertools
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, SEEDS

from evoenv_cli.checks import solve_signature
from evoenv_cli.config import DedupeConfig
from evoenv_cli.envfile import EnvFile
from evoenv_cli.novelty.index import Member, NoveltyIndex, decide, sure_code_threshold
from evoenv_cli.novelty.minhash import behaviour_signature, code_signature
from evoenv_cli.runtime.workers import SandboxWorkers
from evoenv_cli.stages import dedupe

CORPUS = ROOT / "tests" / "dedupe_corpus"
SCAFFOLDED = sorted((CORPUS / "scaffolded").glob("*.py"))
PAIRS = [("circle_elimination_last.py", "coin_ways_scaffolded.py"), ("ones_in_binary_range.py", "power_remainder.py")]
RESKINS = {
    p.name: re.search(r"\(re-skin of ([a-z_0-9]+)\)", p.read_text().splitlines()[0]).group(1) + ".py"
    for p in sorted((CORPUS / "reskin_layouts").glob("*.py"))
}
DISTINCT = (
    sorted(SEEDS.glob("*.py"))
    + sorted((ROOT / "tests" / "validate_corpus" / "good").glob("*.py"))
    + sorted((CORPUS / "distinct").glob("*.py"))
)
CFG = DedupeConfig()


def evoenv(*args, cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("evoenv", path=str(Path(sys.executable).parent)) or "evoenv"
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=600)


def judge(base: Path, files: dict[str, Path]) -> dict[str, dict]:
    lib = base / "lib"
    lib.mkdir(parents=True)
    for name, path in files.items():
        shutil.copyfile(path, lib / name)
    r = evoenv("dedupe", "lib", "--out", "out", "--json", cwd=base)
    assert r.returncode == 0, r.stderr
    return {v["file"]: v for v in map(json.loads, (base / "out" / "verdicts.jsonl").read_text().splitlines())}


def jaccard(a, b) -> float:
    return float(np.count_nonzero(a == b)) / len(a)


def code_of(name: str):
    return code_signature((CORPUS / "scaffolded" / name).read_bytes(), CFG)


# -- code similarity needs corroboration ------------------------------------------------------------
def test_scaffolded_pairs_look_alike_by_code():
    """The premise: each pair is over the code threshold, below the sure one."""
    for a, b in PAIRS:
        j = jaccard(code_of(a), code_of(b))
        assert CFG.code_threshold <= j < sure_code_threshold(CFG), (a, b, j)


def test_code_in_the_band_needs_the_prompts_to_agree():
    """decide, no sandbox: a code match between the thresholds rejects only with the same
    member's prompts alike; over the sure threshold it rejects alone."""
    a, b = PAIRS[0]
    index = NoveltyIndex(CFG)
    prompts = ["Seats stand in a ring; every third occupied seat is emptied. Which seat is last?"]
    mine = behaviour_signature(prompts, CFG)
    index.add(Member(a, "lib", "x", "circle", False), code_of(a), mine)
    other = behaviour_signature(["In how many ways can you pay 12 with coins worth 2 and 5?"], CFG)
    kept = decide(index, code_of(b), other)
    assert kept.admitted and "shared scaffolding" in kept.reason, kept
    assert kept.measurements["nearest_code"]["jaccard"] >= CFG.code_threshold
    copied = decide(index, code_of(b), mine)
    assert copied.stage == "duplicate_code" and "their prompts agree" in copied.reason, copied
    same = decide(index, code_of(a), None)  # identical code: no behaviour needed
    assert same.stage == "duplicate_code", same


def test_scaffolded_distinct_pairs_are_kept_by_the_command(tmp_path):
    v = judge(tmp_path, {p.name: p for p in SCAFFOLDED})
    assert all(r["admitted"] for r in v.values()), {f: r["reason"] for f, r in v.items()}
    near = [r for r in v.values() if (r["nearest_code"] or {}).get("jaccard", 0) >= CFG.code_threshold]
    assert len(near) >= 3, v  # every later one of a pair is over the code threshold: kept anyway
    assert all("shared scaffolding" in r["reason"] for r in near)


# -- re-skins under other layouts ---------------------------------------------------------------------
def test_recast_layout_zips_unzips_and_keeps_story_fields():
    ss = solve_signature
    theirs = {"weights": [3, 4], "values": [5, 6], "capacity": 7}
    mine = {"airline": "Condor", "crates": [{"mass": 1, "worth": 2}], "max_mass": 3}
    layout, cols = ss.columns(mine)
    assert cols == ["Condor", [1], [2], 3] and layout.build(cols) == mine
    order = (-1, 0, 1, 2)
    assert ss.recast_layout(mine, theirs, order) == {
        "airline": "Condor",
        "crates": [{"mass": 3, "worth": 5}, {"mass": 4, "worth": 6}],
        "max_mass": 7,
    }
    # a day counter along records is counted again for another number of records
    days = {"closes": [{"day": 1, "close": 5}, {"day": 2, "close": 6}]}
    assert ss.recast_layout(days, {"sequence": [9, 8, 7]}, (-1, 0)) == {
        "closes": [{"day": 1, "close": 9}, {"day": 2, "close": 8}, {"day": 3, "close": 7}]
    }
    # tuple-like lists are records too, and a member's constant fields carry no information
    env = EnvFile(Path("x.py"), b"NAME = 'x'\n", "x")
    member = ss.Sample(env, [{"n": k, "edges": [[0, k]], "unit": "km"} for k in range(1, 4)], ["a"] * 3)
    assert ss.informative(member) == [0, 2]
    assert ss.layout_key(member) == ("L(n)", "n")


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    files = {p.name: p for p in DISTINCT} | {f"zz_{n}": CORPUS / "reskin_layouts" / n for n in RESKINS}
    return judge(tmp_path_factory.mktemp("reskins"), files)


@pytest.mark.slow  # judges the whole re-skin corpus in the sandbox: ~17 s
def test_reskins_are_caught_with_no_loss_on_the_distinct_set(judged):
    v = judged
    lost = [p.name for p in DISTINCT if not v[p.name]["admitted"]]
    assert not lost, {f: v[f]["reason"] for f in lost}
    caught = {n: v[f"zz_{n}"] for n in RESKINS if not v[f"zz_{n}"]["admitted"]}
    assert len(caught) * 2 >= len(RESKINS), sorted(set(RESKINS) - set(caught))
    for name, r in caught.items():
        assert r["duplicate_of"]["file"] == RESKINS[name], (name, r["reason"])
    by_layout = [n for n, r in caught.items() if r["duplicate_of"].get("signature") == "solve_layout"]
    assert len(by_layout) >= 6, caught
    assert all("moved into its layout" in caught[n]["reason"] for n in by_layout)


# -- each signal apart ---------------------------------------------------------------------------------
def answer_shape(answer: str) -> tuple:
    """What an answer looks like: an integer's digit count, a bit string's or a list's length."""
    a = answer.strip()
    if re.fullmatch(r"-?\d+", a):
        return ("int", len(a.lstrip("-")))
    if re.fullmatch(r"[01]+", a):
        return ("bits", len(a))
    if re.fullmatch(r"-?\d+(\s+-?\d+)+", a):
        return ("list", len(a.split()))
    return ("text", min(len(a) // 10, 9))


def answer_shapes_alike(a: solve_signature.Sample, b: solve_signature.Sample) -> float:
    """The share of matched (seed, level) pairs whose answers have the same shape."""
    return sum(answer_shape(x) == answer_shape(y) for x, y in zip(a.answers, b.answers)) / len(a.answers)


@pytest.mark.slow
def test_signals_on_the_reskin_corpus(capsys):
    """Every signal on every re-skin pair, and the answer-shape signal on every distinct pair
    of seeds too."""
    envs = {
        p.name: EnvFile.from_path(p) for p in list(SEEDS.glob("*.py")) + list((CORPUS / "reskin_layouts").glob("*.py"))
    }
    rows = []
    with SandboxWorkers(workers=2) as pool:
        sampled = {n: dedupe.sample_behaviour(e, pool, CFG) for n, e in envs.items()}
        for reskin, seed in sorted(RESKINS.items()):
            a, b = sampled[reskin], sampled[seed]
            code = jaccard(code_signature(envs[reskin].source, CFG), code_signature(envs[seed].source, CFG))
            prompts = jaccard(behaviour_signature(a.prompts, CFG), behaviour_signature(b.prompts, CFG))
            same_shape = a.solved.bucket == b.solved.bucket
            strict = solve_signature.agreement(pool, a.solved, b.solved) if same_shape else None
            layout = solve_signature.layout_agreement(pool, a.solved, b.solved)
            rows.append((reskin, seed, code, prompts, strict, layout, answer_shapes_alike(a.solved, b.solved)))
        seeds = sorted(p.name for p in SEEDS.glob("*.py"))
        distinct = [
            answer_shapes_alike(sampled[x].solved, sampled[y].solved) for x, y in itertools.combinations(seeds, 2)
        ]
    with capsys.disabled():
        print("\nre-skin | seed | code J | prompts J | solve (same shape) | solve (layouts) | answer shapes")
        for r in rows:
            strict = "-" if r[4] is None else f"{r[4]:.2f}"
            print(f"{r[0]} | {r[1]} | {r[2]:.2f} | {r[3]:.2f} | {strict} | {r[5]:.2f} | {r[6]:.2f}")
        for cut in (0.5, 0.9):
            print(
                f"answer shapes alike >= {cut}: {sum(r[6] >= cut for r in rows)}/{len(rows)} re-skins, "
                f"{sum(s >= cut for s in distinct)}/{len(distinct)} distinct seed pairs"
            )
    caught = Counter()
    for r in rows:
        caught["code"] += r[2] >= CFG.code_threshold
        caught["prompts"] += r[3] >= CFG.behaviour_threshold
        caught["solve"] += (r[4] or 0) >= CFG.solve_match_share
        caught["layout"] += r[5] >= CFG.solve_match_share
        caught["shapes"] += r[6] >= 0.9
    print(dict(caught))
    assert caught["layout"] * 2 >= len(rows) and caught["layout"] > caught["solve"]
    assert caught["code"] == 0  # re-skins are written afresh: code is no help
