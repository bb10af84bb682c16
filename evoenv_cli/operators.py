"""The RACES composition operators, one record each: what a composite of theirs is called,
what it declares (ANSWER_TYPE, INPUT_TYPE, TAGS), which parts it takes and its code.

`render` writes a composite's file and `_as_part` describes it for the rest of the run, and
the next round reads the file back: all three take these facts from the record, so a
composite means the same thing in the round that made it and in every round after.
Only the standard library is imported here, so config.py (which no stage may be imported by)
reads the operators' names from REGISTRY (`config.OPERATOR_NAMES`, a live view), and cli.py can
name them without importing the stage: an operator is its record here, and nothing else.

- SEQUENTIAL(A, B): A's answer feeds B (A's ANSWER_TYPE is B's INPUT_TYPE). B's instance is
  `B.generate_from(A's reference)`; B's prompt is shown with that value replaced by X, "the
  answer to part 1", so the solver must solve A to know B. The answer is B's.
- PARALLEL(A, B): both tasks in one prompt; the answer gives both parts on two lines; all
  parts right scores 1.0 (optionally the mean of the parts).
- SORT(A, n): n instances of A (numeric answers), labelled; answer: labels by increasing answer.
- SELECT(A, n): n instances of A; answer: the label of the largest (or smallest) answer.

Every composite but a SEQUENTIAL one is "multi-part": its answer is labels or part lines,
which feed no SEQUENTIAL step and are never sorted or selected.

Levels: part k of a composite at level d runs at `Blueprint.levels[k] + ceil(d / 2) - 1` (capped
at 10; compose picks `levels` where the policy's pass rate is measured, 1 by default).

Predicted pass rate (`predict`, from the parts' measured pass rates p at their levels, taken as
independent: the solver answers each embedded problem as well as it answers it alone) and the
guess rate it implies (`chance`, from the parts' measured guess rates g):
- SEQUENTIAL: pA * pB. The answer is B's, and B's problem is built from A's answer, so a solver
  that gets X wrong answers another B problem (right only by coincidence, left out). Chance:
  max(gB, gA * pB): B's answer guessed, or X guessed and B solved (a B that only restates X,
  such as writing it in words, is as guessable as A).
- PARALLEL: pA * pB, every part right (chance gA * gB); with partial credit the mean score,
  (pA + pB) / 2 (chance (gA + gB) / 2).
- SELECT(A, n): a solver that gets all n answers right names the right label (p^n); otherwise
  it is taken to name one of the n labels at random: p^n + (1 - p^n) / n. Chance: 1 / n.
- SORT(A, n): the same with one of the n! orders: p^n + (1 - p^n) / n!. Chance: 1 / n!.
Ties among the n answers only make SELECT and SORT easier, so those two are lower bounds.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evoenv_cli.envfile import EnvFile

NUMERIC = ("int", "float")


@dataclass
class Part:
    """An environment that can be a part: its file, what it declares, how deep it is."""

    env: EnvFile
    name: str
    answer_type: str | None
    input_type: str | None
    tags: list[str]
    depth: int = 0
    parents: list[str] = field(default_factory=list)
    order_free: bool = False  # its list answer is accepted in any order

    @property
    def unique_answer(self) -> bool:
        return "planted" not in self.tags and "multi-part" not in self.tags

    @property
    def numeric(self) -> bool:
        return self.answer_type in NUMERIC and self.unique_answer and not self.order_free


@dataclass
class Blueprint:
    """A composite to build: an operator and its parts. What the composite declares comes
    from the operator's record, here, for the file and the in-run part alike."""

    operator: str
    parts: list[Part]
    n: int = 2
    direction: str = "max"  # SELECT only
    levels: list[int] = field(default_factory=list)  # each part's level at the composite's level 1 (default 1)

    @property
    def start_levels(self) -> list[int]:
        return self.levels or [1] * len(self.parts)

    @property
    def op(self) -> Operator:
        return REGISTRY[self.operator]

    @property
    def depth(self) -> int:
        return 1 + max(p.depth for p in self.parts)

    @property
    def answer_type(self) -> str | None:
        return self.op.answer_type(self.parts)

    @property
    def input_type(self) -> str | None:
        return self.op.input_type(self.parts)

    @property
    def order_free(self) -> bool:
        return self.op.order_free(self.parts)

    @property
    def tags(self) -> list[str]:
        planted = {"planted"} if any("planted" in p.tags for p in self.parts) else set()
        return sorted({"composite", self.operator, *self.op.tags} | planted)

    def name(self) -> str:
        full = f"{self.op.head(self)}__{'__'.join(p.name for p in self.parts)}"
        if len(full) <= 64:
            return full
        digest = hashlib.sha256(full.encode()).hexdigest()[:8]
        return f"{full[:55]}_{digest}"


@dataclass(frozen=True)
class Operator:
    """One operator, all compose knows of it. `arity` 2 takes two distinct parts, 1 takes one
    part and n instances of it; `accepts` is the rule for which parts it may compose."""

    name: str
    arity: int
    head: Callable[[Blueprint], str]  # the composite's name starts with it
    what: Callable[[Blueprint], str]  # the first line of its docstring
    answer_type: Callable[[list[Part]], str | None]
    input_type: Callable[[list[Part]], str | None]  # a value gives the composite generate_from
    order_free: Callable[[list[Part]], bool]  # its list answer is accepted in any order
    tags: tuple[str, ...]  # besides "composite", its name, and "planted" from a planted part
    accepts: Callable[[list[Part]], bool]
    plan: Callable[[list[Part], random.Random], Blueprint]
    bind: Callable[[Blueprint, Callable[[Part], str], bool], list[str]]  # (plan, part -> its function, partial credit)
    # (plan, the parts' pass rates, partial credit) -> the composite's pass rate (module docstring)
    predict: Callable[[Blueprint, list[float], bool], float]
    # (plan, the parts' pass rates, their guess rates, partial credit) -> the composite's guess rate
    chance: Callable[[Blueprint, list[float], list[float], bool], float]
    template: str  # the composite's code after the common helpers
    template_from: str = ""  # its generate_from, added when it has an INPUT_TYPE
    # its parts' order means nothing (PARALLEL(A, B) is PARALLEL(B, A)): dedupe compares such
    # composites by their sorted parents
    unordered_parts: bool = False


# -- the composite's own code ------------------------------------------------------------------------
COMMON = '''
def _levels(difficulty):
    """Part k runs at _START[k] + ceil(d / 2) - 1 of the composite's level d (capped at 10):
    level 1 asks each part at the level compose chose for it, and every two levels add one."""
    d = max(1, min(10, int(difficulty)))
    return [min(10, start + (d + 1) // 2 - 1) for start in _START]


def _sub_seed(seed, k):
    return int(seed) * 1000003 + k


def _call(part, fn, *args):
    try:
        return part[fn](*args)
    except Exception as exc:
        raise RuntimeError(f"part {part['NAME']}: {fn} failed: {type(exc).__name__}: {exc}") from None


def _safe_score(part, instance, answer):
    try:
        s = part["score"](instance, answer)
    except Exception:
        return 0.0
    if type(s) not in (int, float) or not 0.0 <= s <= 1.0:
        return 0.0
    return float(s)


def _number(text):
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        return float(text)
'''

SEQUENTIAL = '''
_TRIES = 20


def _typed(text, kind):
    text = text.strip()
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    if kind == "str":
        return text
    items = [t for t in re.split(r"[\\s,\\[\\]]+", text) if t]
    return [int(t) for t in items] if kind == "list[int]" else items


def _mask(text, value, kind, neighbour=None):
    """B's prompt with A's answer written as X; None when the value is not shown as is.
    `neighbour` is B's prompt built from value + 1 with the same seed: where the two differ
    is where the value is shown, so a number that merely equals it (a line number) stays."""
    if neighbour is not None:
        mine, theirs = re.split(r"([^\\w.]+)", text), re.split(r"([^\\w.]+)", neighbour)
        if len(mine) == len(theirs):
            hits = [k for k, (x, y) in enumerate(zip(mine, theirs)) if x == str(value) and x != y]
            for k in hits:
                mine[k] = "X"
            if hits:
                return "".join(mine)
    if kind in ("list[int]", "list[str]"):
        items = [str(v) for v in value]
        shown = ["[" + ", ".join(items) + "]", ", ".join(items), " ".join(items), ",".join(items)]
    else:
        shown = [str(value)]
    for s in shown:
        if not s:
            continue
        masked, count = re.subn(r"(?<![\\w.])" + re.escape(s) + r"(?![\\w]|\\.\\d)", "X", text)
        if count:
            return masked
    return None


def _neighbour(value, seed, level):
    if _A_TYPE not in ("int", "float"):
        return None
    return _call(_B, "prompt", _call(_B, "generate_from", value + 1, seed, level))


def _chain(a, seed, level):
    value = _canonical(_typed(_call(_A, "solve", a), _A_TYPE))
    b = _call(_B, "generate_from", value, seed, level)
    return b, _mask(_call(_B, "prompt", b), value, _A_TYPE, _neighbour(value, seed, level))


def _first_chaining(make_a, seed, level):
    """`level`: part 2's (part 1's is in make_a)."""
    for k in range(_TRIES):
        a = make_a(_sub_seed(seed, k))
        b, masked = _chain(a, seed, level)
        if masked is not None:
            return {"a": a, "b": b, "seed": seed, "level": level}
    raise ValueError(f"part {_B['NAME']} never shows part {_A['NAME']}'s answer as is "
                     f"in {_TRIES} tries: the two do not chain")


def generate(seed, difficulty):
    level_a, level_b = _levels(difficulty)
    return _first_chaining(lambda s: _call(_A, "generate", s, level_a), seed, level_b)


def _canonical(value):
    """Part 1's answer as part 2 takes it: the items in increasing order when part 1 accepts
    them in any order (so X is one value, whatever order a solver gives them in)."""
    return sorted(value) if _A_ORDER_FREE else value


def prompt(instance):
    value = _canonical(_typed(_call(_A, "solve", instance["a"]), _A_TYPE))
    neighbour = _neighbour(value, instance["seed"], instance["level"])
    masked = _mask(_call(_B, "prompt", instance["b"]), value, _A_TYPE, neighbour)
    return (
        "This problem has two parts. Solve part 1 first: its answer, called X, is needed "
        "in part 2.\\n\\n"
        "Part 1:\\n" + _call(_A, "prompt", instance["a"]) + "\\n\\n"
        "Part 2 (X stands for the answer to part 1" + _X_NOTE + "):\\n" + masked + "\\n\\n"
        "Give only the answer to part 2, in the form part 2 asks for."
    )


def solve(instance):
    return _call(_B, "solve", instance["b"])


def score(instance, answer):
    return _safe_score(_B, instance["b"], answer)
'''

SEQUENTIAL_FROM = """

def generate_from(value, seed, difficulty):
    level_a, level_b = _levels(difficulty)
    return _first_chaining(lambda s: _call(_A, "generate_from", value, s, level_a), seed, level_b)
"""

PARALLEL = """
_PART_LINE = re.compile(r"[ \\t]*part[ \\t]*(\\d+)[ \\t]*:[ \\t]*(.*?)[ \\t]*", re.IGNORECASE)


def generate(seed, difficulty):
    levels = _levels(difficulty)
    return {"parts": [_call(p, "generate", _sub_seed(seed, k), lv) for k, (p, lv) in enumerate(zip(_PARTS, levels))]}


def prompt(instance):
    tasks = "\\n\\n".join(f"Part {k + 1}:\\n" + _call(p, "prompt", inst)
                         for k, (p, inst) in enumerate(zip(_PARTS, instance["parts"])))
    lines = " and ".join(f"'Part {k + 1}: <answer to part {k + 1}>'" for k in range(len(_PARTS)))
    return (
        f"This problem has {len(_PARTS)} independent parts. Solve all of them.\\n\\n" + tasks
        + f"\\n\\nGive every answer on its own line, exactly as {lines}, each in the form its "
        "part asks for."
    )


def solve(instance):
    return "\\n".join(f"Part {k + 1}: " + _call(p, "solve", inst)
                     for k, (p, inst) in enumerate(zip(_PARTS, instance["parts"])))


def score(instance, answer):
    if not isinstance(answer, str) or len(answer) > 100000:
        return 0.0
    given = {}
    for line in answer.strip().splitlines():
        m = _PART_LINE.fullmatch(line)
        if line.strip() and (m is None or int(m.group(1)) in given):
            return 0.0  # only the part lines, each once: nothing else is the asked form
        if m is not None:
            given[int(m.group(1))] = m.group(2)
    scores = [_safe_score(p, inst, given[k + 1]) if (k + 1) in given else 0.0
              for k, (p, inst) in enumerate(zip(_PARTS, instance["parts"]))]
    if PARTIAL_CREDIT:
        return sum(scores) / len(scores)
    return 1.0 if all(s >= 1.0 for s in scores) else 0.0
"""

LABELLED = """
_LABELS = "ABCDEFGH"[:N]


def generate(seed, difficulty):
    [level] = _levels(difficulty)
    return {"items": [_call(_A, "generate", _sub_seed(seed, k), level) for k in range(N)]}


def _values(instance):
    return [_number(_call(_A, "solve", item)) for item in instance["items"]]


def _tasks(instance):
    return "\\n\\n".join(f"Problem {label}:\\n" + _call(_A, "prompt", item)
                         for label, item in zip(_LABELS, instance["items"]))


def _labels(answer):
    if not isinstance(answer, str) or len(answer) > 1000:
        return None
    tokens = [t for t in re.split(r"[\\s,]+", answer.strip()) if t]
    return tokens if all(t in _LABELS for t in tokens) else None
"""

SORT = """

def prompt(instance):
    return (
        f"Below are {N} problems of the same kind, labelled " + ", ".join(_LABELS)
        + ". Each has a numeric answer.\\n\\n" + _tasks(instance)
        + "\\n\\nOrder the labels from the problem with the smallest answer to the one with the "
        "largest, and give them separated by single spaces (problems with equal answers may "
        "come in either order)."
    )


def solve(instance):
    values = _values(instance)
    return " ".join(label for _, label in sorted(zip(values, _LABELS)))


def score(instance, answer):
    labels = _labels(answer)
    if labels is None or sorted(labels) != sorted(_LABELS):
        return 0.0
    try:
        values = dict(zip(_LABELS, _values(instance)))
    except Exception:
        return 0.0
    ordered = [values[label] for label in labels]
    return 1.0 if all(x <= y for x, y in zip(ordered, ordered[1:])) else 0.0
"""

SELECT = """

def prompt(instance):
    which = "largest" if LARGEST else "smallest"
    return (
        f"Below are {N} problems of the same kind, labelled " + ", ".join(_LABELS)
        + ". Each has a numeric answer.\\n\\n" + _tasks(instance)
        + f"\\n\\nWhich problem has the {which} answer? Give its label only (if several share "
        f"the {which} answer, any of them is accepted)."
    )


def _best(values):
    return max(values) if LARGEST else min(values)


def solve(instance):
    values = _values(instance)
    return _LABELS[values.index(_best(values))]


def score(instance, answer):
    labels = _labels(answer)
    if labels is None or len(labels) != 1:
        return 0.0
    try:
        values = _values(instance)
    except Exception:
        return 0.0
    return 1.0 if values[_LABELS.index(labels[0])] == _best(values) else 0.0
"""


COMPOSITE_LEVELS = tuple(range(1, 11))  # every level a composite can be asked at (sample, calibrate)


def part_levels(plan: Blueprint, levels: tuple[int, ...] = COMPOSITE_LEVELS) -> list[list[int]]:
    """The levels each part runs at when the composite runs at `levels`: COMMON's `_levels`,
    start + ceil(d / 2) - 1 capped at 10 (parts 1..5 for a composite at 1..10 started at 1)."""
    return [sorted({min(10, start + (d + 1) // 2 - 1) for d in levels}) for start in plan.start_levels]


def _x_note(part: Part) -> str:
    if not part.answer_type.startswith("list"):
        return ""
    if part.order_free:
        return ", the list of its items in increasing order, though part 1 accepts any order"
    return ", the list of its items in order"


def _chains(a: Part, b: Part) -> bool:
    """A's one answer can be B's input: not planted, not multi-part, of B's INPUT_TYPE."""
    return a.unique_answer and bool(a.answer_type) and b.input_type == a.answer_type


def _flat(a: Part, b: Part) -> bool:
    """Neither is PARALLEL already: no "Part 1:" inside a part (and each pair once)."""
    return a.name < b.name and "parallel" not in a.tags and "parallel" not in b.tags


def _labelled(name: str) -> Callable[[list[Part], random.Random], Blueprint]:
    return lambda parts, rng: Blueprint(name, parts, n=rng.choice((3, 4)), direction=rng.choice(("max", "min")))


def _both(rates: list[float], partial_credit: bool) -> float:
    """Every part right (the product), or with partial credit the mean score."""
    return sum(rates) / len(rates) if partial_credit else math.prod(rates)


def _pick(p: float, n: int, orders: int) -> float:
    """n answers all right (p^n) names the right one of `orders`; otherwise a random one."""
    right = p**n
    return right + (1.0 - right) / orders


def _labelled_bind(plan: Blueprint, slot: Callable[[Part], str], partial_credit: bool) -> list[str]:
    return [f"_A = {slot(plan.parts[0])}()", f"N = {plan.n}"]


_OPERATORS = (
    Operator(
        name="sequential",
        arity=2,
        head=lambda plan: "seq",
        what=lambda plan: f"SEQUENTIAL composition: the answer to {plan.parts[0].name} feeds {plan.parts[1].name}.",
        answer_type=lambda parts: parts[1].answer_type,
        input_type=lambda parts: parts[0].input_type,
        order_free=lambda parts: parts[1].order_free,  # the answer is B's, scored by B
        tags=(),
        accepts=lambda parts: _chains(*parts),
        plan=lambda parts, rng: Blueprint("sequential", parts),
        bind=lambda plan, slot, partial_credit: [
            f"_A = {slot(plan.parts[0])}()",
            f"_B = {slot(plan.parts[1])}()",
            f"_A_TYPE = {plan.parts[0].answer_type!r}",
            f"_A_ORDER_FREE = {plan.parts[0].order_free!r}",
            f"_X_NOTE = {_x_note(plan.parts[0])!r}",
        ],
        template=SEQUENTIAL,
        template_from=SEQUENTIAL_FROM,
        predict=lambda plan, rates, partial_credit: rates[0] * rates[1],
        chance=lambda plan, rates, guesses, partial_credit: max(guesses[1], guesses[0] * rates[1]),
    ),
    Operator(
        name="parallel",
        arity=2,
        head=lambda plan: "par",
        what=lambda plan: f"PARALLEL composition: {' and '.join(p.name for p in plan.parts)} in one prompt.",
        answer_type=lambda parts: "str",
        input_type=lambda parts: None,
        order_free=lambda parts: False,
        tags=("multi-part",),
        accepts=lambda parts: _flat(*parts),
        plan=lambda parts, rng: Blueprint("parallel", parts),
        bind=lambda plan, slot, partial_credit: [
            f"_PARTS = [{', '.join(f'{slot(p)}()' for p in plan.parts)}]",
            f"PARTIAL_CREDIT = {partial_credit!r}",
        ],
        template=PARALLEL,
        predict=lambda plan, rates, partial_credit: _both(rates, partial_credit),
        chance=lambda plan, rates, guesses, partial_credit: _both(guesses, partial_credit),
        unordered_parts=True,
    ),
    Operator(
        name="sort",
        arity=1,
        head=lambda plan: f"sort{plan.n}",
        what=lambda plan: f"SORT composition: {plan.n} instances of {plan.parts[0].name}, ordered by their answers.",
        answer_type=lambda parts: "list[str]",
        input_type=lambda parts: None,
        order_free=lambda parts: False,
        tags=("multi-part",),
        accepts=lambda parts: parts[0].numeric,
        plan=_labelled("sort"),
        bind=_labelled_bind,
        template=LABELLED + SORT,
        predict=lambda plan, rates, partial_credit: _pick(rates[0], plan.n, math.factorial(plan.n)),
        chance=lambda plan, rates, guesses, partial_credit: 1.0 / math.factorial(plan.n),
    ),
    Operator(
        name="select",
        arity=1,
        head=lambda plan: f"select{plan.n}_{plan.direction}",
        what=lambda plan: (
            f"SELECT composition: which of {plan.n} instances of {plan.parts[0].name} has "
            f"the {'largest' if plan.direction == 'max' else 'smallest'} answer."
        ),
        answer_type=lambda parts: "str",
        input_type=lambda parts: None,
        order_free=lambda parts: False,
        tags=("multi-part",),
        accepts=lambda parts: parts[0].numeric,
        plan=_labelled("select"),
        bind=lambda plan, slot, partial_credit: (
            _labelled_bind(plan, slot, partial_credit) + [f"LARGEST = {plan.direction == 'max'!r}"]
        ),
        template=LABELLED + SELECT,
        predict=lambda plan, rates, partial_credit: _pick(rates[0], plan.n, plan.n),
        chance=lambda plan, rates, guesses, partial_credit: 1.0 / plan.n,
    ),
)
REGISTRY: dict[str, Operator] = {op.name: op for op in _OPERATORS}


def template_of(source: str | bytes) -> str | None:
    """The operator whose code a file ends with, exactly as compose's `render` writes it: read
    from the content (evoenv's own template defines the file's last functions), never from
    anything the file declares. None for any other file."""
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    for op in _OPERATORS:
        body = COMMON + op.template
        if text.endswith(body) or (op.template_from and text.endswith(body + op.template_from)):
            return op.name
    return None


OPERATORS = tuple(REGISTRY)  # the names, in the order candidates are proposed
