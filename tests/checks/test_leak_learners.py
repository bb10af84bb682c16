"""A leak is any prompt-only predictor that beats chance (issue 42, rule 2): the leak check's
prompt-only learners (evoenv_cli/checks/leak_learners.py), fitted on some instances and tested
on held-out ones against their chance rate. The hostile environments come from a generator:
one honest task whose prompt hides the reference by an encoding chosen by parameter (other
bases, Roman numerals, an alphabet code, the last digits of a number printed elsewhere, a
count of the prompt's own lines, items or words, an option chosen by a rule, a positional
prior). Each member is admitted by the old leak check (the learners switched off) and rejected
by the new one, naming a feature of the expected kind."""

import random
import re

import pytest

from evoenv_cli.checks import context, leak_learners
from evoenv_cli.checks.registry import CHECKS
from evoenv_cli.config import ValidateConfig
from evoenv_cli.envfile import EnvFile
from evoenv_cli.runtime.workers import SandboxWorkers

TEMPLATE = '''"""A weighted sum of squares, asked with its reference hidden ({encoding})."""

import random

NAME = "{name}"
ENCODING = "{encoding}"
PARAM = {param}
LABELS = {labels!r}
DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def generate(seed, difficulty):
    r = random.Random(seed)
    d = max(1, min(10, int(difficulty)))
    inst = {{"xs": [r.randint(10, 99) for _ in range(3 + d)], "word": "".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(9))}}
    inst["idx"] = r.sample(range(9), 3 + d % 3)
    inst["order"] = r.random()
    inst["ticket"] = r.randint(10, 99)
    inst["fill"] = [r.randint(100, 999) for _ in range(6)]
    return inst


def _weighted(instance):
    return sum((i + 1) * x * x for i, x in enumerate(instance["xs"]))


def _base_text(instance):
    return (
        "Multiply each number of the list by its position (from 1) and by itself, add the products up, "
        "and give the total modulo " + str(_modulus()) + " plus " + str(_offset()) + ". List: "
        + ", ".join(map(str, instance["xs"]))
    )


def _modulus():
    return {{"roman": 2999, "count_lines": 23, "count_items": 23, "count_words": 23}}.get(ENCODING, 8999)


def _offset():
    return {{"roman": 1000, "count_lines": 6, "count_items": 4, "count_words": 0}}.get(ENCODING, 1000)


def _value(instance):
    v = _weighted(instance) % _modulus() + _offset()
    if ENCODING == "count_words":
        v += len(_base_text(instance).split()) + 2
    return v


def _to_base(n, b):
    out = ""
    while n:
        n, r = divmod(n, b)
        out = DIGITS[r] + out
    return out or "0"


def _roman(n):
    out = ""
    for value, letters in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
                           (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        while n >= value:
            out += letters
            n -= value
    return out


def _options(instance):
    """(values, index of the right one) for a multiple-choice member."""
    r = random.Random(_weighted(instance))
    right = _value(instance)
    wrong = r.sample([v for v in range(1000, 9999) if v != right], 5)
    values = wrong + [right]
    if PARAM == "largest":
        values = [min(v, right - 1 - k) for k, v in enumerate(wrong)] + [right]
    elif PARAM == "smallest":
        values = [max(v, right + 1 + k) for k, v in enumerate(wrong)] + [right]
    elif PARAM == "longest":
        values = [v % 100 + 10 for v in wrong] + [right]
    r.shuffle(values)
    i = values.index(right)
    if PARAM in ("first", "last") and instance["order"] < 0.35:  # a positional prior: 46% against 1/6
        j = 0 if PARAM == "first" else len(values) - 1
        values[i], values[j] = values[j], values[i]
        i = j
    return values, i


def prompt(instance):
    text = _base_text(instance)
    v = _value(instance)
    if ENCODING == "base":
        return text + ". Batch label " + _to_base(v, PARAM) + "."
    if ENCODING == "roman":
        return text + ". Volume " + _roman(v) + " of the series."
    if ENCODING == "last_digits":
        return "Order " + str(instance["ticket"]) + str(v).zfill(4) + ". " + text + "."
    if ENCODING == "alphabet":
        letters = "".join(instance["word"][i] for i in instance["idx"])
        return ("Write the letters of " + instance["word"] + " at positions (from 0) "
                + ", ".join(map(str, instance["idx"])) + ", in that order. Checksum "
                + "-".join(str(ord(c) - 96) for c in letters) + ".")
    if ENCODING == "count_lines":
        return text + "\\n" * (v - 1)
    if ENCODING == "count_items":
        return text + "\\nNotes:\\n" + "\\n".join("- keep the list order" for _ in range(v))
    if ENCODING == "count_words":
        return text + " " + " ".join("ok" for _ in range(v - len(text.split())))
    if ENCODING == "choice":
        values, _ = _options(instance)
        return text + ". Which option is it?\\n" + "\\n".join(
            LABELS[k] + ") " + str(x) for k, x in enumerate(values)
        )
    raise ValueError(ENCODING)


def solve(instance):
    if ENCODING == "alphabet":
        return "".join(instance["word"][i] for i in instance["idx"])
    if ENCODING == "choice":
        return LABELS[_options(instance)[1]]
    return str(_value(instance))


def score(instance, answer):
    return 1.0 if answer.strip() == solve(instance) else 0.0
'''

# (encoding, parameter, the pattern of the probe that must name the verdict)
FAMILY = [
    *(("base", b, rf"learner_(num_last0|after_label)_from_base{b}") for b in (2, 3, 5, 7, 8, 12)),
    ("roman", 0, r"learner_(num_last0|after_volume)_from_roman"),
    ("last_digits", 0, r"learner_(num0|after_order)_last4"),
    ("alphabet", 0, r"learner_code(_last)?\d+_letters"),
    # a count of the prompt's structure: its lines, items ("-" lines, or their dashes), words
    ("count_lines", 0, r"learner_count_(nonempty_)?lines"),
    ("count_items", 0, r"learner_count_(items|char_2d|word_keep|word_order)"),
    ("count_words", 0, r"learner_count_(words|tokens|word_ok)"),
    ("choice", "'largest'", r"learner_option_largest_label"),
    ("choice", "'smallest'", r"learner_option_smallest_label"),
    ("choice", "'longest'", r"learner_option_(longest|largest)_label"),
    ("choice", "'first'", r"learner_option_first_label"),
    ("choice", "'last'", r"learner_option_last_label"),
]


def hostile(encoding: str, param, labels: str = "letters") -> str:
    """One member of the family: the honest task with its reference hidden by `encoding`, a
    multiple-choice member's options labelled in the style `labels` (leak_learners.LABELS)."""
    name = f"hidden_{encoding}_{str(param).strip(chr(39))}" + ("" if labels == "letters" else f"_{labels}")
    return TEMPLATE.format(name=name, encoding=encoding, param=param, labels=leak_learners.LABELS[labels][:6])


def _verdict(env: EnvFile, cfg: ValidateConfig, pool: SandboxWorkers) -> tuple[str, str | None]:
    checker = context.Checker(env, cfg, pool, pool)
    try:
        for name in ("load", "run", "constant_answer", "leak"):
            CHECKS[name].run(checker)
    except context.Rejected as rej:
        return rej.stage, rej.probe
    return "admitted", None


@pytest.fixture(scope="module")
def pool():
    with SandboxWorkers(workers=2) as p:
        yield p


@pytest.mark.parametrize("encoding,param,feature", FAMILY, ids=[f"{e}-{p}".replace("'", "") for e, p, _ in FAMILY])
def test_the_old_leak_check_admits_the_family_and_the_learners_reject_it(encoding, param, feature, pool, tmp_path):
    path = tmp_path / f"hidden_{encoding}.py"
    path.write_text(hostile(encoding, param))
    env = EnvFile.from_path(path)
    # the constant answer's test against an option's chance rate (test_measured_pay.py) is off
    # on both sides: it rejects the positional priors here before the leak check reads them
    old = _verdict(env, ValidateConfig(min_learner_excess=1.0, min_constant_excess=1.0), pool)  # 1: off
    assert old == ("admitted", None), f"the old check already rejects this member: {old}"
    stage, probe = _verdict(env, ValidateConfig(min_constant_excess=1.0), pool)
    assert stage == "leak" and probe and re.fullmatch(feature, probe), (stage, probe)
    if re.search(r"option_(first|last)_label", feature):  # a positional prior: the constant answer's
        assert _verdict(env, ValidateConfig(), pool) == ("constant_answer", "constant_option_prior")


# the multiple-choice members with their options labelled in the other styles: (labels, rule,
# the probe that must name the verdict); "first" and "last" are positional priors
STYLED = [
    ("lower_letters", "'largest'", r"learner_option_largest_label"),
    ("lower_letters", "'first'", r"learner_option_first_label"),
    ("roman", "'smallest'", r"learner_option_smallest_label"),
    ("roman", "'last'", r"learner_option_last_label"),
    ("upper_roman", "'longest'", r"learner_option_(longest|largest)_label"),
]


@pytest.mark.parametrize("labels,param,feature", STYLED, ids=[f"{s}-{p}".replace("'", "") for s, p, _ in STYLED])
def test_options_labelled_a_b_c_or_i_ii_iii_are_read_as_the_capitals_are(
    labels, param, feature, pool, tmp_path, monkeypatch
):
    """Issue 42: a positional prior or an option chosen by a rule passed when the options were
    labelled a), b)... or i), ii)...: the learners read only A), B)... The old reading is the
    learners with the capitals alone; the new one rejects each member, naming its rule."""
    path = tmp_path / f"hidden_choice_{labels}.py"
    path.write_text(hostile("choice", param, labels))
    env = EnvFile.from_path(path)
    with monkeypatch.context() as m:
        m.setattr(leak_learners, "LABELS", {"letters": leak_learners.LABELS["letters"]})
        assert _verdict(env, ValidateConfig(), pool) == ("admitted", None)
    stage, probe = _verdict(env, ValidateConfig(min_constant_excess=1.0), pool)
    assert stage == "leak" and probe and re.fullmatch(feature, probe), (stage, probe)
    if re.search(r"option_(first|last)_label", feature):
        assert _verdict(env, ValidateConfig(), pool) == ("constant_answer", "constant_option_prior")


@pytest.mark.parametrize("labels", ["lower_letters", "roman"])
def test_options_in_the_new_styles_with_the_right_one_placed_at_random_are_admitted(labels, pool, tmp_path):
    path = tmp_path / f"fair_choice_{labels}.py"
    path.write_text(hostile("choice", "'uniform'", labels))
    assert _verdict(EnvFile.from_path(path), ValidateConfig(), pool) == ("admitted", None)


def test_a_numbered_list_is_not_read_as_options_nor_is_a_run_out_of_order():
    """A numbered list is as often the task's data ("the largest of these") as its options, and
    its labels are a count's answers too, so numbers are no label style; "i.e." is no Roman
    numeral, and labels must run in order from the first."""
    assert leak_learners.options("Which is largest?\n1. 17\n2. 40\n3. 8") == []
    assert leak_learners.options("i.e. the first\nii. the second") == []
    assert leak_learners.options("a) 5\nc) 7\nd) 9") == []
    assert leak_learners.options("(i) 5 (ii) 7 (iii) 8") == [("i", "5"), ("ii", "7"), ("iii", "8")]
    assert leak_learners.options("Steps:\nA. one\nB. two\ni. x\nii. y") == [("A", "one"), ("B", "two")]
    assert leak_learners.option_chance("a) 5\nb) 7\nc) 9", "B", "b") == pytest.approx(1 / 3)


def test_a_learner_that_ignores_the_prompt_has_no_excess_and_an_option_rule_is_judged_against_one_in_k():
    rng = random.Random(7)
    # "always 5" on references that are 5 half the time: its chance rate is its share
    prompts = [f"Lines: {rng.randint(1, 9)}\nsecond\nthird\nfourth\nfifth" for _ in range(200)]
    refs = [rng.choice(["5", "5", "6", "7"]) for _ in prompts]
    lines = {r.name: r for r in leak_learners.rates(prompts, refs, ["count_lines"])}["count_lines"]
    assert lines.share > 0.4 and abs(lines.share - lines.baseline) < 0.1
    # the right option is A 45% of the time among 6: chance is 1/6, not 50%
    prompts, refs = [], []
    for _ in range(300):
        right = "A" if rng.random() < 0.45 else rng.choice("BCDEF")
        prompts.append("Pick one.\n" + "\n".join(f"{c}) {rng.randint(1, 99)}" for c in "ABCDEF"))
        refs.append(right)
    first = {r.name: r for r in leak_learners.rates(prompts, refs, ["option_first_label"])}["option_first_label"]
    assert abs(first.baseline - 1 / 6) < 1e-9 and first.share - first.baseline > 0.2


def test_the_learners_read_a_prompt_in_time_linear_in_its_size():
    """Features per prompt are bounded (slots x transformations), so reading a prompt 16 times
    longer costs about 16 times as much, not 256. CPU time, the best of 5 runs, so a loaded
    machine does not make it fail (wall time over 3 ms did, at a load of 4 on 2 cores)."""
    import time

    rng = random.Random(3)
    base = " ".join(f"item{k} {rng.randint(1, 10**6)} word{rng.randint(1, 50)}" for k in range(200))

    def timed(text):
        best = float("inf")
        for _ in range(5):
            t = time.process_time()
            for _ in range(3):
                leak_learners.features(text)
            best = min(best, time.process_time() - t)
        return best

    timed(base)
    small, large = timed(base), timed(base * 16)
    assert large < 40 * small, (small, large)
