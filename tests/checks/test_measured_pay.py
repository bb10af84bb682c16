"""Leniency is pay for a wrong answer, measured against chance (issue 42, rule 1, and rule 2's
constant answer): checks/pay.py, the fuzzer's `case` kind and its order-free and planted rules
(checks/fuzz.py), and the constant-answer check against an option's chance rate.

Every hostile environment here comes from a generator, not a list of cases:

- lenient pay: each seed with an integer answer, its `score` kept and one lenient rule
  composed over it (a reading of the answer: markup stripped, exponent notation, a digit
  anagram, a formula evaluated, a non-finite number compared with a tolerance written
  `not (abs(x - ref) > tol)`, a tenfold slip) that pays a wrong answer 0.6 to 0.95; the list
  seed paying a reordering or a missing item; the planted subset sum paying 0.9 for a sum 5%
  off;
  the order-free set paying an extra item in full;
- shape pay: a seed paying any answer of the reference's shape 0.2 to 0.29, under the old mean
  limit of 0.3;
- case: a word task, a letter transformation (reversal, rotation, sorting) composed with a case
  transformation (swapping, upper or lower case, case by position), whose score ignores case;
- a positional prior: a multiple-choice task with k options (3 to 8) whose right option is the
  first one 16 points more often than 1/k, under the old limit of 50%.

Each member is admitted by the old criterion (the settings that switch the measured rule off:
`min_paid_excess`, `max_mean_excess` and `min_constant_excess` at 1, and the fuzzer's kinds
and rules as they were) and rejected by the new one. The honest members of the families (the
strict case task, the unbiased choice) are admitted by both."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import INT_SEEDS, SEEDS
from support.seed_variants import env_at, variant, verdict

from evoenv_cli.checks import fuzz
from evoenv_cli.config import ValidateConfig
from evoenv_cli.envfile import EnvFile
from evoenv_cli.runtime.workers import SandboxWorkers

CORPUS_GOOD = Path(__file__).resolve().parents[1] / "validate_corpus" / "good"
OLD = ValidateConfig(min_paid_excess=1.0, max_mean_excess=1.0, min_constant_excess=1.0)
NEW = ValidateConfig()
PAY_CHECKS = ("load", "run", "reference", "discrimination", "constant_answer")
NEW_KINDS = ("case", "nearest")  # the fuzzer's kinds this work added

# -- lenient pay over a seed's own score ----------------------------------------------------------------
# A reading of the answer that makes a wrong value look right, composed over the seed's score.
LENIENT = '''

import math as _math
import re as _re

PAY = {pay}
RULE = {rule!r}
_DRESS = _re.compile(r"\\\\boxed\\{{(.*)\\}}|approximately\\s+(.*)|\\u2248\\s*(.*)|\\*\\*(.*)\\*\\*|the answer is\\s+(.*?)\\.?", _re.I)


def _reading(instance, text):
    """True when the lenient rule takes `text` for the answer."""
    ref = solve(instance)
    if RULE == "markup":  # an answer dressed as models write it, compared within 2
        m = _DRESS.fullmatch(text)
        inner = m and next(g for g in m.groups() if g is not None)
        return bool(inner) and _re.fullmatch(r"-?[0-9]+", inner) is not None and abs(int(inner) - int(ref)) <= 2
    if RULE == "exponent":  # exponent notation read as a float, within 1%
        return "e" in text.lower() and abs(float(text) - int(ref)) <= 2 + abs(int(ref)) / 100
    if RULE == "nonfinite":  # a tolerance test that NaN passes
        return not text.lstrip("+-").isdigit() and not (abs(float(text) - int(ref)) > 2)
    if RULE == "digits":  # the right digits in any order
        return text.isdigit() and sorted(text) == sorted(ref)
    if RULE == "formula":  # a sum, difference or product evaluated
        m = _re.fullmatch(r"\\(?(-?[0-9]+)\\)?([-+*])([0-9]+)", text)
        a, op, b = (int(m.group(1)), m.group(2), int(m.group(3))) if m else (0, "", 0)
        return bool(m) and {{"+": a + b, "-": a - b, "*": a * b}}[op] == int(ref)
    if RULE == "tenfold":  # a slip of one decimal place down
        return text.isdigit() and int(ref) >= 10 and int(text) == int(ref) // 10
    if RULE == "any_order":  # the right items in any order
        return sorted(text.split()) == sorted(ref.split())
    if RULE == "one_missing":  # all but one of the items, in order
        want = ref.split()
        return len(want) > 2 and text.split() in [want[:i] + want[i + 1 :] for i in range(len(want))]
    if RULE == "sum_near":  # a planted subset whose sum is within 5% of the target
        idx = [int(t) for t in text.split()] if _re.fullmatch(r"[0-9]+( [0-9]+)*", text) else []
        if not idx or idx != sorted(set(idx)) or idx[-1] >= len(instance["numbers"]):
            return False
        total = sum(instance["numbers"][i] for i in idx)
        return abs(total - instance["target"]) <= 0.05 * instance["target"]
    raise ValueError(RULE)


def score(instance, answer):
    strict = _strict_score(instance, answer)
    if strict >= 1.0 or not isinstance(answer, str) or len(answer) > 200:
        return strict
    try:
        return PAY if _reading(instance, answer.strip()) else strict
    except (ValueError, OverflowError, KeyError, IndexError):
        return strict
'''

# Shape pay: any answer of the reference's shape earns a little, whatever its content.
SHAPE_PAY = """

import re as _re

SHAPE_PAY = {pay}


def score(instance, answer):
    strict = _strict_score(instance, answer)
    if strict >= 1.0 or not isinstance(answer, str) or len(answer) > 200:
        return strict
    ref, text = solve(instance).split(), answer.split()
    same = len(text) == len(ref) and all(_re.fullmatch(r"[0-9]+", t) for t in text)
    return SHAPE_PAY if same and (len(ref) > 1 or len(text[0]) == len(ref[0])) else strict
"""

INT_RULES = ("markup", "exponent", "nonfinite", "digits", "formula", "tenfold")
PAYS = (0.6, 0.75, 0.9, 0.95)
# (file it varies, rule, pay): every integer rule on its own seed, the list and planted ones
PAY_FAMILY = [
    *((SEEDS / f"{seed}.py", rule, PAYS[k % len(PAYS)]) for k, (seed, rule) in enumerate(zip(INT_SEEDS, INT_RULES))),
    (SEEDS / "topological_order.py", "any_order", 0.9),
    (SEEDS / "topological_order.py", "one_missing", 0.75),
    (SEEDS / "subset_sum_planted.py", "sum_near", 0.9),
]
SHAPE_FAMILY = [
    (SEEDS / "edit_distance.py", 0.2),
    (SEEDS / "knapsack_max_value.py", 0.25),
    (SEEDS / "topological_order.py", 0.29),
]


# -- an order-free set that takes one extra item ------------------------------------------------------
EXTRA_ITEM = '''

def score(instance, answer):
    """Every value seen once, in any order, and at most one more value of the list."""
    if not isinstance(answer, str) or len(answer) > 1000:
        return 0.0
    tokens = [t for t in re.split(r"[,\\s]+", answer.strip()) if t]
    if not tokens or not all(re.fullmatch(r"[0-9]{1,6}", t) for t in tokens):
        return 0.0
    got = [int(t) for t in tokens]
    want = set(_once(instance["values"]))
    extra = set(got) - want
    ok = len(set(got)) == len(got) and want <= set(got) and len(extra) <= 1 and extra <= set(instance["values"])
    return 1.0 if ok else 0.0
'''

# -- case: a word task whose case is the task --------------------------------------------------------
CASE_TEMPLATE = '''"""Transform a word: {letters} its letters, then {case} (a case-is-the-task family member)."""

import random

NAME = "{name}"
ANSWER_TYPE = "str"
LETTERS = {letters!r}
CASE = {case!r}
LENIENT = {lenient!r}


def generate(seed, difficulty):
    r = random.Random(f"{{NAME}}:{{seed}}:{{difficulty}}")
    d = max(1, min(10, int(difficulty)))
    word = "".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5 + d))
    return {{"word": "".join(c.upper() if r.random() < 0.5 else c for c in word)}}


def _letters(word):
    if LETTERS == "reverse":
        return word[::-1]
    if LETTERS == "rotate":
        return word[2:] + word[:2]
    return "".join(sorted(word, key=str.lower))


def _case(word):
    if CASE == "swap":
        return word.swapcase()
    if CASE == "upper":
        return word.upper()
    if CASE == "lower":
        return word.lower()
    return "".join(c.upper() if i % 2 == 0 else c.lower() for i, c in enumerate(word))


def prompt(instance):
    how = {{"reverse": "Reverse the letters of", "rotate": "Move the first two letters to the end of",
           "sort": "Sort alphabetically (ignoring case) the letters of"}}[LETTERS]
    case = {{"swap": "then swap the case of every letter", "upper": "then write it in upper case",
            "lower": "then write it in lower case",
            "alternate": "then write letters at even positions (from 0) in upper case and the rest in lower case"}}[CASE]
    return f"{{how}} the word {{instance['word']}}, {{case}}. Give the resulting word, letter case exactly as asked."


def solve(instance):
    return _case(_letters(instance["word"]))


def score(instance, answer):
    if not isinstance(answer, str) or len(answer) > 100:
        return 0.0
    if LENIENT:
        return 1.0 if answer.strip().lower() == solve(instance).lower() else 0.0
    return 1.0 if answer.strip() == solve(instance) else 0.0
'''
CASE_FAMILY = [("reverse", "swap"), ("rotate", "upper"), ("sort", "lower"), ("reverse", "alternate")]

# -- a positional prior among k options ----------------------------------------------------------------
CHOICE_TEMPLATE = '''"""Pick the option that is the sum of a list, among {k} options (a positional prior: {excess})."""

import random

NAME = "{name}"
ANSWER_TYPE = "str"
K = {k}
EXCESS = {excess}  # how much more often than 1/K the right option is the first
LABELS = "ABCDEFGH"[:K]


def generate(seed, difficulty):
    r = random.Random(f"{{NAME}}:{{seed}}:{{difficulty}}")
    d = max(1, min(10, int(difficulty)))
    xs = [r.randint(10, 99) for _ in range(3 + d)]
    right = sum(xs)
    below = r.randrange(K)  # the right value's rank among the options is uniform: no rule by size
    values = r.sample(range(right - 50, right), below) + r.sample(range(right + 1, right + 51), K - 1 - below) + [right]
    r.shuffle(values)
    if r.random() < EXCESS / (1 - 1 / K):  # moved to the first place: P(first) = 1/K + EXCESS
        i = values.index(right)
        values[0], values[i] = values[i], values[0]
    return {{"xs": xs, "options": values}}


def prompt(instance):
    options = "\\n".join(f"{{label}}) {{v}}" for label, v in zip(LABELS, instance["options"]))
    return "Which option is the sum of " + ", ".join(map(str, instance["xs"])) + "?\\n" + options + "\\nGive its letter."


def solve(instance):
    return LABELS[instance["options"].index(sum(instance["xs"]))]


def score(instance, answer):
    if not isinstance(answer, str) or len(answer) > 20:
        return 0.0
    return 1.0 if answer.strip().upper() == solve(instance) else 0.0
'''
CHOICE_FAMILY = [3, 4, 5, 6, 8]
PRIOR_EXCESS = 0.16


# -- judging ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pool():
    with SandboxWorkers(workers=2) as p:
        yield p


def _old_plan(plan):
    """The fuzzer as it was: no `case` and `nearest` kinds, and an answer that is not unique
    judged by SHAPE_FREE alone, in full (no order-free rule, no partial pay for planted kinds)."""

    def planned(cases, source, unique, rng, max_calls, order_free=False):
        return [m for m in plan(cases, source, unique, rng, max_calls) if m.kind not in NEW_KINDS and m.full]

    return planned


def _old_admits_and_new_rejects(env: EnvFile, pool, monkeypatch, stage: str, probe: str, checks=PAY_CHECKS):
    with monkeypatch.context() as m:
        m.setattr(fuzz, "plan", _old_plan(fuzz.plan))
        old = verdict(env, OLD, pool, checks)
    assert old[0] == "admitted", f"the old criterion already rejects this member: {old}"
    new = verdict(env, NEW, pool, checks)
    assert new[0] == stage and new[1] and re.fullmatch(probe, new[1]), new


@pytest.mark.parametrize("path,rule,pay", PAY_FAMILY, ids=[f"{p.stem}-{r}-{v}" for p, r, v in PAY_FAMILY])
def test_a_wrong_answer_paid_under_full_pay_is_paid(path, rule, pay, pool, tmp_path, monkeypatch):
    env = env_at(tmp_path, f"lenient_{rule}", variant(path, f"lenient_{rule}", LENIENT.format(pay=pay, rule=rule)))
    _old_admits_and_new_rejects(env, pool, monkeypatch, "discrimination", r"\w+")


@pytest.mark.parametrize("path,pay", SHAPE_FAMILY, ids=[f"{p.stem}-{v}" for p, v in SHAPE_FAMILY])
def test_partial_credit_for_the_shape_alone_is_compared_with_chance(path, pay, pool, tmp_path, monkeypatch):
    env = env_at(tmp_path, "shape_pay", variant(path, "shape_pay", SHAPE_PAY.format(pay=pay)))
    _old_admits_and_new_rejects(env, pool, monkeypatch, "discrimination", r"random_shape|zero|one|flood")


def test_an_order_free_answer_may_not_take_an_extra_item(pool, tmp_path, monkeypatch):
    source = (CORPUS_GOOD / "values_seen_once_any_order.py").read_text()
    source = source.replace('NAME = "values_seen_once_any_order"', 'NAME = "seen_once_takes_one_more"')
    env = env_at(tmp_path, "seen_once_takes_one_more", source.replace("def score(", "def _strict_score(") + EXTRA_ITEM)
    _old_admits_and_new_rejects(env, pool, monkeypatch, "discrimination", "fuzz_superset")


@pytest.mark.parametrize("letters,case", CASE_FAMILY, ids=[f"{a}-{b}" for a, b in CASE_FAMILY])
def test_a_case_only_change_is_wrong_where_the_case_is_the_task(letters, case, pool, tmp_path, monkeypatch):
    name = f"case_{letters}_{case}"
    lenient = env_at(tmp_path, name, CASE_TEMPLATE.format(name=name, letters=letters, case=case, lenient=True))
    _old_admits_and_new_rejects(lenient, pool, monkeypatch, "discrimination", "fuzz_case")
    strict = env_at(
        tmp_path, name + "_strict", CASE_TEMPLATE.format(name=name, letters=letters, case=case, lenient=False)
    )
    assert verdict(strict, NEW, pool, PAY_CHECKS)[0] == "admitted"


@pytest.mark.parametrize("k", CHOICE_FAMILY)
def test_a_positional_prior_is_judged_against_one_in_k(k, pool, tmp_path, monkeypatch):
    """1/k + 0.16 is under the old 50% and under the leak learners' excess (0.2): main let it
    through both; the constant-answer check against the option's chance rate does not."""
    name = f"prior_{k}"
    checks = ("load", "run", "constant_answer", "leak")
    env = env_at(tmp_path, name, CHOICE_TEMPLATE.format(name=name, k=k, excess=PRIOR_EXCESS))
    _old_admits_and_new_rejects(env, pool, monkeypatch, "constant_answer", "constant_option_prior", checks)
    fair = env_at(tmp_path, name + "_fair", CHOICE_TEMPLATE.format(name=name + "_fair", k=k, excess=0.0))
    assert verdict(fair, NEW, pool, checks)[0] == "admitted"
