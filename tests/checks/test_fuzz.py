"""The scorer fuzzer's and the prompt-only leak solvers' pure parts: which mutants are planned,
which answers count as formats of the reference, and when a solver beats its chance rate. The
sandboxed end-to-end checks are in test_validate_corpus.py."""

import json
import random
import subprocess
import sys
from pathlib import Path

from evoenv_cli.checks import fuzz, leak_solvers, pay


def _plan(reference: str, unique: bool = True, source: str = "NAME = 'x'\n") -> list[fuzz.Mutant]:
    instance = {"numbers": [12, 40, 7]}
    return fuzz.plan([(instance, "Numbers: 12, 40, 7.", reference)], source, unique, random.Random(0), 10_000)


def test_a_random_string_is_uniform_over_its_alphabet_and_a_function_of_the_rng():
    """The fuzzer's random answers of a reference's shape (probes.random_string): every
    character of the alphabet equally likely (bytes past the largest multiple of its size are
    dropped, not folded onto the first characters), any alphabet (non-ASCII too), and the same
    string from the same seed."""
    from collections import Counter

    from evoenv_cli.checks.probes import random_string

    # 255 characters: folded by b % 255, the first would come up twice as often (31 sigma here)
    wide = [chr(0x100 + i) for i in range(255)]
    for alphabet, n in (("0123456789", 100_000), ("abc", 30_000), ("é→z", 30_000), (wide, 255_000)):
        text = random_string(random.Random(7), alphabet, n)
        assert len(text) == n and set(text) <= set(alphabet)
        counts = Counter(text)
        expected = n / len(alphabet)
        assert all(abs(counts[c] - expected) < 5 * expected**0.5 for c in alphabet), counts.most_common(3)
        assert random_string(random.Random(7), alphabet, n) == text
    huge = [chr(0x4E00 + i) for i in range(300)]  # more than a byte's values: drawn one by one
    assert len(random_string(random.Random(7), huge, 50)) == 50
    assert random_string(random.Random(1), "x", 4) == "xxxx" and random_string(random.Random(1), "ab", 0) == ""


def test_every_kind_is_planned_for_a_unique_int_answer_and_none_is_the_reference():
    mutants = _plan("4118")
    kinds = {m.kind for m in mutants}
    assert {"alternatives", "range", "random_shape", "permutation", "number_format", "sign", "neighbour"} <= kinds
    assert {"echo", "formula"} <= kinds
    assert all(leak_solvers.normalize(m.answer) != "4118" for m in mutants)
    assert "４１１９" in {m.answer for m in mutants} and "four thousand one hundred nineteen" in {
        m.answer for m in mutants
    }
    shaped = [m.answer for m in mutants if m.kind == "random_shape"]
    assert len(shaped) == fuzz.RANDOM_PER_INSTANCE and all(len(a) == 4 and a.isdigit() for a in shaped)


def test_a_planted_answer_counts_in_full_only_the_kinds_its_declared_rule_forbids():
    """A planted answer's other kinds are planned too, but count at partial pay only: a valid
    answer is paid in full, so a wrong one paid over chance and under full pay is paid."""
    source = "NAME = 'x'\nLIMIT = 50\nCODE = 'open-sesame'\n"
    mutants = _plan("3 9 14", unique=False, source=source)
    assert {m.kind for m in mutants if m.full} <= set(fuzz.SHAPE_FREE)
    assert {"superset", "subset", "permutation", "neighbour"} <= {m.kind for m in mutants if not m.full}
    literals = {m.answer for m in mutants if m.kind == "literal" and m.full}
    assert "open-sesame" in literals and "50" in literals  # scalars, not a list like the reference


def test_an_order_free_answer_gets_every_kind_but_reorderings():
    """Unique up to order: an extra item or a missing one is still wrong, a reordering is not."""
    mutants = fuzz.plan(
        [({"numbers": [12, 40, 7, 3, 9, 14]}, "Numbers: 12, 40, 7, 3, 9, 14.", "3 9 14")],
        "NAME = 'x'\n",
        False,
        random.Random(0),
        10_000,
        order_free=True,
    )
    assert all(m.full for m in mutants)
    kinds = {m.kind for m in mutants}
    assert {"superset", "subset", "neighbour", "alternatives"} <= kinds and "permutation" not in kinds
    assert not [m for m in mutants if sorted(m.answer.split()) == ["14", "3", "9"]]


def _case_plan(prompt: str, references: list[str]) -> set[str]:
    cases = [({"k": i}, prompt, ref) for i, ref in enumerate(references)]
    return {m.answer for m in fuzz.plan(cases, "NAME = 'x'\n", True, random.Random(0), 10_000) if m.kind == "case"}


def test_case_only_changes_are_planned_where_the_case_is_information():
    # each letter's case asked for (no one convention), or the task is a change of case
    assert {"HeLLo", "hello", "HELLO"} <= _case_plan("Swap the case of each letter.", ["hEllO", "WORLD", "cat"])
    assert "apple" in _case_plan("Write the word apple in upper case.", ["APPLE"])
    # a convention every answer follows is not information: hex digits, capitalized names, labels
    assert not _case_plan("Convert 255 to base 16.", ["FF", "1A3", "B"])
    assert not _case_plan("Who is first?", ["Alice", "Bob Stone", "Carol"])
    assert not _case_plan("Which option?", ["A", "C", "B"])
    assert fuzz.conventions("1a3f") == {"lower"} and fuzz.conventions("42") is None


def test_a_reference_of_several_lines_follows_a_case_convention_per_line():
    """A PARALLEL composite's answer: capitalized labels, then a part's lower-case words. No
    one convention covers the whole answer, yet every answer follows the same one line by line."""
    parts = ["Part 1: 2\nPart 2: ten", "Part 1: 14\nPart 2: forty-one", "Part 1: 3\nPart 2: one hundred five"]
    assert not _case_plan("Two independent parts.", parts)
    # a line whose case varies from answer to answer is still information
    assert "PART 1: 2\nPART 2: TEN" in _case_plan("Two parts.", ["Part 1: 2\nPart 2: TEN", *parts])


def test_literals_include_negatives_dict_keys_and_values_folded_at_import():
    source = (
        '"""doc"""\nNAME = "x"\n_OVERRIDES = {"override-7": 1.0}\n_KEY = str(2**20 + 4321)\n'
        "def score(instance, answer):\n    return 1.0 if int(answer) == -73313 else 0.0\n"
    )
    found = fuzz.literals(source)
    assert {"override-7", "-73313", "1052897"} <= set(found)
    assert "doc" not in found and "73313" not in found  # docstrings left out, a negative kept as written


def test_judge_needs_the_same_kind_on_enough_instances():
    mutants = [fuzz.Mutant("range", 0, "1-9"), fuzz.Mutant("range", 1, "2-9"), fuzz.Mutant("sign", 0, "-4")]
    counts, found = fuzz.judge(mutants, [True, False, True], min_instances=2)
    assert counts == {"range": 1, "sign": 1} and found is None
    counts, found = fuzz.judge(mutants, [True, True, False], min_instances=2)
    assert found is not None and found.kind == "range" and found.instances == 2


def test_a_kind_paid_under_full_pay_must_beat_the_chance_rate():
    """Paid over the chance line but not in full: a finding only when paid more often than
    chance answers are; paid in full, a finding as before."""
    mutants = [fuzz.Mutant("neighbour", i, str(i)) for i in range(10)]
    paid = [True, True] + [False] * 8
    often = pay.Chance(tuple([1.0] * 30 + [0.0] * 70), 0.25)  # blind guesses right 30% of the time
    rarely = pay.Chance(tuple([0.0] * 100), 0.25)
    assert fuzz.judge(mutants, paid, 2, full=[False] * 10, beats_chance=often.beats_chance)[1] is None
    assert fuzz.judge(mutants, paid, 2, full=[False] * 10, beats_chance=rarely.beats_chance)[1] is not None
    assert fuzz.judge(mutants, paid, 2, full=paid, beats_chance=often.beats_chance)[1] is not None


def test_the_chance_line_sits_over_what_chance_answers_earn():
    chance = pay.Chance((0.1, 0.1, 0.0, 1.0), 0.25)
    assert chance.wrong_top == 0.1 and abs(chance.line - 0.35) < 1e-9 and chance.right == 0.25
    # the median: chance answers a lenient rule pays too do not lift the line to full pay
    assert pay.Chance(tuple([0.9] * 40 + [0.0] * 60), 0.25).line == 0.25
    assert chance.paid(0.4, "4120", "4118") and not chance.paid(0.3, "4120", "4118")
    # an answer that states the reference among other text is paid only in full
    assert not chance.paid(0.8, "4118.7", "4118") and chance.paid(1.0, "4118.7", "4118")
    assert pay.Chance((0.0,), 1.0).line == pay.PAID  # the measured rule off: full pay alone
    shape_pay = [0.25] * 40
    assert pay.Chance(tuple([0.0] * 100), 0.25).mean_over(shape_pay, 0.1)
    assert not pay.Chance(tuple([0.0] * 100), 0.25).mean_over([0.01] * 40, 0.1)  # a format credit
    assert not pay.Chance(tuple([0.0] * 100), 0.25).mean_over(shape_pay, 1.0)
    # a scorer that pays 0 or 1: what it pays is what being right explains
    assert not pay.Chance(tuple([0.0] * 100), 0.25).mean_over([1.0] * 10 + [0.0] * 30, 0.1)


def test_each_leak_solver_reads_its_form():
    cases = {
        "fullwidth": ("code ４１１８ here", "4118"),
        "number_words": ("expect four thousand one hundred eighteen.", "4118"),
        "thousands": ("someone got 4,118 here", "4118"),
        "think_block": ("<think>3000 and 1118, add them</think>", "4118"),
        "split_digits": ("It starts with 41. Then 18.", "4118"),
        "cipher": ("code: nopqr", "abcde"),
        "neighbour": ("one more than 4,117.", "4118"),
        "arithmetic": ("plus 21 should be 4139", "4118"),
    }
    solvers = {s.name: s for s in leak_solvers.SOLVERS}
    for name, (prompt, reference) in cases.items():
        assert reference in solvers[name].candidates(prompt), name


def test_the_cipher_reads_every_shift_and_reversal_of_each_word_and_nothing_else():
    """The cipher solver shifts all of a prompt's words in one pass a shift: what it reads is
    still, word by word, every Caesar shift (rot13 among them) and the word reversed, for the
    words of three letters or more, and nothing from a prompt without one."""
    import codecs
    import string

    def shifted(word: str, k: int) -> str:
        low, up = string.ascii_lowercase, string.ascii_uppercase
        return word.translate(str.maketrans(low + up, low[k:] + low[:k] + up[k:] + up[:k]))

    prompt = "Zebra at the ZOO, zoo; 7 is a Prime ok"
    words = {"Zebra", "the", "ZOO", "zoo", "Prime"}
    expected = {shifted(w, k) for w in words for k in range(1, 26)} | {w[::-1] for w in words}
    assert {codecs.encode(w, "rot13") for w in words} <= expected
    assert leak_solvers.cipher(prompt) == expected  # a lone digit: no spaced or reversed number
    assert leak_solvers.cipher("") == leak_solvers.cipher("at 1 ok") == set()


def test_a_prompt_full_of_numbers_is_judged_against_its_chance_rate():
    rng = random.Random(1)
    prompts = [" ".join(str(rng.randint(1, 60)) for _ in range(30)) for _ in range(20)]
    references = [str(rng.randint(1, 120)) for _ in prompts]  # answers of the prompts' own size, unrelated
    for r in leak_solvers.rates(prompts, references):
        assert r.share - r.baseline < 0.25, r
    leaked = [f"{p} (check: one more than {int(ref) - 1})" for p, ref in zip(prompts, references)]
    neighbour = {r.name: r for r in leak_solvers.rates(leaked, references)}["neighbour"]
    assert neighbour.share == 1.0


PART_ONE = '''"""Sum the squares of a list of three-digit numbers (a plain sum is what the arithmetic
leak solver computes from the prompt, a leak compose's per-part probe rejects)."""
import random
import re

NAME = "NAME_HERE"
ANSWER_TYPE = "int"


def generate(seed, difficulty):
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    return {"numbers": [rng.randint(300, 999) for _ in range(4 + difficulty)]}


def prompt(instance):
    return "Add up the squares of: " + ", ".join(map(str, instance["numbers"])) + ". Give the sum."


def solve(instance):
    return str(sum(n * n for n in instance["numbers"]))


def score(instance, answer):
    ok = isinstance(answer, str) and re.fullmatch(r"\\s*[0-9]{1,9}\\s*", answer) is not None
    return 1.0 if ok and int(answer) == sum(n * n for n in instance["numbers"]) else 0.0
'''

PART_TWO = '''"""A number modulo another."""
import random
import re

NAME = "NAME_HERE"
ANSWER_TYPE = "int"
INPUT_TYPE = "int"


def generate_from(value, seed, difficulty):
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    return {"x": int(value), "k": rng.randint(3, 50)}


def generate(seed, difficulty):
    return generate_from(random.Random(f"{NAME}:x:{seed}").randint(1000, 9000), seed, difficulty)


def prompt(instance):
    return f"Let n = {instance['x']}.EXTRA_HERE Give the remainder of n divided by {instance['k']}."


def solve(instance):
    return str(instance["x"] % instance["k"])


def score(instance, answer):
    ok = isinstance(answer, str) and re.fullmatch(r"\\s*[0-9]{1,9}\\s*", answer) is not None
    return 1.0 if ok and int(answer) == instance["x"] % instance["k"] else 0.0
'''


def _compose_pair(tmp_path, extra: str) -> dict:
    lib = tmp_path / "lib"
    lib.mkdir(parents=True)
    (lib / "adder.py").write_text(PART_ONE.replace("NAME_HERE", "adder"))
    (lib / "modulo.py").write_text(PART_TWO.replace("NAME_HERE", "modulo").replace("EXTRA_HERE", extra))
    exe = Path(sys.executable).with_name("evoenv")
    out = tmp_path / "out"
    args = [str(exe), "compose", str(lib), "--out", str(out), "--n", "1", "--ops", "sequential", "--json"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    (verdict,) = [json.loads(x) for x in (out / "verdicts.jsonl").read_text().splitlines() if x.strip()]
    return verdict


def test_a_sequential_composite_whose_part_two_shows_x_in_another_form_is_a_leak(tmp_path):
    """Part 2 writes n plainly (masked as X by compose) and again with thousands separators:
    the composite gives part 1's answer away, so it is part 2 alone."""
    verdict = _compose_pair(tmp_path, " (In words of digits: {instance['x']:,}.)")
    assert verdict["stage"] == "leak" and verdict["probe"] == "leak_part_one_thousands", verdict["reason"]
    clean = _compose_pair(tmp_path / "clean", "")
    assert clean["admitted"], clean["reason"]


def test_a_list_item_is_swapped_for_its_nearest_neighbour_in_the_instance():
    """Indices into the instance's numbers: the unused index whose number is nearest; values of
    them: the nearest unused value. A planted sum a little off, whatever the sum's size."""
    instance = {"numbers": [50, 7, 31, 49, 12, 30], "target": 88}
    found = {m.answer for m in _plan_with(instance, "0 2 4") if m.kind == "nearest"}
    assert found == {"2 3 4", "0 4 5"}  # 50 -> 49 (index 3), 31 -> 30 (index 5), kept increasing
    values = {m.answer for m in _plan_with({"xs": [105, 230, 410, 229]}, "105 410") if m.kind == "nearest"}
    assert values == {"229 410", "105 230"}


def _plan_with(instance: dict, reference: str) -> list[fuzz.Mutant]:
    return fuzz.plan([(instance, "Pick some.", reference)], "NAME = 'x'\n", True, random.Random(0), 10_000)
