"""Prompt-only learners for `evoenv validate`'s leak check: rather than one decoder per encoding
(checks/leak_solvers.py), a family of cheap predictors read off the prompt text alone, each
mapping a prompt to one candidate answer, fitted on some instances and tested on others.

A learner is a *feature*: a slot of the prompt under a transformation.

- slots: the prompt's numerals by position (the first and last 12) and by the word before
  them (`after_id`: the token after the first "id"), the prompt's words the same way, its runs
  of numbers 1..26 (an alphabet code), its counts (lines, list items, words, characters,
  numbers, each symbol and each word), and, for a multiple-choice prompt, its options (labelled
  A, B...; a, b...; i, ii... or I, II...: LABELS);
- transformations of a numeral: as is, digits reversed, last or first k digits, digit sum,
  residues mod 2..9, written in bases 2..16, read in bases 2..16 (hex, binary, any digits)
  and in Roman numerals; of a word: letters A=1..Z=26 (summed or written one by one); of a
  code run: the letters it spells; of the options: the first, last, largest, smallest,
  longest, shortest, median, as label or as text.

Fitting picks the (at most TESTED) features whose share on the first instances beats their
chance rate by half `validate.min_learner_excess`; the test measures those few again on instances drawn afresh
(held out: the fit never saw them). The chance rate of a learner is how often its answer is
right for an answer of its shape that knows nothing: another instance's reference (a learner
that ignores the prompt, "always 5", has no excess over the references' own spread), and for
an option rule a uniformly drawn option of the same prompt (1/k for k options), so a
positional prior ("the answer is option A") is judged against 1/k, not 50%.

Pure string work, linear in the prompt's length: a bounded number of slots, each under a
bounded number of transformations of a token of at most MAX_TOKEN characters.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from itertools import repeat

from evoenv_cli.checks.leak_solvers import SolverRate, normalize

POSITIONS = 12  # numerals and words by position: the first and the last this many
MAX_ANCHORS = 48  # slots after a word, per prompt (the first distinct words)
MAX_WORD_COUNTS = 96  # word counts per prompt (the most common words)
MAX_TOKEN = 40  # longer tokens are not read as numerals (int() of a huge token is not linear)
WINDOW = 5  # chance: each instance's learner answer against the next WINDOW instances' references
TESTED = 3  # features the fit passes on to the test (the test's confidence is split among them)
SCREEN_SHARE = 0.5  # the fit passes on features over this share of the limit
LEARNER_Z = 2.128  # one-sided 95% split over TESTED features (Bonferroni: 1 - 0.05 / 3)
BASES = tuple(b for b in range(2, 17) if b != 10)
MC_RULES = ("first", "last", "largest", "smallest", "longest", "shortest", "median")
_ROMAN_LABELS = ("i", "ii", "iii", "iv", "v", "vi", "vii", "viii")
# the label styles read as options, each in order from its first: a run of two or more labels of
# one style, each the next of the one before, is a multiple-choice prompt's options. Not numbers:
# a numbered list is as often the task's data as its options ("the largest of these" is a task,
# "the largest option is right" a leak, and the two read alike), and "1"..."k" are also the
# answers of a count, so a positional prior and a count's own spread could not be told apart.
LABELS = {
    "letters": tuple("ABCDEFGH"),
    "lower_letters": tuple("abcdefgh"),
    "roman": _ROMAN_LABELS,
    "upper_roman": tuple(r.upper() for r in _ROMAN_LABELS),
}

_TOKEN = re.compile(r"[^\W_]+")
_ROMAN = re.compile(r"M{0,3}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})")
_ROMAN_VALUES = (
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
    (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
)  # fmt: skip
_CODE_RUN = re.compile(r"(?<![0-9])[0-9]{1,2}(?:[ ,.\-]{1,2}[0-9]{1,2}(?![0-9])){1,}")
_ITEM_LINE = re.compile(r"^\s*(?:[-*\u2022+]|\(?[0-9]{1,3}[.)]|\(?[A-Za-z][.)])\s", re.MULTILINE)
# an option's label, in one of LABELS' styles (Roman numerals before letters: "i" is no letter
# of A-H, and "iv" must not read as its first character)
_LABEL = r"[ivxIVX]{1,4}|[A-Ha-h]"
_OPTION_LINE = re.compile(rf"^\s*[(\[]?({_LABEL})[)\].:]\s+(\S[^\n]*?)\s*$", re.MULTILINE)
_OPTION_INLINE = re.compile(rf"\(({_LABEL})\)\s*([^()\n]*?)\s*(?=\((?:{_LABEL})\)|\n|$)")
_BRACKETED = re.compile(r"\[([^\[\]\n]*)\]")
_FIRST_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_DIGITS36 = string.digits + string.ascii_lowercase
# the positional slots' names: the first POSITIONS and the last POSITIONS of each kind
_POSITION_SLOTS = {
    name: (tuple(f"{name}{i}" for i in range(POSITIONS)), tuple(f"{name}_last{i}" for i in range(POSITIONS)))
    for name in ("num", "word", "code")
}
_DECIMAL = re.compile(r"\d")  # a decimal digit in any script: str.isdecimal's characters (Nd)


def key(answer: str) -> str:
    """One spelling per answer, as the solvers normalize it, and case folded: a learner writes
    base 16 and letters in lower case."""
    return normalize(answer).lower()


def _to_base(n: int, b: int) -> str:
    if n == 0:
        return "0"
    out = []
    while n:
        n, r = divmod(n, b)
        out.append(_DIGITS36[r])
    return "".join(reversed(out))


def _to_roman(n: int) -> str:
    out = []
    for value, letters in _ROMAN_VALUES:
        while n >= value:
            out.append(letters)
            n -= value
    return "".join(out)


def _from_roman(t: str) -> int | None:
    if len(t) < 2 or not _ROMAN.fullmatch(t):
        return None
    total = 0
    i = 0
    while i < len(t):
        for value, letters in _ROMAN_VALUES:
            if t.startswith(letters, i):
                total += value
                i += len(letters)
                break
    return total


def _numeral(t: str) -> Iterable[tuple[str, str]]:
    """(transformation, answer) for one numeral token (digits in any script, or letters and
    digits read in a base)."""
    low = t.lower()
    for prefix, b in (("0x", 16), ("0b", 2), ("0o", 8)):
        if low.startswith(prefix) and len(low) > 2:
            try:
                yield f"prefixed_{prefix[1]}", str(int(low[2:], b))
            except ValueError:
                pass
            return
    if t.isdecimal():
        n = int(t)
        s = str(n)
        yield "as_is", s
        yield "reversed", normalize(s[::-1])
        for k in (1, 2, 3, 4):
            if len(s) > k:
                yield f"last{k}", normalize(s[-k:])
                yield f"first{k}", s[:k]
        yield "digit_sum", str(sum(map(int, s)))
        for m in range(2, 10):
            yield f"mod{m}", str(n % m)
        for b in BASES:
            yield f"to_base{b}", _to_base(n, b)
        if 0 < n < 4000:
            yield "to_roman", _to_roman(n).lower()
    for b in BASES:
        if all(c in _DIGITS36[:b] for c in low) and not (b > 10 and low.isdecimal()):
            yield f"from_base{b}", str(int(low, b))
    if (value := _from_roman(t)) is not None:
        yield "from_roman", str(value)


def _word(t: str) -> Iterable[tuple[str, str]]:
    low = t.lower()
    if low.isascii() and low.isalpha():
        values = [ord(c) - 96 for c in low]
        yield "letters_sum", str(sum(values))
        yield "letters_joined", "".join(map(str, values))
        yield "as_is", low


def _slots(prompt: str, tokens: list[str]) -> Iterable[tuple[str, str, str]]:
    """(slot, kind, token) for the prompt's numerals and words by position and by the word
    before them, and its alphabet-code runs (`tokens`: the prompt's, _TOKEN's matches)."""
    # a token is a numeral when it holds a decimal digit or reads as a Roman numeral, a word when
    # it is letters and no Roman numeral: judged once per distinct token
    kind_of: dict[str, str] = {}
    for t in set(tokens):
        if len(t) <= MAX_TOKEN:
            if _DECIMAL.search(t) or _from_roman(t) is not None:
                kind_of[t] = "numeral"
            elif t.isalpha():
                kind_of[t] = "word"
    numerals = [t for t in tokens if kind_of.get(t) == "numeral"]
    words = [t for t in tokens if kind_of.get(t) == "word"]
    for name, kind, seq in (("num", "numeral", numerals), ("word", "word", words)):
        first, last = _POSITION_SLOTS[name]
        yield from zip(first, repeat(kind), seq[:POSITIONS])
        yield from zip(last, repeat(kind), reversed(seq[-POSITIONS:]))
    anchors: set[str] = set()
    for before, t in zip(tokens, tokens[1:]):
        if len(anchors) >= MAX_ANCHORS:
            break
        anchor = before.lower()
        if (
            anchor.isascii()
            and anchor.isalpha()
            and len(anchor) <= 20
            and anchor not in anchors
            and len(t) <= MAX_TOKEN
        ):
            anchors.add(anchor)
            yield f"after_{anchor}", "numeral" if kind_of.get(t) == "numeral" else "word", t
    runs = [m.group() for m in _CODE_RUN.finditer(prompt)]
    first, last = _POSITION_SLOTS["code"]
    yield from zip(first, repeat("code"), runs[:POSITIONS])
    yield from zip(last, repeat("code"), reversed(runs[-POSITIONS:]))


def _code(run: str) -> Iterable[tuple[str, str]]:
    values = [int(v) for v in re.findall(r"[0-9]+", run)]
    if all(1 <= v <= 26 for v in values):
        yield "letters", "".join(chr(96 + v) for v in values)


def options(prompt: str) -> list[tuple[str, str]]:
    """A multiple-choice prompt's (label, text) options, one per line or inline as
    "(A) ... (B) ...", labelled in one of LABELS' styles (A, B, C...; a, b, c...; i, ii, iii...;
    I, II, III...) in order from the first: the first such run of two or more."""
    for pattern in (_OPTION_LINE, _OPTION_INLINE):
        run: list[tuple[str, str]] = []
        style: tuple[str, ...] = ()
        for m in pattern.finditer(prompt):
            label, text = m.group(1), m.group(2).strip()
            if run and len(run) < len(style) and label == style[len(run)]:
                run.append((label, text))
                continue
            if len(run) >= 2:
                return run
            style = next((labels for labels in LABELS.values() if labels[0] == label), ())
            run = [(label, text)] if style else []
        if len(run) >= 2:
            return run
    return []


def option_chance(prompt: str, answer: str, reference: str) -> float | None:
    """The chance rate of `answer` when it is one of the prompt's options (its label or its
    text): the share of the options, read the same way, that the reference is (what a
    uniformly drawn option earns: 1/k for k options). None when the prompt lists no options or
    `answer` is not one of them."""
    opts = options(prompt)
    a, ref = key(answer), key(reference)
    for read in ([key(label) for label, _ in opts], [key(text) for _, text in opts]):
        if a in read:
            return sum(1 for x in read if x == ref) / len(read)
    return None


def _value(text: str) -> float | None:
    m = _FIRST_NUMBER.search(text)
    return float(m.group()) if m else None


def _choices(opts: list[tuple[str, str]]) -> Iterable[tuple[str, int]]:
    """(rule, index of the option it picks)."""
    n = len(opts)
    yield "first", 0
    yield "last", n - 1
    lengths = [len(t) for _, t in opts]
    yield "longest", max(range(n), key=lambda i: (lengths[i], -i))
    yield "shortest", min(range(n), key=lambda i: (lengths[i], i))
    values = [_value(t) for _, t in opts]
    if all(v is not None for v in values):
        yield "largest", max(range(n), key=lambda i: (values[i], -i))
        yield "smallest", min(range(n), key=lambda i: (values[i], i))
        yield "median", sorted(range(n), key=lambda i: (values[i], i))[(n - 1) // 2]


def _counts(prompt: str, tokens: list[str]) -> Iterable[tuple[str, int]]:
    lines = prompt.split("\n")
    chars = Counter(prompt)  # each character once: the per-character tests run on distinct ones
    structural = {
        "lines": len(lines),
        "nonempty_lines": sum(map(bool, map(str.strip, lines))),
        "items": len(_ITEM_LINE.findall(prompt)),
        "words": len(prompt.split()),
        "tokens": len(tokens),
        "numbers": sum(1 for t in tokens if t.isdecimal()),
        "sentences": chars["."] + chars["!"] + chars["?"],
    }
    lists = [len([x for x in m.group(1).split(",") if x.strip()]) for m in _BRACKETED.finditer(prompt)]
    if lists:
        structural["first_list_items"] = lists[0]
        structural["longest_list_items"] = max(lists)
    for name, n in structural.items():
        yield name, n
        yield f"{name}_minus1", n - 1
        yield f"{name}_plus1", n + 1
    yield "chars", len(prompt)
    yield "chars_stripped", len(prompt.strip())
    yield "letters", sum(n for c, n in chars.items() if c.isalpha())
    yield "digits", sum(n for c, n in chars.items() if c.isdecimal())
    for c, n in chars.items():  # in order of first appearance, as the prompt has them
        if not c.isalnum() and not c.isspace():
            yield f"char_{ord(c):x}", n
    words = Counter(t.lower() for t in tokens if t.isascii() and t.isalpha() and len(t) <= 20)
    for w, n in words.most_common(MAX_WORD_COUNTS):
        yield f"word_{w}", n


@lru_cache(maxsize=4096)
def _reads(kind: str, token: str) -> tuple[tuple[str, str], ...]:
    """One token's (transformation, keyed answer) pairs: the same numbers and words recur across
    a batch's prompts (and across the fit and the test), so each is read and keyed once. Bounded:
    a token is at most MAX_TOKEN characters and the cache holds at most 4,096 of them."""
    reads = _numeral(token) if kind == "numeral" else _word(token) if kind == "word" else _code(token)
    return tuple((how, key(answer)) for how, answer in reads)


@lru_cache(maxsize=16384)
def _named_reads(slot: str, kind: str, token: str) -> dict[str, str]:
    """One slot's answers by feature name (the first of a name kept): a prompt template puts the
    same token in the same slot across a batch, so each name is written once. Bounded like
    `_reads`. Read-only: callers copy from it."""
    out: dict[str, str] = {}
    for how, keyed in _reads(kind, token):
        out.setdefault(f"{slot}_{how}", keyed)
    return out


def features(prompt: str) -> tuple[dict[str, str], dict[str, float]]:
    """Every learner's answer for one prompt, by feature name (keyed by `key`), and the chance
    rate of the option rules' answers on this prompt (the share of its options, as labels or as
    texts, that the reference is), by feature name: absent for a learner judged against other
    instances' references."""
    out: dict[str, str] = {}
    tokens = _TOKEN.findall(prompt)
    # the first slot to name a feature gives its answer: merged last to first, each update
    # overwriting what a later slot gave
    for slot, kind, token in reversed(list(_slots(prompt, tokens))):
        out.update(_named_reads(slot, kind, token))
    for name, n in _counts(prompt, tokens):
        out[f"count_{name}"] = str(n)
    mc: dict[str, float] = {}
    opts = options(prompt)
    if opts:
        for rule, i in _choices(opts):
            label, text = opts[i]
            out[f"option_{rule}_label"] = key(label)
            out[f"option_{rule}_text"] = key(text)
            mc[f"option_{rule}_label"] = 1.0  # the share, once the reference is known (`rates`)
            mc[f"option_{rule}_text"] = 1.0
    return out, mc


def rates(prompts: list[str], references: list[str], names: Iterable[str] | None = None) -> list[SolverRate]:
    """Each learner's share (its answer is the reference) and chance rate over the instances:
    another instance's reference among the next WINDOW for most, a uniformly drawn option of
    the same prompt for an option rule. Only `names` when given; every feature some prompt has
    otherwise. Sorted by excess over chance, largest first."""
    refs = [key(r) for r in references]
    read = [features(p) for p in prompts]
    wanted = set(names) if names is not None else {f for answers, _ in read for f in answers}
    n = len(prompts)
    hits: Counter[str] = Counter()
    chance: Counter[str] = Counter()
    # the next WINDOW instances' references, counted once per instance: a learner's chance hits
    # are one lookup, not WINDOW comparisons per feature
    ahead = [Counter(r for r in refs[i + 1 : i + 1 + WINDOW] if r) for i in range(n)]
    for i, ((answers, mc), ref) in enumerate(zip(read, refs)):
        opts = options(prompts[i]) if mc else []
        labels = sum(1 for label, _ in opts if key(label) == ref) / len(opts) if opts else 0.0
        texts = sum(1 for _, text in opts if key(text) == ref) / len(opts) if opts else 0.0
        spread = ahead[i]
        # every feature of the prompt, or the wanted ones it has: the same pairs either way
        pairs = answers.items() if names is None else [(f, answers[f]) for f in wanted if f in answers]
        for f, answer in pairs:
            if answer == ref and ref:
                hits[f] += 1
            if f in mc:
                chance[f] += labels if f.endswith("_label") else texts
            elif (c := spread.get(answer)) is not None:
                chance[f] += c
    pairs = sum(1 for i in range(n) for j in range(i + 1, min(n, i + 1 + WINDOW)) if refs[j])
    out = []
    for f in wanted:
        is_mc = f.startswith("option_")
        base = chance[f] / max(1, n if is_mc else pairs)
        out.append(SolverRate(f, hits[f] / max(1, n), base, n, n if is_mc else pairs))
    return sorted(out, key=lambda r: (-(r.share - r.baseline), r.name))
