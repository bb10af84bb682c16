"""`evoenv dedupe`, the novelty contract: copies of seeds (renamed, reordered, re-commented)
are caught by the code signature, a re-skinned task by the behaviour signature; the seeds, the
good corpus and 28 distinct environments written apart (tests/dedupe_corpus/distinct, ten of
them in the seeds' own style, whose shared scaffolding used to make them look alike) are all
kept; composites are judged by their structure; pools, saved indexes, resume and determinism.

One library (seeds + good corpus + distinct corpus + copies + a re-skin + a broken file) is
judged once per module by the real command; the other CLI tests use small libraries of their own.
"""

import ast
import builtins
import itertools
import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, SEEDS

from evoenv_cli.config import DedupeConfig
from evoenv_cli.errors import InputError
from evoenv_cli.novelty import minhash, tokens
from evoenv_cli.stages import dedupe

GOOD = ROOT / "tests" / "validate_corpus" / "good"
DISTINCT = ROOT / "tests" / "dedupe_corpus" / "distinct"
RESKIN = ROOT / "tests" / "dedupe_corpus" / "maze_min_moves.py"
# the same algorithm under a new story, names and instance keys; each names its original
RESKINS = {
    p.name: re.search(r"\(re-skin of ([a-z_0-9]+)\)", p.read_text().splitlines()[0]).group(1) + ".py"
    for p in sorted((ROOT / "tests" / "dedupe_corpus" / "reskin").glob("*.py"))
}
KEEP = sorted(SEEDS.glob("*.py")) + sorted(GOOD.glob("*.py")) + sorted(DISTINCT.glob("*.py"))
CONTRACT = {"generate", "generate_from", "prompt", "solve", "score", "NAME", "TAGS", "ANSWER_TYPE", "INPUT_TYPE"}
CFG = DedupeConfig()


# -- mutations an LLM (or a lazy author) might make ----------------------------------------------
def renamed(src: str, seed: int = 0) -> str:
    """Every user identifier renamed (functions, arguments, variables, globals), through the
    AST: the copy is also re-formatted by ast.unparse, and loses its comments."""
    tree = ast.parse(src)
    keep = set(dir(builtins)) | CONTRACT
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            keep |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.keyword) and node.arg:
            keep.add(node.arg)
    rng = random.Random(seed)
    mapping: dict[str, str] = {}

    def new(name: str) -> str:
        if name in keep:
            return name
        return mapping.setdefault(name, f"{rng.choice(['tmp', 'val', 'item', 'aux'])}_{len(mapping)}")

    class Renamer(ast.NodeTransformer):
        def visit_Name(self, node):
            node.id = new(node.id)
            return node

        def visit_arg(self, node):
            node.arg = new(node.arg)
            return node

        def visit_FunctionDef(self, node):
            node.name = new(node.name)
            self.generic_visit(node)
            return node

    return ast.unparse(Renamer().visit(tree)) + "\n"


def reordered(src: str, seed: int = 0) -> str:
    """The top-level functions shuffled (source text kept, comments included)."""
    lines = src.splitlines(keepends=True)
    body = ast.parse(src).body
    starts = [n.lineno - 1 for n in body] + [len(lines)]
    pieces = ["".join(lines[starts[i] : starts[i + 1]]).rstrip("\n") + "\n\n\n" for i in range(len(body))]
    funcs = [i for i, n in enumerate(body) if isinstance(n, ast.FunctionDef)]
    moved = [pieces[i] for i in funcs]
    random.Random(seed).shuffle(moved)
    assert [pieces[i] for i in funcs] != moved
    for i, piece in zip(funcs, moved):
        pieces[i] = piece
    return "".join(lines[: starts[0]]) + "".join(pieces)


def recommented(src: str, seed: int = 0) -> str:
    """New comments on many lines and rewritten docstrings."""
    rng = random.Random(seed)
    words = "note we compute the answer here carefully and handle every edge case below".split()
    out = []
    for line in src.splitlines():
        if line.strip() and rng.random() < 0.3:
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}# {' '.join(rng.sample(words, 6))}")
        tail = (
            f"  # {rng.choice(words)}"
            if line.strip() and rng.random() < 0.2 and not line.rstrip().endswith(('"""', "\\", "(", "[", ","))
            else ""
        )
        out.append(line + tail)
    text = "\n".join(out) + "\n"
    return re.sub(r'"""[\s\S]*?"""', lambda m: '"""' + " ".join(rng.choices(words, k=15)) + '"""', text)


def edited(src: str, seed: int = 0) -> str:
    """All three, and then a little real editing: two statements added, one comparison changed."""
    lines = recommented(reordered(renamed(src, seed), seed), seed).splitlines()
    rng = random.Random(seed)
    spots = [
        i
        for i, line in enumerate(lines)
        if line.startswith("    ")
        and line.strip()
        and not line.strip().startswith(("elif", "else", "except", "finally", "#", '"""'))
    ]
    for i in sorted(rng.sample(spots, 2), reverse=True):
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        lines.insert(i, f"{indent}checked = len(str({rng.randrange(100)}))")
    compared = [i for i, line in enumerate(lines) if " < " in line]
    if compared:
        i = rng.choice(compared)
        lines[i] = lines[i].replace(" < ", " <= ", 1)
    return "\n".join(lines) + "\n"


MUTATIONS = {
    "renamed": renamed,
    "reordered": reordered,
    "recommented": recommented,
    "all_three": lambda s, seed=0: recommented(reordered(renamed(s, seed), seed), seed),
    "edited": edited,
}
# four seeds, and two of the distinct corpus whose own code is smallest next to the scaffold
COPIED = [
    "grid_shortest_path.py",
    "knapsack_max_value.py",
    "register_machine.py",
    "sat_planted.py",
    "josephus_survivor.py",
    "popcount_range_total.py",
]


def _copies() -> dict[str, tuple[str, str]]:
    """{copy file name: (source, original file name)}; names sort after the originals."""
    out = {}
    for k, original in enumerate(COPIED):
        src = next(p for p in KEEP if p.name == original).read_text()
        for kind, mutate in MUTATIONS.items():
            copy = mutate(src, k)
            compile(copy, original, "exec")
            out[f"zz_{kind}_{original}"] = (copy, original)
    return out


COPIES = _copies()
BROKEN = """import random
NAME = "broken_at_ten"
def generate(seed, difficulty):
    if difficulty >= 10:
        raise RuntimeError("no instance at this level")
    return {"n": random.Random(seed).randint(0, 9)}
def prompt(instance):
    return "Add one to " + str(instance["n"]) + " and give the result as an integer."
def solve(instance):
    return str(instance["n"] + 1)
def score(instance, answer):
    return 1.0 if answer.strip() == solve(instance) else 0.0
"""


def evoenv(*args, cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("evoenv", path=str(Path(sys.executable).parent)) or "evoenv"
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def verdicts(out: Path) -> dict[str, dict]:
    return {r["file"]: r for r in map(json.loads, (out / "verdicts.jsonl").read_text().splitlines())}


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def make_lib(path: Path, files: dict[str, str | Path]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, src in files.items():
        (path / name).write_text(src.read_text() if isinstance(src, Path) else src)
    return path


# -- signatures, no sandbox ------------------------------------------------------------------------
def estimated(a, b) -> float:
    return float(np.count_nonzero(a == b)) / len(a)


def test_minhash_matches_datasketch_update_batch():
    from datasketch import MinHash

    rng = np.random.default_rng(0)
    for n in (1, 7, 500, 9000):
        hashes = np.unique(rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32))
        m = MinHash(num_perm=128, seed=1, hashfunc=int)
        m.update_batch(hashes.tolist())
        assert (minhash.minhash_values(hashes, 128) == m.hashvalues).all()
    assert minhash.minhash_values(np.zeros(0, dtype=np.uint32), 128) is None


def test_shingles_ignore_statement_order_comments_docstrings_and_layout():
    a = 'import re\n"""doc"""\ndef f(x):\n    """doc"""\n    return x + 1  # one\n\n\ndef g(y):\n    return [y,\n            2]\n'
    b = "import re\n\ndef second(q):\n    # a comment\n    return [q, 2,]\ndef first(value):\n    return (value + 7)\n"
    assert tokens.code_tokens(a) == [
        ["import", "re"],
        ["def", "vn", "vn", ":", ";", ">", "return", "v0", "+", "N"],
        ["def", "vn", "vn", ":", ";", ">", "return", "[", "v0", ",", "N", "]"],
    ]
    assert (minhash.shingle_hashes(tokens.code_tokens(a), 5) == minhash.shingle_hashes(tokens.code_tokens(b), 5)).all()


@pytest.mark.parametrize("kind", list(MUTATIONS))
def test_mutated_copies_of_every_seed_keep_their_code_signature(kind):
    for path in KEEP:
        src = path.read_text()
        j = estimated(minhash.code_signature(src, CFG), minhash.code_signature(MUTATIONS[kind](src, 3), CFG))
        assert j >= CFG.code_threshold, (path.name, kind, j)


def test_distinct_environments_stay_below_both_thresholds_with_a_margin():
    sigs = {p.name: minhash.code_signature(p.read_bytes(), CFG) for p in KEEP}
    worst = max(estimated(sigs[a], sigs[b]) for a, b in itertools.combinations(sigs, 2))
    assert worst < CFG.code_threshold - 0.1, worst


def test_without_the_scaffold_discount_the_seed_styled_ones_collide():
    """What the discount is for: the distinct corpus written in the seeds' style shares their
    scaffolding (the score tail, the rng set-up), and without the discount some distinct
    pairs reach the duplicate threshold."""
    plain = DedupeConfig(discount_scaffold=False)
    sigs = {p.name: minhash.code_signature(p.read_bytes(), plain) for p in KEEP}
    worst = max(estimated(sigs[a], sigs[b]) for a, b in itertools.combinations(sigs, 2))
    assert worst >= CFG.code_threshold + 0.05, worst


def test_shipped_scaffold_is_what_the_seeds_share():
    cfg = DedupeConfig()
    sets = [minhash.code_shingles(p.read_bytes(), cfg) for p in sorted(SEEDS.glob("*.py"))]
    learned = minhash.scaffold_of(sets, cfg)
    assert np.array_equal(learned, minhash.shipped_scaffold()), (
        'seeds or normalization changed: run python -c "from evoenv_cli.novelty import minhash; '
        "minhash.write_shipped_scaffold('seeds')\""
    )
    # a shingle of three seeds is scaffold; one of two is not
    assert 0 < len(learned) < sum(len(x) for x in sets) // 10


def test_prompt_words_bucket_numbers():
    assert minhash.prompt_words("Pay exactly 1234 with coins 5, 10; (mod 1000000007)!") == [
        "pay",
        "exactly",
        "#4",
        "with",
        "coins",
        "#1",
        "#2",
        "mod",
        "#9",
    ]


def test_bad_config_is_an_input_error():
    for bad in (
        {"code_threshold": 0},
        {"behaviour_threshold": 1.5},
        {"code_shingle": 0},
        {"behaviour_levels": [0, 11]},
        {"lsh_weights": [0.5, 0.6]},
        {"num_perm": 4},
    ):
        with pytest.raises(InputError):
            dedupe.check_config(DedupeConfig(**bad))


# -- the command on one library of everything --------------------------------------------------------
@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    base = tmp_path_factory.mktemp("dedupe")
    files = {p.name: p for p in KEEP} | {n: src for n, (src, _) in COPIES.items()}
    files |= {"zz_reskin_maze_min_moves.py": RESKIN, "broken_at_ten.py": BROKEN}
    files |= {f"zz_reskin_{name}": ROOT / "tests" / "dedupe_corpus" / "reskin" / name for name in RESKINS}
    make_lib(base / "lib", files)
    r = evoenv("dedupe", "lib", "--out", "out", "--json", cwd=base)
    assert r.returncode == 0, r.stderr
    return base, json.loads(r.stdout), verdicts(base / "out")


@pytest.mark.slow
def test_seeds_and_good_corpus_are_all_kept(judged):
    _, summary, v = judged
    for path in KEEP:
        r = v[path.name]
        assert r["admitted"], r
        for kind, limit in (("nearest_code", CFG.code_threshold), ("nearest_behaviour", CFG.behaviour_threshold)):
            assert r[kind] is None or r[kind]["jaccard"] < limit - 0.1, (path.name, r[kind])
    assert summary["admitted"] == len(KEEP) + sum(v[f"zz_reskin_{n}"]["admitted"] for n in RESKINS)
    by_stage = summary["rejected_by_stage"]
    assert by_stage["run"] == 1 and by_stage["duplicate_structure"] == 0
    assert by_stage["duplicate_code"] + by_stage["duplicate_behaviour"] == len(COPIES) + 1 + sum(
        not v[f"zz_reskin_{n}"]["admitted"] for n in RESKINS
    )


@pytest.mark.slow
def test_renamed_reordered_recommented_copies_are_code_duplicates_naming_the_seed(judged):
    _, _, v = judged
    for name, (_, original) in COPIES.items():
        r = v[name]
        assert r["stage"] == "duplicate_code", r
        kept = r["duplicate_of"]
        assert kept["file"] == original and kept["library"] == "lib" and kept["pool"] is False
        assert kept["jaccard"] >= CFG.code_threshold and original in r["reason"]


@pytest.mark.slow
def test_reskinned_task_is_a_behaviour_duplicate(judged):
    _, _, v = judged
    r = v["zz_reskin_maze_min_moves.py"]
    assert r["stage"] == "duplicate_behaviour", r
    assert r["duplicate_of"]["file"] == "grid_shortest_path.py"
    assert r["nearest_code"] is None or r["nearest_code"]["jaccard"] < CFG.code_threshold


@pytest.mark.slow
def test_reskins_are_caught_by_running_solve_on_the_originals_instances(judged):
    """Re-skins share little code or prompt text with their originals (two of the twelve
    kept their generator's structure and are code duplicates); fed the original's instances,
    recast, their solve answers alike. Two recast nothing (a list of dicts of flags where the
    original has strings; a bool where it has None) and are kept."""
    _, _, v = judged
    caught = {n: v[f"zz_reskin_{n}"] for n in RESKINS if not v[f"zz_reskin_{n}"]["admitted"]}
    assert len(caught) >= 10, sorted(set(RESKINS) - set(caught))
    for name, r in caught.items():
        assert r["duplicate_of"]["file"] == RESKINS[name], (name, r["reason"])
        assert r["stage"] in ("duplicate_code", "duplicate_behaviour")
    by_solve = [r for r in caught.values() if r["duplicate_of"].get("signature") == "solve"]
    assert len(by_solve) >= 8 and all("its solve gives the answers" in r["reason"] for r in by_solve)


def test_solve_signature_recasts_layouts_and_is_not_fooled_by_a_stored_solution():
    from evoenv_cli.checks import solve_signature as ss

    mine = {"kilos": [1, 2], "prices": [3, 4], "bag": 5}
    theirs = {"weights": [7, 8, 9], "values": [1, 1, 1], "capacity": 10}
    orders = ss.field_orders(mine, theirs)
    assert orders == [(0, 1, 2), (1, 0, 2)]
    assert ss.recast_fields(mine, theirs, (1, 0, 2)) == {"kilos": [1, 1, 1], "prices": [7, 8, 9], "bag": 10}
    # a dict record is the sequence of its values; a string stands for a list of characters
    assert ss.recast([{"a": 0, "b": 0}], [[1, 2], [3, 4]]) == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    assert ss.recast(["x"], "abc") == ["a", "b", "c"] and ss.recast("x", ["a", "b"]) == "ab"
    assert ss.bucket({"tune": ["do", "re"], "n": 3}) == ss.bucket({"text": "ACG", "k": 9})
    with pytest.raises(ss.Mismatch):
        ss.recast({"a": 1}, {"x": 1, "y": 2})
    assert ss.field_orders({"flag": True}, {"n": 1}) == []


@pytest.mark.slow
def test_unsampleable_environment_is_rejected_by_run(judged):
    _, _, v = judged
    r = v["broken_at_ten.py"]
    assert r["stage"] == "run" and "generate at seed 0 difficulty 10" in r["reason"] and "RuntimeError" in r["reason"]


@pytest.mark.slow
def test_outputs_index_and_manifest(judged):
    base, _, v = judged
    out = base / "out"
    kept = sorted(f for f, r in v.items() if r["admitted"])
    assert set(kept) >= {p.name for p in KEEP}
    assert sorted(p.name for p in (out / "envs").iterdir()) == kept
    index = [json.loads(x) for x in (out / "index.jsonl").read_text().splitlines()]
    assert [r["file"] for r in index] == kept
    assert all(
        {"nearest_code", "nearest_behaviour"}
        <= set(r["dedupe"])
        <= {"nearest_code", "nearest_behaviour", "nearest_solve"}
        for r in index
    )
    m = manifest(out)
    assert m["config"]["dedupe"]["code_threshold"] == CFG.code_threshold
    assert m["counts"]["duplicate_code"] == sum(r["stage"] == "duplicate_code" for r in v.values()) >= len(COPIES)
    assert m["against"] == []
    assert json.loads((out / "summary.json").read_text())["stage"] == "dedupe"


# -- pools and saved indexes --------------------------------------------------------------------------
@pytest.fixture
def candidates(tmp_path):
    picked = {
        name: copy
        for name, copy in itertools.islice(COPIES.items(), 0, None, len(MUTATIONS))
        if (SEEDS / copy[1]).is_file()
    }  # one copy of each copied seed
    files = {n: src for n, (src, _) in picked.items()} | {"modular_power.py": GOOD / "modular_power.py"}
    return make_lib(tmp_path / "cands", files), picked


def test_against_a_pool_rejects_its_copies_and_does_not_judge_it(tmp_path, candidates):
    cands, picked = candidates
    r = evoenv("dedupe", cands, "--against", SEEDS, "--out", tmp_path / "out", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    v = verdicts(tmp_path / "out")
    assert set(v) == set(picked) | {"modular_power.py"}  # the pool's files get no verdicts
    for name, (_, original) in picked.items():
        assert v[name]["stage"] == "duplicate_code"
        assert v[name]["duplicate_of"]["file"] == original and v[name]["duplicate_of"]["pool"] is True
        assert v[name]["duplicate_of"]["library"] == str(SEEDS)
    assert v["modular_power.py"]["admitted"]
    assert manifest(tmp_path / "out")["against"][0]["index"] == "built (no saved index)"


def test_reasoning_gym_imports_are_compared_by_their_tasks_not_by_the_template_they_share(tmp_path):
    """Every `evoenv import` file is one template: by code, letter_counting was a near-copy of
    chain_sum (estimated Jaccard 0.91, rejected at duplicate_code in the demo, 2026-12-06). An
    import has no code signature now; its prompts still catch a second import of a task."""
    from evoenv_cli.integrations import reasoning_gym_tasks as rg
    from evoenv_cli.runtime.contract import is_import_template

    files = dict(rg.import_environment(t) for t in ("chain_sum", "letter_counting", "count_bits"))
    assert all(is_import_template(src.encode()) for src in files.values())
    changed = files["rg_chain_sum.py"].replace("task as an evoenv environment", "task, changed")
    assert not is_import_template(changed.encode()) and minhash.code_signature(changed, CFG) is not None
    old = minhash.code_shingles  # what the code signature was: the template's shingles less the scaffold
    sig = {
        n: minhash.minhash_values(np.setdiff1d(old(s, CFG), minhash.shipped_scaffold()), CFG.num_perm)
        for n, s in files.items()
    }
    assert estimated(sig["rg_letter_counting.py"], sig["rg_count_bits.py"]) >= CFG.code_sure_threshold
    assert minhash.code_signature(files["rg_letter_counting.py"], CFG) is None
    assert minhash.code_signature((SEEDS / "sat_planted.py").read_bytes(), CFG) is not None
    pool = make_lib(tmp_path / "pool", {"rg_chain_sum.py": files["rg_chain_sum.py"]})
    # a second import of chain_sum (a changed template would not run: only the exact one may
    # import reasoning-gym), under another file name
    again = files["rg_chain_sum.py"]
    cands = make_lib(
        tmp_path / "cands",
        {k: v for k, v in files.items() if k != "rg_chain_sum.py"} | {"chain_sum_again.py": again},
    )
    r = evoenv("dedupe", cands, "--against", pool, "--out", tmp_path / "out", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    v = verdicts(tmp_path / "out")
    assert v["rg_letter_counting.py"]["admitted"] and v["rg_count_bits.py"]["admitted"], v
    assert (
        not v["chain_sum_again.py"]["admitted"] and v["chain_sum_again.py"]["duplicate_of"]["file"] == "rg_chain_sum.py"
    )


@pytest.mark.slow
def test_saved_index_is_reused_and_a_changed_pool_invalidates_it(tmp_path, candidates):
    cands, _ = candidates
    r = evoenv("dedupe", SEEDS, "--out", "pool", "--save-index", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "pool" / "dedupe-index.bin").is_file()
    assert manifest(tmp_path / "pool")["index_saved"].endswith("dedupe-index.bin")
    r = evoenv("dedupe", cands, "--against", "pool", "--out", "o1", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert manifest(tmp_path / "o1")["against"][0]["index"] == "loaded"
    r = evoenv("dedupe", cands, "--against", "pool", "--out", "o2", "--threshold", "0.6", "--json", cwd=tmp_path)
    assert manifest(tmp_path / "o2")["against"][0]["index"].startswith("loaded signatures; LSH tables rebuilt")
    # the same verdicts as a pool built from scratch
    r = evoenv("dedupe", cands, "--against", SEEDS, "--out", "o3", "--json", cwd=tmp_path)

    def essence(out):
        return {
            f: (
                r["stage"],
                (r.get("duplicate_of") or {}).get("file"),
                (r.get("duplicate_of") or {}).get("jaccard"),
                [(r[k] or {}).get("jaccard") for k in ("nearest_code", "nearest_behaviour") if k in r],
            )
            for f, r in verdicts(out).items()
        }

    assert essence(tmp_path / "o1") == essence(tmp_path / "o3")
    # a changed pool: one more file
    shutil.copy(RESKIN, tmp_path / "pool" / "envs" / "maze_min_moves.py")
    r = evoenv("dedupe", cands, "--against", "pool", "--out", "o4", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert manifest(tmp_path / "o4")["against"][0]["index"].startswith("built (saved index stale")
    # a corrupted index is rebuilt, never loaded
    index = tmp_path / "pool" / "dedupe-index.bin"
    data = index.read_bytes()
    index.write_bytes(data[:-10] + b"0123456789")
    (tmp_path / "pool" / "envs" / "maze_min_moves.py").unlink()
    r = evoenv("dedupe", cands, "--against", "pool", "--out", "o5", "--json", cwd=tmp_path)
    assert (
        manifest(tmp_path / "o5")["against"][0]["index"]
        == "built (saved index unreadable (payload size or checksum mismatch))"
    )


class _RunsCode:
    """Unpickling this runs a shell command: what a forged index carried."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


@pytest.mark.slow
def test_a_forged_index_is_data_that_never_runs(tmp_path):
    """A pool's index file is read as data: a payload that runs code when unpickled (a bare
    pickle, or an .npz holding an object array), even with a valid header and checksum, is
    refused and the pool rebuilt; a forged index in the old pickle file is not even opened."""
    import hashlib
    import io
    import pickle

    cands = make_lib(tmp_path / "cands", {"modular_power.py": GOOD / "modular_power.py"})
    r = evoenv("dedupe", SEEDS, "--out", "pool", "--save-index", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    index = tmp_path / "pool" / "dedupe-index.bin"
    magic, header_line, _ = index.read_bytes().split(b"\n", 2)
    header = json.loads(header_line)
    marker = tmp_path / "pwned"
    buffer = io.BytesIO()
    np.savez(
        buffer,
        code=np.array([_RunsCode(marker)], dtype=object),
        behaviour=np.zeros(1),
        has_code=np.zeros(1, bool),
        has_behaviour=np.zeros(1, bool),
    )
    for k, payload in enumerate([pickle.dumps(_RunsCode(marker)), buffer.getvalue()]):
        forged = {**header, "payload_bytes": len(payload), "payload_sha256": hashlib.sha256(payload).hexdigest()}
        index.write_bytes(magic + b"\n" + json.dumps(forged).encode() + b"\n" + payload)
        r = evoenv("dedupe", cands, "--against", "pool", "--out", f"f{k}", "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert not marker.exists(), "a forged index ran code in the evoenv process"
        assert manifest(tmp_path / f"f{k}")["against"][0]["index"].startswith("built (saved index unreadable")
    index.unlink()
    (tmp_path / "pool" / "dedupe-index.pkl").write_bytes(pickle.dumps(_RunsCode(marker)))
    r = evoenv("dedupe", cands, "--against", "pool", "--out", "f2", "--json", cwd=tmp_path)
    assert r.returncode == 0 and not marker.exists()
    assert manifest(tmp_path / "f2")["against"][0]["index"] == "built (no saved index)"


# -- resume, clean, used folders, determinism ------------------------------------------------------------
@pytest.mark.slow
def test_used_folder_resume_clean_and_determinism(tmp_path):
    files = {p.name: p for p in KEEP[:6]} | {n: src for n, (src, _) in itertools.islice(COPIES.items(), 0, 8)}
    lib = make_lib(tmp_path / "lib", files)
    r = evoenv("dedupe", lib, "--out", "a", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    full = (tmp_path / "a" / "verdicts.jsonl").read_bytes()
    r = evoenv("dedupe", lib, "--out", "b", "--json", cwd=tmp_path)
    assert (tmp_path / "b" / "verdicts.jsonl").read_bytes() == full  # same inputs, same verdicts
    assert (tmp_path / "b" / "index.jsonl").read_bytes() == (tmp_path / "a" / "index.jsonl").read_bytes()
    r = evoenv("dedupe", lib, "--out", "a", cwd=tmp_path)
    assert r.returncode == 2 and "already holds results" in r.stderr
    r = evoenv("dedupe", lib, "--out", "a", "--resume", "--clean", cwd=tmp_path)
    assert r.returncode == 2
    r = evoenv("dedupe", lib, "--out", "a", "--resume", "--json", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "a" / "verdicts.jsonl").read_bytes() == full
    # killed after a few verdicts (the last line torn): resume finishes with the same verdicts
    lines = full.splitlines(keepends=True)
    (tmp_path / "a" / "verdicts.jsonl").write_bytes(b"".join(lines[:5]) + lines[5][:20])
    r = evoenv("dedupe", lib, "--out", "a", "--resume", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "a" / "verdicts.jsonl").read_bytes() == full
    # the same without the cached signatures of the kept ones: they are sampled again
    (tmp_path / "a" / "dedupe-signatures.jsonl").unlink()
    (tmp_path / "a" / "verdicts.jsonl").write_bytes(b"".join(lines[:9]))
    r = evoenv("dedupe", lib, "--out", "a", "--resume", "--json", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "a" / "verdicts.jsonl").read_bytes() == full
    r = evoenv("dedupe", lib, "--out", "a", "--clean", "--json", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "a" / "verdicts.jsonl").read_bytes() == full


def test_bad_arguments_exit_2_in_one_line(tmp_path):
    r = evoenv("dedupe", tmp_path / "missing", "--out", "o", cwd=tmp_path)
    assert r.returncode == 2 and "no such library" in r.stderr
    r = evoenv("dedupe", SEEDS, "--out", "o", "--against", tmp_path / "nope", cwd=tmp_path)
    assert r.returncode == 2 and "nope" in r.stderr and not (tmp_path / "o").exists()
    r = evoenv("dedupe", SEEDS, "--out", "o", "--threshold", "1.5", cwd=tmp_path)
    assert r.returncode == 2
    r = evoenv("dedupe", "--help", cwd=tmp_path)
    assert r.returncode == 0 and "Example:" in r.stdout


# -- composites ----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_composites_are_judged_by_structure_not_by_their_embedded_code(tmp_path):
    """Composites embed their parents' sources (and prompts), so by code or prompt they look like
    their parents and each other; only one repeating another's operator and parents is a
    duplicate. A file that merely declares OPERATOR, with no compose lineage, is judged by code."""
    from evoenv_cli import loop as iterate
    from evoenv_cli.artifacts import EnvLibrary
    from evoenv_cli.envfile import EnvFile, env_id_of
    from evoenv_cli.stages import compose

    r = evoenv(
        "compose", SEEDS, "--out", "comp", "--n", "12", "--max-depth", "2", "--seed", "1", "--json", cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    lib = EnvLibrary.open(tmp_path / "comp")
    members = [(e, lib.index[e.env_id]) for e in lib.files]
    assert len(members) >= 8
    # a sibling of a SELECT/SORT composite: the same operator and parent, another n
    env, record = next((e, rec) for e, rec in members if rec["operator"] in ("sort", "select") and rec["depth"] == 1)
    parent = EnvFile.from_path(SEEDS / record["parents"][0])
    plan = compose.Blueprint(record["operator"], [compose.Part(parent, parent.name, "int", None, [])], n=5)
    source = compose.render(plan, {}).encode()
    sibling = EnvFile(tmp_path / f"{plan.name()}.py", source, env_id_of(source))
    members.append((sibling, dict(record, file=sibling.path.name)))
    # and a copy of a composite (its OPERATOR line too) with no compose lineage: code decides
    copy_src = "# written by the policy, surely\n" + members[0][0].source.decode()
    forged = EnvFile(tmp_path / "zz_forged.py", copy_src.encode(), env_id_of(copy_src.encode()))
    members.append((forged, {"origin": "synthesize"}))
    # a composite whose lineage names another parent but that behaves as a kept one: its solve
    # gives that one's answers on that one's instances, and its score accepts them
    other = next(p.name for p in sorted(SEEDS.glob("*.py")) if p.name not in record["parents"])
    twin_src = b"# the same composite under another lineage\n" + env.source
    twin = EnvFile(tmp_path / "zz_twin.py", twin_src, env_id_of(twin_src))
    members.append((twin, dict(record, file=twin.path.name, parents=[other])))
    iterate.write_pool(tmp_path / "cands", members)

    r = evoenv("dedupe", "cands", "--against", SEEDS, "--out", "out", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    v = verdicts(tmp_path / "out")
    for e, rec in members[:-3]:
        assert v[e.path.name]["admitted"], v[e.path.name]
        assert v[e.path.name]["structure"] == {
            "operator": rec["operator"],
            "parents": sorted(rec["parents"]) if rec["operator"] == "parallel" else rec["parents"],
        }
    twin = v[sibling.path.name]
    assert twin["stage"] == "duplicate_structure" and twin["duplicate_of"]["file"] == env.path.name, twin
    assert v["zz_forged.py"]["stage"] == "duplicate_code", v["zz_forged.py"]
    assert v["zz_forged.py"]["duplicate_of"]["file"] == members[0][0].path.name
    same = v["zz_twin.py"]
    assert same["stage"] == "duplicate_behaviour" and same["duplicate_of"]["signature"] == "solve", same
    assert same["duplicate_of"]["file"] == env.path.name and same["structure"]["parents"] == [other], same
    # as a pool next round, the kept composites still block their repeats
    r = evoenv("dedupe", "cands", "--against", "out", "--out", "again", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    again = verdicts(tmp_path / "again")
    assert all(not x["admitted"] for x in again.values()), {f: x["stage"] for f, x in again.items() if x["admitted"]}
    assert again["zz_twin.py"]["stage"] == "duplicate_behaviour", again["zz_twin.py"]
    assert {x["stage"] for f, x in again.items() if f not in ("zz_forged.py", "zz_twin.py")} == {"duplicate_structure"}
