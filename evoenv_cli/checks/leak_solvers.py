"""Prompt-only solvers for `evoenv validate`'s leak check: cheap programs that read nothing but
the prompt and try to turn it into the answer (a neighbour value, digits split across
sentences, full-width digits, number words, a simple cipher, thousands separators, a think
block, arithmetic on the numbers found). A policy under RL pressure finds such a reading; an
environment where one of these solvers beats the chance rate is a leak, with the solver named.

Each solver maps a prompt to a set of candidate answers (normalized strings); it solves an
instance when the reference is among them. The chance rate is how often another instance's
reference is among them, so a prompt full of numbers, whose candidate sets are large, is
judged against its own baseline. Pure string work: nothing of the environment runs here.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from evoenv_cli.confidence import wilson_interval

# Solvers that compute rather than read: on an arithmetic task they are the task, not a leak
# (validate skips them for evoenv's imports of external benchmarks only).
TASK_SOLVERS = frozenset({"arithmetic"})
CONFIDENCE_Z = 1.645  # one-sided 95%

MAX_NUMBERS = 40  # pairs of the first numbers only: arithmetic stays O(40^2) per prompt
_NUMBER = re.compile(r"(?<![0-9])-?[0-9]+(?:[,_' ][0-9]{3})*(?![0-9])")
_DIGITS = re.compile(r"[0-9]+")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
MAX_NUMBER_WORDS = 32  # no number is written in more words (the longest below 10**12 takes 23)
_WORD = re.compile(r"[A-Za-z]+")
_ONES = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if i > 1}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}


def normalize(answer: str) -> str:
    """One spelling per answer: whitespace collapsed, commas and spaces between list items
    alike, an integer without sign noise or leading zeros."""
    text = " ".join(answer.replace(",", " ").split())
    if _INTEGER.fullmatch(text):  # str(int(text)) without int(): linear, and no digit limit
        digits = text.lstrip("+-").lstrip("0") or "0"
        return "-" + digits if text[0] == "-" and digits != "0" else digits
    return text


def _numbers(text: str) -> list[int]:
    """The integers written in `text`, thousands separators allowed."""
    out = []
    for m in _NUMBER.finditer(text):
        digits = re.sub(r"[,_' ]", "", m.group())
        if len(digits.lstrip("-")) <= 18:
            out.append(int(digits))
    return out


def _tokens(text: str) -> set[str]:
    return {normalize(t) for t in re.split(r"[\s,;:()\[\]{}\"'.!?]+", text) if t}


def neighbour(prompt: str) -> set[str]:
    """Every number written in the prompt, one or two away ("one more than 4,117")."""
    return {str(n + d) for n in _numbers(prompt) for d in (-2, -1, 1, 2)}


def split_digits(prompt: str) -> set[str]:
    """Adjacent digit runs joined: an answer given in pieces across sentences."""
    runs = _DIGITS.findall(prompt)
    out = {a + b for a, b in zip(runs, runs[1:])} | {a + b + c for a, b, c in zip(runs, runs[1:], runs[2:])}
    return {normalize(x) for x in out if len(x) <= 24}


def fullwidth(prompt: str) -> set[str]:
    """The prompt's tokens after Unicode compatibility folding (full-width digits, ligatures)."""
    folded = unicodedata.normalize("NFKC", prompt)
    return _tokens(folded) - _tokens(prompt) if folded != prompt else set()


def _parse_words(words: list[str]) -> int | None:
    total, current, seen = 0, 0, False
    for w in words:
        if w in _ONES:
            current += _ONES[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w == "hundred":
            current = max(current, 1) * 100
        elif w in _SCALES:
            total += max(current, 1) * _SCALES[w]
            current = 0
        elif w == "and" and seen:
            continue
        else:
            return None
        seen = True
    return total + current if seen else None


def number_words(prompt: str) -> set[str]:
    """Runs of English number words read as integers ("four thousand one hundred eighteen")."""
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", prompt.replace("-", " "))]
    known = set(_ONES) | set(_TENS) | set(_SCALES) | {"and"}
    out, run = set(), []
    for w in [*words, "."]:
        if w in known:
            run.append(w)
            continue
        # every suffix: "the first of nine thousand ..." still reads (those of number length:
        # a run of words may be as long as the prompt, and all its suffixes would be quadratic)
        for i in range(max(0, len(run) - MAX_NUMBER_WORDS), len(run)):
            value = _parse_words(run[i:])
            if value is not None and len(run) - i >= 2:
                out.add(str(value))
        run = []
    return out


def _shift(k: int) -> dict[int, int]:
    lower, upper = string.ascii_lowercase, string.ascii_uppercase
    return str.maketrans(lower + upper, lower[k:] + lower[:k] + upper[k:] + upper[:k])


_SHIFTS = [_shift(k) for k in range(26)]  # Caesar shift k as a translation table (one C pass a word)


def cipher(prompt: str) -> set[str]:
    """Tokens reversed, rot13 and every Caesar shift, and digits written one by one (spaced
    or reversed) joined back."""
    words = {w for w in _WORD.findall(prompt) if len(w) >= 3}
    out: set[str] = set()
    if words:
        # the distinct words on lines of one string: each shift is one C pass over all of them,
        # not a call per word and shift (rot13, codecs' too, is shift 13 of these ASCII letters)
        joined = "\n".join(words)
        for table in _SHIFTS[1:]:
            out.update(joined.translate(table).split("\n"))
        out.update(joined[::-1].split("\n"))
    out |= {normalize(t[::-1]) for t in _DIGITS.findall(prompt) if len(t) >= 2}
    for m in re.finditer(r"(?<![0-9])[0-9](?:[ .-][0-9]){2,}(?![0-9])", prompt):
        joined = re.sub(r"[ .-]", "", m.group())
        out |= {normalize(joined), normalize(joined[::-1])}
    return out


def thousands(prompt: str) -> set[str]:
    """Numbers written with thousands separators, read without them."""
    return {str(n) for n in _numbers(prompt) if n >= 1000 or n <= -1000}


def think_block(prompt: str) -> set[str]:
    """What a think block shown in the prompt holds: its tokens, its last number, and the sum
    and difference of each pair of its numbers."""
    out: set[str] = set()
    for block in _think_blocks(prompt):
        out |= _tokens(block)
        nums = _numbers(block)[:MAX_NUMBERS]
        out |= {str(a + b) for i, a in enumerate(nums) for b in nums[i + 1 :]}
        out |= {str(abs(a - b)) for i, a in enumerate(nums) for b in nums[i + 1 :]}
    return out


def _think_blocks(prompt: str) -> list[str]:
    """What each <think>...</think> holds (the first close after each open, as a lazy regex
    would find them): a search per tag, where the regex rescans the rest after every unclosed open."""
    out, pos = [], 0
    while (opened := _THINK_OPEN.search(prompt, pos)) and (closed := _THINK_CLOSE.search(prompt, opened.end())):
        out.append(prompt[opened.end() : closed.start()])
        pos = closed.end()
    return out


def arithmetic(prompt: str) -> set[str]:
    """Sum, difference and product of each pair of the prompt's numbers, and their total."""
    nums = _numbers(prompt)[:MAX_NUMBERS]
    out = {str(sum(nums))} if nums else set()
    for i, a in enumerate(nums):
        for b in nums[i + 1 :]:
            out |= {str(a + b), str(a - b), str(b - a), str(a * b)}
    return out


_WRITTEN = re.compile(r"(?<![0-9])-?[0-9]+(?:\.[0-9]+)?")
_LIST = re.compile(r"\[([^\[\]\n]{1,400})\]")


def as_written(prompt: str) -> set[str]:
    """A value stated as written: every number as its digits stand, whatever touches them
    ("123.", "No123", "123rd", "-7"), every token, and every bracketed list's items. validate's
    plain form reads whole tokens of the reference itself; this is the solver form of it, for
    the composite checks (composite_leaks.py), which read another part's answer."""
    out = {normalize(m.group()) for m in _WRITTEN.finditer(prompt)}
    out |= {normalize(m.group().lstrip("-")) for m in _WRITTEN.finditer(prompt) if m.group().startswith("-")}
    out |= _tokens(prompt)
    out |= {normalize(m.group(1)) for m in _LIST.finditer(prompt)}
    return out


@dataclass(frozen=True)
class Solver:
    name: str
    candidates: Callable[[str], set[str]]


# Checked in this order: the first over its limit names the verdict.
SOLVERS = (
    Solver("fullwidth", fullwidth),
    Solver("number_words", number_words),
    Solver("thousands", thousands),
    Solver("think_block", think_block),
    Solver("split_digits", split_digits),
    Solver("cipher", cipher),
    Solver("neighbour", neighbour),
    Solver("arithmetic", arithmetic),
)
# The composite checks read another part's answer, which a composite never writes as is on
# purpose (SEQUENTIAL masks X): there a number stated as written is a leak too (last, so the
# older solvers keep naming the verdicts they named).
COMPOSITE_SOLVERS = (*SOLVERS, Solver("as_written", as_written))


@dataclass
class SolverRate:
    """How often one solver found an instance's own reference (`share`) and another
    instance's (`baseline`, the chance rate)."""

    name: str
    share: float
    baseline: float
    n: int = 0  # instances
    pairs: int = 0  # (instance, another instance's reference) pairs the baseline was measured on

    def over(self, max_share: float, min_excess: float, z: float = CONFIDENCE_Z) -> bool:
        """Possibly over the limits as measured: the share not surely under `max_share` (its
        Wilson upper bound reaches it: a limit is tested, not compared strictly, so a leak on
        exactly half the levels is one) and its excess over the chance rate over `min_excess`."""
        high = wilson_interval(self.share, self.n, z)
        return high is not None and high[1] >= max_share and self.share - self.baseline > min_excess

    def surely_over(self, max_share: float, min_excess: float, z: float = CONFIDENCE_Z) -> bool:
        """Over the limits with one-sided 95% confidence: `over`, and the excess over the chance
        rate less z standard errors still over `min_excess`. A share the draw of instances put
        just over a limit is not a verdict."""
        return self.over(max_share, min_excess, z) and self.share - self.baseline - z * self._se() > min_excess

    def surely_under(self, max_share: float, min_excess: float, z: float = CONFIDENCE_Z) -> bool:
        """Under a limit with one-sided 95% confidence: the share's Wilson upper bound under
        `max_share`, or the excess over the chance rate plus z standard errors under `min_excess`."""
        high = wilson_interval(self.share, self.n, z)
        return high is None or high[1] < max_share or self.share - self.baseline + z * self._se() < min_excess

    def _se(self) -> float:
        """The standard error of the excess (share minus chance rate)."""
        return math.sqrt(
            self.share * (1 - self.share) / max(1, self.n) + self.baseline * (1 - self.baseline) / max(1, self.pairs)
        )


def rates(
    prompts: list[str], references: list[str], window: int = 5, solvers: tuple[Solver, ...] = SOLVERS
) -> list[SolverRate]:
    """Each solver's hit share over the instances and its chance rate: the same solver's
    candidates against the references of the next `window` instances whose reference differs."""
    refs = [normalize(r) for r in references]
    out = []
    for solver in solvers:
        sets = [solver.candidates(p) for p in prompts]
        hits = sum(r in s for r, s in zip(refs, sets) if r)
        pairs = [(i, j) for i in range(len(sets)) for j in range(i + 1, min(len(refs), i + 1 + window))]
        base = [refs[j] in sets[i] for i, j in pairs if refs[j] and refs[j] != refs[i]]
        baseline = sum(base) / len(base) if base else 0.0
        out.append(SolverRate(solver.name, hits / max(1, len(prompts)), baseline, len(prompts), len(base)))
    return out
