"""`make bench`, dedupe section: the novelty contract's streaming path at 10k and 100k
synthetic environments, to show the cost grows near-linearly.

The sources are generated in-process from the seeds: a fifth are mutated copies of a seed, a
fifth mutated copies of an earlier synthetic environment (renamed identifiers, changed
constants, shuffled functions, added comments), the rest new environments spliced from seed
functions and random code. They are written to batch files first (not timed: they stand for a
library on disk). Then, timed: the seeds go in as the pool, and each source is read back,
signed with the stage's own `code_signature` (on two worker processes) and judged in file
order with the stage's own `decide` + `NoveltyIndex` (query the LSH, insert when kept).

Only the code signature is measured: the behaviour signature samples prompts in the sandbox
(about 0.1 s per environment), far too slow for 100k; its LSH path is the same code. Code alone
rejects only from `code_sure_threshold` up; a planted copy between `code_threshold` and that is
counted apart (`left_to_prompts`): the stage rejects it when the same member's prompts agree,
which a renamed copy's always do, but this bench has no prompts, so here it is kept.

Each size runs in a fresh process so its peak memory (ru_maxrss of the parent plus that of
its largest worker, times the number of workers) is its own.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import keyword
import multiprocessing
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from evoenv_cli.config import DedupeConfig
from evoenv_cli.novelty.index import Member, NoveltyIndex, decide
from evoenv_cli.novelty.minhash import code_signature
from evoenv_cli.novelty.tokens import CONTRACT_NAMES, STABLE_ATTRS

ROOT = Path(__file__).resolve().parents[1]
CFG = DedupeConfig()
PROCESSES = 2
BATCH = 250
SEED_COPY, NOVEL_COPY = 0.2, 0.4  # kind thresholds on one uniform draw per index

_SEEDS: list[dict] = []


def _parts(src: str) -> dict:
    """A source split into its header (before the first def) and top-level function blocks,
    with the user identifiers a renamer would touch."""
    lines = src.splitlines(keepends=True)
    body = ast.parse(src).body
    first = next(i for i, n in enumerate(body) if isinstance(n, ast.FunctionDef))
    starts = [n.lineno - 1 for n in body[first:]] + [len(lines)]
    blocks = ["".join(lines[starts[i] : starts[i + 1]]).rstrip("\n") + "\n\n\n" for i in range(len(starts) - 1)]
    keep = set(dir(builtins)) | set(keyword.kwlist) | CONTRACT_NAMES
    names = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            keep |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.keyword) and node.arg:
            keep.add(node.arg)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
    names -= keep
    return {
        "header": "".join(lines[: starts[0]]),
        "blocks": blocks,
        "names": sorted(names),
        "pattern": re.compile(r"\b(" + "|".join(sorted(names, key=len, reverse=True)) + r")\b"),
    }


def _load_seeds() -> None:
    if not _SEEDS:
        _SEEDS.extend(_parts(p.read_text()) for p in sorted((ROOT / "seeds").glob("*.py")))


WORDS = "we then take the value and keep every item of the list in order as the next step".split()
ATTRS = sorted(a for a in STABLE_ATTRS if a.islower() and not a.startswith("_"))
BUILTINS = [
    "len",
    "sum",
    "min",
    "max",
    "abs",
    "sorted",
    "range",
    "enumerate",
    "zip",
    "list",
    "set",
    "dict",
    "tuple",
    "str",
    "int",
    "divmod",
    "pow",
    "any",
    "all",
    "reversed",
]
OPS = ["+", "-", "*", "//", "%", "<<", ">>", "^", "|", "&"]
CMPS = ["<", "<=", ">", ">=", "==", "!="]


def _expr(rng: random.Random, names: list[str], depth: int = 0) -> str:
    r = rng.random()
    if depth > 1 or r < 0.3:
        return rng.choice(names) if rng.random() < 0.7 else str(rng.randrange(100))
    if r < 0.55:
        return f"{_expr(rng, names, depth + 1)} {rng.choice(OPS)} {_expr(rng, names, depth + 1)}"
    if r < 0.8:
        return f"{rng.choice(BUILTINS)}({_expr(rng, names, depth + 1)})"
    return f"{rng.choice(names)}.{rng.choice(ATTRS)}({_expr(rng, names, depth + 1)})"


def _function(rng: random.Random, name: str) -> str:
    names = [f"x{k}" for k in range(rng.randint(3, 7))]
    args = ", ".join(names[: rng.randint(1, 3)])
    out = [f"def {name}({args}):"]
    indent = "    "
    for _ in range(rng.randint(4, 10)):
        r = rng.random()
        if r < 0.5:
            out.append(f"{indent}{rng.choice(names)} = {_expr(rng, names)}")
        elif r < 0.65 and len(indent) < 12:
            out.append(f"{indent}for {rng.choice(names)} in {rng.choice(BUILTINS)}({_expr(rng, names)}):")
            indent += "    "
            out.append(f"{indent}{rng.choice(names)} = {_expr(rng, names)}")
        elif r < 0.8 and len(indent) < 12:
            out.append(f"{indent}if {_expr(rng, names)} {rng.choice(CMPS)} {_expr(rng, names)}:")
            indent += "    "
            out.append(f"{indent}{rng.choice(names)}.{rng.choice(ATTRS)}({_expr(rng, names)})")
        elif len(indent) > 4:
            indent = indent[:-4]
            out.append(f"{indent}{rng.choice(names)} += {_expr(rng, names)}")
        else:
            out.append(f"{indent}{rng.choice(names)} = {_expr(rng, names)}")
    out.append(f"{indent}return {_expr(rng, names)}")
    return "\n".join(out) + "\n\n\n"


_FUNCTIONS: list[str] = []
NOVEL_NAMES = re.compile(r"\b(?:fn_\d+|x\d)\b")


def _function_library() -> list[str]:
    """Random functions, made once per process; new environments are drawn from them."""
    if not _FUNCTIONS:
        rng = random.Random("functions")
        _FUNCTIONS.extend(_function(rng, f"fn_{k}") for k in range(4000))
    return _FUNCTIONS


def _novel_parts(j: int) -> dict:
    """A new environment: a header, one function of a seed, one to three random helper
    functions and the contract's four, also random."""
    rng = random.Random(f"novel:{j}")
    library = _function_library()
    blocks = [rng.choice(rng.choice(_SEEDS)["blocks"])]
    blocks += rng.sample(library, rng.randint(1, 3))
    for name in ("generate", "prompt", "solve", "score"):
        block = rng.choice(library)
        blocks.append(f"def {name}{block[block.index('(') :]}")
    rng.shuffle(blocks)
    header = f'"""Synthetic environment {j}."""\n\nimport random\nimport re\n\nNAME = "synthetic_{j}"\n\n\n'
    return {"header": header, "blocks": blocks, "names": None, "pattern": NOVEL_NAMES}


def _mutated(parts: dict, rng: random.Random) -> str:
    """Renamed identifiers, changed constants, shuffled functions, added comments."""
    mapping: dict[str, str] = {}
    prefixes = ["val", "tmp", "item", "acc"]

    def rename(m: re.Match) -> str:
        new = mapping.get(m.group(0))
        if new is None:
            new = mapping[m.group(0)] = f"{rng.choice(prefixes)}_{rng.randrange(10**6)}"
        return new

    blocks = list(parts["blocks"])
    rng.shuffle(blocks)
    text = parts["pattern"].sub(rename, parts["header"] + "".join(blocks))
    text = re.sub(r"(?<![\w.])\d+(?![\w.])", lambda m: str(rng.randrange(1, 200)), text)
    lines = text.split("\n")
    for _ in range(rng.randint(3, 10)):
        at = rng.randrange(len(lines))
        lines.insert(at, "# " + " ".join(rng.sample(WORDS, 6)))
    return "\n".join(lines)


def kind_of(i: int) -> str:
    r = random.Random(i).random()
    return "seed_copy" if r < SEED_COPY else "novel_copy" if r < NOVEL_COPY else "novel"


def synthetic(i: int) -> tuple[str, str]:
    """(kind, source) of synthetic environment i; the same i gives the same source anywhere."""
    _load_seeds()
    rng = random.Random(f"env:{i}")
    kind = kind_of(i)
    if kind == "seed_copy":
        return kind, _mutated(rng.choice(_SEEDS), rng)
    if kind == "novel_copy":
        for _ in range(100):
            j = rng.randrange(max(1, i))
            if kind_of(j) == "novel":
                return kind, _mutated(_novel_parts(j), rng)
        kind = "novel"
    parts = _novel_parts(i)
    return kind, parts["header"] + "".join(parts["blocks"])


def _write_batch(args: tuple[str, int, int]) -> tuple[list[str], list[int]]:
    """Generate sources start..stop into their own file; (kinds, sizes in bytes)."""
    folder, start, stop = args
    kinds, sizes = [], []
    with open(f"{folder}/{start:08d}.src", "wb") as f:
        for i in range(start, stop):
            kind, source = synthetic(i)
            data = source.encode()
            f.write(data)
            kinds.append(kind)
            sizes.append(len(data))
    return kinds, sizes


def _sign_batch(args: tuple[str, int, list[int]]) -> np.ndarray:
    """Read one batch file and sign each source with the stage's `code_signature`."""
    folder, start, sizes = args
    rows = np.zeros((len(sizes), CFG.num_perm), dtype=np.uint32)
    with open(f"{folder}/{start:08d}.src", "rb") as f:
        for k, size in enumerate(sizes):
            rows[k] = code_signature(f.read(size), CFG)
    return rows


def generate(folder: str, n: int) -> tuple[list[tuple[int, int]], list[str], list[list[int]]]:
    """The n synthetic sources, written to `folder` in batches (not timed: they stand for a
    library on disk)."""
    batches = [(s, min(n, s + BATCH)) for s in range(0, n, BATCH)]
    with multiprocessing.get_context("fork").Pool(PROCESSES) as workers:
        made = workers.map(_write_batch, [(folder, a, b) for a, b in batches])
    return batches, [k for kinds, _ in made for k in kinds], [sizes for _, sizes in made]


def measure(n: int) -> dict:
    """Sign n synthetic sources on worker processes and judge them in one stream."""
    with tempfile.TemporaryDirectory(prefix="evoenv-bench-dedupe-") as folder:
        batches, kinds, sizes = generate(folder, n)
        return _measure(folder, batches, kinds, sizes)


def _measure(folder: str, batches, kinds: list[str], sizes: list[list[int]]) -> dict:
    n = len(kinds)
    index = NoveltyIndex(CFG)
    for path in sorted((ROOT / "seeds").glob("*.py")):
        index.add(Member(path.name, "seeds", "", None, True), code_signature(path.read_bytes(), CFG), None)
    counts = {
        "kept": 0,
        "caught": 0,
        "left_to_prompts": 0,
        "planted": 0,
        "novel_rejected": 0,
        "novel": 0,
        "bytes": sum(map(sum, sizes)),
    }
    cpu0 = _cpu_seconds()
    started = time.perf_counter()
    marks = []  # wall time at every tenth of the stream: the per-tenth cost shows the growth
    jobs = [(folder, start, batch_sizes) for (start, _), batch_sizes in zip(batches, sizes)]
    with multiprocessing.get_context("fork").Pool(PROCESSES) as workers:
        for (_, start, _), rows in zip(jobs, workers.imap(_sign_batch, jobs)):
            for k, values in enumerate(rows):
                kind = kinds[start + k]
                decision = decide(index, values, None)
                if kind == "novel":
                    counts["novel"] += 1
                    counts["novel_rejected"] += not decision.admitted
                else:
                    counts["planted"] += 1
                    counts["caught"] += decision.stage == "duplicate_code"
                    near = decision.measurements.get("nearest_code") or {}
                    counts["left_to_prompts"] += decision.admitted and near.get("jaccard", 0) >= CFG.code_threshold
                if decision.admitted:
                    counts["kept"] += 1
                    index.add(Member(f"env_{start + k}.py", "synthetic", "", None, False), values, None)
            if (start + len(rows)) * 10 // n > len(marks):
                marks.append(time.perf_counter() - started)
    wall = time.perf_counter() - started
    cpu = _cpu_seconds() - cpu0
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    tenths = [b - a for a, b in zip([0.0] + marks, marks)]
    return {
        "n": n,
        "wall": wall,
        "cpu": cpu,
        "tenths": tenths,
        "peak_mb": own + PROCESSES * child,
        "own_mb": own,
        "worker_mb": child,
        **counts,
    }


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (the signing workers)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def child_main(n: int) -> None:
    r = measure(n)
    print(
        f"bench dedupe: envs={r['n']} wall_s={r['wall']:.1f} peak_mb={r['peak_mb']:.0f} cpu_s={r['cpu']:.1f} "
        f"(parent {r['own_mb']:.0f} MB + {PROCESSES} workers x {r['worker_mb']:.0f} MB) "
        f"kept={r['kept']} planted_duplicates_caught={r['caught']}/{r['planted']} "
        f"left_to_prompts={r['left_to_prompts']} "
        f"new_rejected={r['novel_rejected']}/{r['novel']} mean_source_bytes={r['bytes'] // r['n']} "
        f"wall_s_per_tenth={','.join(f'{t:.1f}' for t in r['tenths'])}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, help="one size, in this process (used by the default run)")
    args = parser.parse_args()
    if args.n:
        child_main(args.n)
        return
    print(
        "dedupe bench: code signature + LSH query/insert only (the behaviour signature needs "
        f"the sandbox and is not measured); {PROCESSES} signing processes",
        flush=True,
    )
    got = {}
    for n in (10_000, 100_000):
        out = subprocess.run([sys.executable, __file__, "--n", str(n)], capture_output=True, text=True, check=True)
        line = out.stdout.strip().splitlines()[-1]
        print(line, flush=True)
        got[n] = {k: float(re.search(rf"{k}=([\d.]+)", line).group(1)) for k in ("wall_s", "cpu_s")}
    tenths = [float(t) for t in re.search(r"wall_s_per_tenth=([\d.,]+)", line).group(1).split(",")]
    print(
        f"bench dedupe: growth 10k -> 100k wall x{got[100_000]['wall_s'] / got[10_000]['wall_s']:.1f}, "
        f"cpu x{got[100_000]['cpu_s'] / got[10_000]['cpu_s']:.1f} (x10 is linear); within the 100k run "
        f"the last tenth took x{tenths[-1] / tenths[0]:.2f} the first (a wall ratio: other load on the "
        "machine moves it)"
    )


if __name__ == "__main__":
    main()
