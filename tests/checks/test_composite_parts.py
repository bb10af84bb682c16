"""Composites probed per part (issue 42, rule 4). A composite at level d runs its parts at
start + ceil(d / 2) - 1, so over the composite's levels 1..10 a part started at 1 runs at 1..5
only. The hostile parts come from a generator: a seed whose prompt also states its own answer,
in a form validate's leak check reads (a numeral in another base after a word, the last digits
of an order number, number words), at the low levels only: few enough that the part alone passes
validate's leak check at its levels 1..10 (levels 1-2 for a form the prompt-only learners read,
1-3 for one only the solvers read), while a composite, which runs it at 1..5, states it on
40-60% of its instances. For each operator the composite is admitted with compose.probe_parts
off (the old code: validate sees only the composite's answer, never a part's) and rejected with
it on, naming the part and its levels. A PARALLEL part whose score pays twice the answer at
level 1 alone is the fuzz check's family (its name picked so that validate fuzzes level 1 once). A SEQUENTIAL part 2 that states X a second time, as written
where the mask does not reach it ("No12", "12rd"), is caught by the part-one check's as_written
solver, which the old check lacked."""

import json
import random
from pathlib import Path

import pytest
from conftest import INT_SEEDS, SEEDS

from evoenv_cli import artifacts
from evoenv_cli.checks import leak_solvers
from evoenv_cli.checks.composite_parts import PartProbes
from evoenv_cli.checks.context import Checker, Instance, sample_pairs, training_seeds
from evoenv_cli.config import ComposeConfig, RuntimeConfig, ValidateConfig
from evoenv_cli.envfile import EnvFile, env_id_of
from evoenv_cli.operators import Blueprint, Part, part_levels
from evoenv_cli.runtime.session import Runtime
from evoenv_cli.stages import compose

# SORT's part: one whose answers rarely tie (register_machine's three at levels 1-5 tie on 0-6% of
# instances, knapsack's on 5-21%, coin_change_ways' on up to 53%): main's fuzzer counted swapped
# tied labels as accepted permutations, so there the old verdict on a SORT composite hung on ties
WIDE_SEEDS = ("register_machine",)
WRAPPER = """

_BASE_GENERATE, _BASE_PROMPT, _BASE_SCORE = generate, prompt, score
_SMALL = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def _in_base(n, b):
    digits = ""
    while True:
        n, r = divmod(n, b)
        digits = str(r) + digits
        if n == 0:
            return digits


def _words(n):
    if n < 20:
        return _SMALL[n]
    if n < 100:
        return _TENS[n // 10] + (" " + _SMALL[n % 10] if n % 10 else "")
    if n < 1000:
        return _SMALL[n // 100] + " hundred" + (" " + _words(n % 100) if n % 100 else "")
    return _words(n // 1000) + " thousand" + (" " + _words(n % 1000) if n % 1000 else "")


def generate(seed, difficulty):
    instance = _BASE_GENERATE(seed, difficulty)
    instance["_level"] = int(difficulty)
    return instance


def prompt(instance):
    text = _BASE_PROMPT(instance)
    if instance.get("_level", 11) <= LOW_HERE:
        answer = int(solve(instance))
        text += FORM_HERE
    return text


def score(instance, answer):
    if instance.get("_level", 11) <= LENIENT_HERE:
        try:
            if int(str(answer).strip()) == 2 * int(solve(instance)):
                return 1.0
        except ValueError:
            pass
    return _BASE_SCORE(instance, answer)
"""


def leak_form(rng: random.Random, kind: str) -> tuple[str, int]:
    """(what the prompt appends, in terms of `answer`; the highest level it is written at)."""
    if kind == "base":  # the learners read a numeral after a word in bases 2..16
        word = rng.choice(("ref", "memo", "tag", "code", "batch"))
        return f'" ({word} " + _in_base(answer, {rng.randint(3, 9)}) + ")"', 2
    if kind == "order":  # the learners read the last digits of a numeral
        return f'" (order {rng.randint(10, 99)}" + format(answer, "04d") + ")"', 2
    # the number_words solver reads a run of two words or more: one word gets a "zero" before it
    return '" (" + ("" if " " in _words(answer) else "zero ") + _words(answer) + ")"', 3


def hostile(seed: str, name: str, form: str = '""', low: int = 0, lenient: int = 0) -> str:
    """The seed renamed, its prompt stating its answer by `form` at levels <= low, its score
    paying twice the answer at levels <= lenient."""
    text = (SEEDS / f"{seed}.py").read_text().replace(f'NAME = "{seed}"', f'NAME = "{name}"')
    wrapper = WRAPPER.replace("LOW_HERE", str(low)).replace("FORM_HERE", form)
    return text + wrapper.replace("LENIENT_HERE", str(lenient))


def records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def rt():
    with Runtime(RuntimeConfig()) as runtime:
        yield runtime


def compose_once(tmp: Path, files: dict[str, str], op: str, probe_parts: bool, rt: Runtime) -> dict:
    """The one composite `op` makes of `files` (named), judged with compose.probe_parts as given."""
    lib = tmp / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (lib / f"{name}.py").write_text(text)
    out = artifacts.prepare_out_dir(tmp / f"out-{probe_parts}", False, False)
    cfg = ComposeConfig(ops=[op], n=1, seed=0, probe_parts=probe_parts)
    compose.run(artifacts.EnvLibrary.open(lib), cfg, ValidateConfig(), RuntimeConfig(), out, session=rt)
    (verdict,) = records(out / "verdicts.jsonl")
    return verdict


def alone_passes(text: str, name: str, tmp: Path, rt: Runtime, checks=("leak",)) -> None:
    """The part on its own, at validate's levels 1..10, passes validate's leak (and fuzz) check:
    the low levels are too few of its instances."""
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / f"{name}.py"
    path.write_text(text)
    env = EnvFile.from_path(path)
    meta = rt.workers.describe(env)
    part = Part(env, name, meta.get("ANSWER_TYPE"), meta.get("INPUT_TYPE"), list(meta.get("TAGS") or []))
    probes = PartProbes(ValidateConfig(), rt.workers, rt.fresh)
    for check in checks:
        rej = probes.verdict(part, list(range(1, 11)), check)
        assert rej is None, rej.reason


def assert_caught(verdict: dict, part: int, levels: str, stage: str = "leak") -> None:
    assert not verdict["admitted"] and verdict["stage"] == stage, verdict["reason"]
    assert verdict["probe"].startswith(f"part_{part}_"), verdict["probe"]
    assert f"part {part} (" in verdict["reason"] and f"at levels {levels}," in verdict["reason"], verdict["reason"]


# (operator, how the part is hostile): every operator, every form of the generator
MEMBERS = [
    ("select", "base"),
    ("select", "words"),
    ("sort", "order"),
    ("sort", "words"),
    ("parallel", "base"),
    ("parallel", "words"),
    ("parallel", "lenient"),  # the fuzz check's: the composite calls the part's score
    ("sequential", "base"),  # the learners' forms: the old part-one check's solvers miss them
    ("sequential", "order"),
]


def member(op: str, kind: str) -> tuple[str, str, dict[str, str], tuple[str, ...]]:
    """The hostile part (name, source), the other files its composite takes, and the checks it
    passes alone. A leaking part states its answer at levels 1-2 or 1-3; a lenient one pays
    twice the answer at level 1 alone (one of the ten instances validate fuzzes over
    1..10, two or more of those over 1..5)."""
    rng = random.Random(f"{op}:{kind}")
    if op == "sequential":  # part 1, into register_machine; no INPUT_TYPE int, so the one plan
        seed = rng.choice(("grid_shortest_path", "longest_increasing_subsequence"))
    else:
        seed = rng.choice(WIDE_SEEDS if op == "sort" else INT_SEEDS)
    others = {}
    if op == "parallel":
        partner = rng.choice([s for s in INT_SEEDS if s != seed])
        others[partner] = (SEEDS / f"{partner}.py").read_text()
    if op == "sequential":
        others["register_machine"] = (SEEDS / "register_machine.py").read_text()
    if kind == "lenient":
        # its name picked, from the public seed derivation, so that validate fuzzes level 1 once
        name, text = next(
            (n, t)
            for k in range(50)
            if fuzzed_at_level_one(t := hostile(seed, n := f"lenient_{seed}_{k}", lenient=1), n) == 1
        )
        return name, text, others, ("fuzz",)
    form, low = leak_form(rng, kind)
    return f"low_{seed}", hostile(seed, f"low_{seed}", form, low), others, ("leak",)


def fuzzed_at_level_one(text: str, name: str) -> int:
    """How many of the instances validate's fuzzer takes (`Checker.spread` of `run`'s instances
    over 1..10 and `sample`'s seeds) are at level 1: pure arithmetic on the file's hash and name."""
    cfg = ValidateConfig()
    env = EnvFile(Path(f"{name}.py"), text.encode(), env_id_of(text.encode()))
    pairs = [(s, d) for d in cfg.levels for s in training_seeds(env.env_id, f"level:{d}", cfg.seeds_per_level)]
    checker = Checker(env, cfg)
    checker.sampled = {p for p in sample_pairs(env.env_id, name, cfg) if p not in pairs}
    insts = [Instance(s, d, {}) for s, d in pairs + sorted(checker.sampled)]
    return sum(1 for i in checker.spread(insts, cfg.fuzz_instances) if i.difficulty == 1)


@pytest.mark.parametrize("op, kind", MEMBERS)
def test_a_part_hostile_at_low_levels_is_caught_in_every_operator(tmp_path, rt, op, kind):
    name, text, others, checks = member(op, kind)
    alone_passes(text, name, tmp_path / "alone", rt, checks)
    files = {name: text, **others}
    old = compose_once(tmp_path / "old", files, op, False, rt)
    # the old code: validate sees the composite's answer (labels, part lines; for SEQUENTIAL part
    # 2's) and score, never this part's; the old part-one check's solvers do not read these forms
    assert old["admitted"], old["reason"]
    new = compose_once(tmp_path / "new", files, op, True, rt)
    k = 1 + old["parents"].index(f"{name}.py")
    assert_caught(new, k, "1-5", "discrimination" if kind == "lenient" else "leak")
    assert op != "sequential" or k == 1
    assert ("_fuzz_" in new["probe"]) == (kind == "lenient"), new["probe"]


GLUED = ("No{x}", "{x}rd", "v{x}", "{x}x", "#{x}.", "lot{x}")


@pytest.mark.parametrize("family_seed", [1, 2])
def test_a_sequential_part_two_stating_x_as_written_is_caught_by_the_part_one_check(
    tmp_path, rt, family_seed, monkeypatch
):
    """Part 2 shows X once as is (masked) and once glued to a word or a suffix, which the mask
    leaves: X stated as written, for X under 1000 (the thousands solver reads larger ones)."""
    rng = random.Random(f"as-written:{family_seed}")
    glued = rng.choice(GLUED).replace("{x}", '" + str(instance["initial"]["a"]) + "')
    part_two = (SEEDS / "register_machine.py").read_text().replace('NAME = "register_machine"', 'NAME = "restated"')
    part_two += f"""

_SHOWN_PROMPT = prompt


def prompt(instance):
    return _SHOWN_PROMPT(instance) + " (batch {glued})"
"""
    files = {"grid_shortest_path": (SEEDS / "grid_shortest_path.py").read_text(), "restated": part_two}
    with monkeypatch.context() as m:  # the old part-one check: its solvers without as_written
        m.setattr(leak_solvers, "COMPOSITE_SOLVERS", leak_solvers.SOLVERS)
        old = compose_once(tmp_path / "old", files, "sequential", False, rt)
    assert old["admitted"], old["reason"]
    new = compose_once(tmp_path / "new", files, "sequential", True, rt)
    assert not new["admitted"] and new["probe"] == "leak_part_one_as_written", new["reason"]


def test_the_seeds_parts_pass_at_the_levels_their_composites_run_them_at(rt):
    """No false positive: each seed, at the levels a composite started at 1 runs it at (1..5),
    passes the leak and fuzz checks the per-part probe gives it."""
    library = artifacts.EnvLibrary.open(SEEDS)
    parts, _, _ = compose.describe_parts(library, rt.workers)
    assert len(parts) == 10
    probes = PartProbes(ValidateConfig(), rt.workers, rt.fresh)
    levels = part_levels(Blueprint("select", parts[:1]))[0]
    assert levels == [1, 2, 3, 4, 5]
    found = {
        (p.name, check): rej.reason
        for p in parts
        for check in ("leak", "fuzz")
        if (rej := probes.verdict(p, levels, check)) is not None
    }
    assert not found, found
    assert probes.judged == 10  # each part's instances made once for both checks


def test_part_levels_follow_the_composites_level_rule():
    env = EnvFile(Path("a.py"), b"a", "id-a")
    a, b = Part(env, "a", "int", None, []), Part(EnvFile(Path("b.py"), b"b", "id-b"), "b", "int", None, [])
    assert part_levels(Blueprint("parallel", [a, b])) == [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5]]
    assert part_levels(Blueprint("parallel", [a, b], levels=[3, 8])) == [[3, 4, 5, 6, 7], [8, 9, 10]]
    assert part_levels(Blueprint("sort", [a], levels=[2]), (1, 2)) == [[2]]


def test_a_sort_composite_is_fuzzed_by_its_rule_ties_in_any_order(tmp_path, rt):
    """SORT accepts tied labels in either order, so its answer is one of several whenever two of
    its n answers tie: the fuzzer no longer counts those swaps as accepted permutations (main
    rejected SORT of longest_increasing_subsequence, whose answers tie often, as
    fuzz_permutation; the per-part probe, at levels 1-5, saw more ties still)."""
    seed = "longest_increasing_subsequence"
    verdict = compose_once(tmp_path, {seed: (SEEDS / f"{seed}.py").read_text()}, "sort", True, rt)
    assert verdict["admitted"], verdict["reason"]
    assert verdict["fuzz_unique_answer"] is False
