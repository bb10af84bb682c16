"""The scorer fuzzer of `evoenv validate`: structured mutations of the reference that a policy
under GRPO finds by searching (alternatives joined by a delimiter, ranges, supersets, subsets,
permutations, case-only changes, other number formats, signs and neighbour values, a list item
swapped for its nearest neighbour in the instance, echoes of the instance, a formula, random answers of the reference's shape, non-finite numbers, and every
literal the module holds), each wrong value also dressed as models write answers. A `score`
that pays one of them on more than noise pays for answers that are not the answer; paid is
measured against chance (checks/pay.py), not only full pay.

An environment whose answer is unique gets the whole set. An order-free one (any order of its
list accepted, and nothing planted) gets every kind but reorderings: its answer is unique up to
order, so an extra item or a missing one is still wrong. A planted one (whose `score` rightly
accepts other valid answers) gets the mutations its declared rule forbids whatever the answer
is at any pay (several answers in one, a range, echoes of the whole task, non-finite numbers,
literals of another shape than the reference) and every other kind at partial pay only: a
valid answer is paid in full, so a wrong one paid over chance but under full pay is paid for
being wrong. Everything here is pure: the mutants are planned from strings and the source's
AST, and scored by validate through the sandbox.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from evoenv_cli.checks.leak_solvers import normalize
from evoenv_cli.checks.probes import INT, Context, random_string, shape_of, token_in
from evoenv_cli.runtime.contract import parse_python

# The order the kinds are judged in: the first over the noise names the verdict.
KINDS = (
    "alternatives",
    "range",
    "random_shape",
    "superset",
    "subset",
    "permutation",
    "case",
    "number_format",
    "sign",
    "neighbour",
    "nearest",
    "echo",
    "formula",
    "nonfinite",
    "wrapped",
    "embedded",
    "literal",
)
# wrong whatever the valid answer is (no planted or order-free answer is NaN or infinite, or
# several answers at once)
SHAPE_FREE = ("alternatives", "range", "echo", "nonfinite", "embedded", "literal")
# How a wrong answer is dressed (`wrapped`): the markup models answer in, prose around it, an
# approximation marker, exponent notation. Each form is applied to wrong values of the
# reference's own shape, so a score that unwraps them must still compare the value.
WRAPPERS = (
    lambda w: f"\\boxed{{{w}}}",
    lambda w: f"The answer is {w}.",
    lambda w: f"approximately {w}",
    lambda w: f"≈ {w}",
    lambda w: f"**{w}**",
)
# What float() reads as NaN or infinity: a tolerance test written `not (abs(x - ref) > tol)`, or
# `min`/`max` over a NaN, passes them; a number past float's range reads as inf.
NONFINITE = ("nan", "NaN", "inf", "-inf", "1e999")
RANDOM_PER_INSTANCE = 8
MAX_LITERALS = 48
MAX_ECHO_CHARS = 4000
FLOAT_OFF = (0.05, 0.1, 0.25)  # distances (relative, and at least as much absolute) no tolerance needs
_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


@dataclass(frozen=True)
class Mutant:
    kind: str
    instance: int  # index into the instances fuzzed
    answer: str
    # whether full pay counts: False where the declared rule lets a valid answer of this kind
    # exist (a planted answer's neighbour may be valid too), so only partial pay counts
    full: bool = True


def words(n: int) -> str:
    """n in English number words (|n| below a million)."""
    if n < 0:
        return "minus " + words(-n)
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("-" + _ONES[n % 10] if n % 10 else "")
    if n < 1000:
        return _ONES[n // 100] + " hundred" + (" " + words(n % 100) if n % 100 else "")
    return words(n // 1000) + " thousand" + (" " + words(n % 1000) if n % 1000 else "")


def fullwidth(text: str) -> str:
    return "".join(chr(0xFF10 + int(c)) if c.isdigit() and c.isascii() else c for c in text)


# -- literals the module holds ---------------------------------------------------------------------
_FOLD_CALLS = {"str": str, "int": int, "hex": hex, "abs": abs, "len": len}
_FOLD_OPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Mod: lambda a, b: a % b,
    ast.FloorDiv: lambda a, b: a // b,
}


def _fold(node: ast.AST, names: dict[str, object]) -> object:
    """The value of a small constant expression (literals, + - * // % **, str/int/hex/abs/len,
    names folded before it), bounded so no source can make it expensive; raises otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _fold(node.operand, names)
        if isinstance(v, (int, float)):
            return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        a, b = _fold(node.left, names), _fold(node.right, names)
        if (
            isinstance(node.op, ast.Pow)
            and isinstance(a, int)
            and isinstance(b, int)
            and 0 <= b <= 64
            and abs(a) < 2**32
        ):
            return a**b
        if type(node.op) in _FOLD_OPS and isinstance(a, int) and isinstance(b, int) and abs(a) < 2**64 > abs(b):
            return _FOLD_OPS[type(node.op)](a, b)
        if isinstance(node.op, ast.Add) and isinstance(a, str) and isinstance(b, str) and len(a) + len(b) <= 200:
            return a + b
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FOLD_CALLS:
        if len(node.args) == 1 and not node.keywords:
            v = _fold(node.args[0], names)
            if isinstance(v, (int, str)) and (not isinstance(v, str) or len(v) <= 200):
                return _FOLD_CALLS[node.func.id](v)
    raise ValueError("not a small constant expression")


def literals(source: str | bytes) -> list[str]:
    """Every literal of the module as an answer: constants (negative ones as written), dict
    keys, and module-level values folded from literals at import. Docstrings and long strings
    are left out; a syntax error gives none."""
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    try:
        tree = parse_python(text)
    except SyntaxError:
        return []
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    found: list[object] = []
    negated = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            if isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool):
                found.append(-node.operand.value)
                negated.add(id(node.operand))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in docstrings and id(node) not in negated:
            if isinstance(node.value, (int, float, str)) and not isinstance(node.value, bool):
                found.append(node.value)
    folded: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                folded[node.targets[0].id] = value = _fold(node.value, folded)
            except (ValueError, TypeError, ZeroDivisionError, OverflowError, RecursionError):
                continue
            found.append(value)
    out: list[str] = []
    for v in found:
        s = str(v)
        if s.strip() and len(s) <= 100 and s not in out:
            out.append(s)
            if len(out) == MAX_LITERALS:
                break
    return out


# -- the mutants -------------------------------------------------------------------------------------
def _int_mutants(n: int, ref: str) -> dict[str, list[str]]:
    digits = str(abs(n))
    anagrams = []
    if len(set(digits)) > 1:
        rotated = digits[1:] + digits[0]
        swapped = next(
            (
                digits[:i] + digits[i + 1] + digits[i] + digits[i + 2 :]
                for i in range(len(digits) - 1)
                if digits[i] != digits[i + 1]
            ),
            rotated,
        )
        anagrams = [("-" if n < 0 else "") + a for a in (rotated, swapped, digits[::-1]) if not a.startswith("0")]
    factor = next((k for k in range(2, 98) if n % k == 0 and n != k), 1)
    return {
        "alternatives": [f"{n + 1}|{ref}|{n - 1}", f"{n + 2}; {ref}; {n + 3}", f"{n - 1} / {ref} / {n + 1}"],
        "range": [f"{n - 50}-{n + 50}", f"{n - 3}..{n + 3}", f"{n - 10} to {n + 10}", f"[{n - 5}, {n + 5}]"],
        "permutation": anagrams,
        "number_format": [
            f"{n}.7",
            f"{n + 1:,}",
            fullwidth(str(n + 1)),
            words(n + 1) if abs(n) < 10**6 else "",
            hex(n + 1),
        ],
        "sign": [str(-n)] if n else [],
        "neighbour": [str(v) for v in (n + 2, n - 2, n + 10, n - 10, n * 10, n // 10, n * 2, n + 100)],
        "formula": [f"{n - 7}+7", f"{n // factor}*{factor}", f"({n + 3})-3", f"{2 * n}/2"],
    }


def _float_mutants(x: float, ref: str) -> dict[str, list[str]]:
    far = [x + s * max(d * abs(x), d) for d in FLOAT_OFF for s in (1, -1)]  # far in both senses
    return {
        "alternatives": [f"{far[0]!r}|{ref}|{far[1]!r}"],
        "range": [f"{x - abs(x) * 0.2 - 1:.4f}-{x + abs(x) * 0.2 + 1:.4f}", f"[{x - 1:.4f}, {x + 1:.4f}]"],
        "sign": [repr(-x)] if x else [],
        "neighbour": [repr(round(v, 6)) for v in far],
        "formula": [f"{x - 1.5!r}+1.5", f"{x * 2!r}/2"],
    }


def _nearest(tokens: list[str], sep: str, instance: dict) -> list[str]:
    """An item swapped for its nearest neighbour in the instance: where the answer's items are
    indices into one of the instance's lists of numbers, the index not in the answer whose number
    is nearest (a planted sum a little off); where they are values of such a list, the nearest
    value not in the answer. Kept in increasing order when the answer was."""
    if not tokens or not all(INT.fullmatch(t) and len(t) <= 18 for t in tokens):
        return []
    held = [int(t) for t in tokens]
    taken = set(held)
    lists = [
        v
        for v in instance.values()
        if isinstance(v, list) and len(v) > 1 and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
    ]
    out: list[str] = []
    for numbers in lists[:2]:
        if all(0 <= i < len(numbers) for i in held):
            pairs = [(j, numbers[j]) for j in range(len(numbers)) if j not in taken]
            at = {pos: numbers[held[pos]] for pos in {0, len(held) // 2}}
        elif taken <= set(numbers):
            pairs = [(x, x) for x in dict.fromkeys(numbers) if x not in taken]
            at = {pos: held[pos] for pos in {0, len(held) // 2}}
        else:
            continue
        for pos, value in sorted(at.items()):
            if not pairs:
                break
            item = min(pairs, key=lambda p: abs(p[1] - value))[0]
            new = held[:pos] + [item] + held[pos + 1 :]
            out.append(sep.join(map(str, sorted(new) if held == sorted(held) else new)))
    return out


def _list_mutants(tokens: list[str], sep: str, ctx: Context, instance_values: list[str]) -> dict[str, list[str]]:
    held = set(tokens)
    outside = list(itertools.islice((v for v in instance_values if v not in held), 2))
    swaps = [
        sep.join(tokens[:i] + [tokens[i + 1], tokens[i]] + tokens[i + 2 :])
        for i in itertools.islice((i for i in range(len(tokens) - 1) if tokens[i] != tokens[i + 1]), 2)
    ]
    wrong = sep.join(tokens[:-1] + [ctx.outside_token(tokens[-1])])
    return {
        "alternatives": [f"{wrong} | {sep.join(tokens)} | {wrong}", f"{wrong}; {sep.join(tokens)}"],
        "superset": [sep.join(tokens + [v]) for v in outside] + [sep.join([outside[0]] + tokens)] if outside else [],
        "subset": [sep.join(tokens[1:]), sep.join(tokens[: len(tokens) // 2] + tokens[len(tokens) // 2 + 1 :])],
        "permutation": swaps,
        "neighbour": [sep.join(tokens[:k] + [str(int(tokens[k]) + 1)] + tokens[k + 1 :]) for k in (0, len(tokens) - 1)]
        if all(INT.fullmatch(t) for t in tokens)
        else [],
    }


def _str_mutants(ref: str, ctx: Context) -> dict[str, list[str]]:
    w = ctx.outside_word()
    perms = [ref[::-1], ref[1:] + ref[0]] + [
        ref[:i] + ref[i + 1] + ref[i] + ref[i + 2 :]
        for i in itertools.islice((i for i in range(len(ref) - 1) if ref[i] != ref[i + 1]), 1)
    ]
    return {"alternatives": [f"{w}|{ref}|{w}{w}", f"{w}; {ref}"], "permutation": perms if len(set(ref)) > 1 else []}


# -- case: where the letters' case is information ----------------------------------------------------
_WORD = re.compile(r"[^\W\d_]+")
CONVENTIONS = ("lower", "upper", "capital", "sentence")


def _flip(text: str, at: int) -> str:
    """`text` with the case of its cased letter number `at` (negative from the end) flipped."""
    cased = [i for i, c in enumerate(text) if c.lower() != c.upper()]
    if not cased:
        return text
    i = cased[at]
    return text[:i] + text[i].swapcase() + text[i + 1 :]


# Case-only changes, each a transformation of the whole answer: composed with the dressings
# (`wrapped`), they make the `case` kind's mutants and its dressed ones.
CASE_FORMS: tuple[Callable[[str], str], ...] = (
    str.lower,
    str.upper,
    str.swapcase,
    str.capitalize,
    str.title,
    lambda t: _flip(t, 0),
    lambda t: _flip(t, -1),
)


def conventions(reference: str) -> set[str] | None:
    """The case conventions the reference's words all follow (`lower`, `upper`, `capital`:
    each word capitalized, `sentence`: the first word capitalized, the rest lower); None for
    a reference without cased letters."""
    words = [w for w in _WORD.findall(reference) if w.lower() != w.upper()]
    if not words:
        return None

    def capital(w: str) -> bool:
        return w[0].isupper() and w[1:] == w[1:].lower()

    out = set()
    if all(w == w.lower() for w in words):
        out.add("lower")
    if all(w == w.upper() for w in words):
        out.add("upper")
    if all(capital(w) for w in words):
        out.add("capital")
    if capital(words[0]) and all(w == w.lower() for w in words[1:]):
        out.add("sentence")
    return out


def case_is_information(cases: list[tuple[str, str]]) -> bool:
    """Whether the case of the references' letters is part of the task, over (prompt,
    reference) pairs: the references follow no one case convention (each letter's case is
    asked for, or depends on the instance), or a reference is text of the prompt with its case
    changed (the task is the change). A convention every answer follows (hex digits in upper
    case, capitalized names, option labels) is not information: a score may ignore it. A
    reference of several lines follows one per line (a PARALLEL composite's "Part 1: 2" and
    "Part 2: ten": a capitalized label, then a part's lower-case words)."""
    shared: dict[int, set[str]] = {}
    for text, ref in cases:
        ref = ref.strip()
        for k, line in enumerate(ref.splitlines()):
            found = conventions(line)
            if found is None:
                continue
            shared[k] = found & shared.get(k, found)
            if not shared[k]:
                return True
        if sum(c.lower() != c.upper() for c in ref) >= 2 and not token_in(ref, text) and _recased(ref, text):
            return True
    return False


_TOKEN = re.compile(r"[^\W_]+")


def _recased(ref: str, text: str) -> bool:
    """Whether the prompt holds the reference's letters in another case: the reference itself
    case-folded, or one of its words whose letters, folded, are the reference's (rearranged,
    as a reversal leaves them) while their cases are not."""
    if token_in(ref.lower(), text.lower()):
        return True
    folded, cased = sorted(ref.lower()), sorted(ref)
    for t in _TOKEN.findall(text):
        if len(t) == len(ref) and sorted(t.lower()) == folded and sorted(t) != cased:
            return True
    return False


def _case_mutants(ref: str) -> list[str]:
    out: list[str] = []
    for form in CASE_FORMS:
        a = form(ref)
        if a != ref and a not in out:
            out.append(a)
    return out


def random_shape(ref: str, rng: random.Random, instance_values: list[str], k: int) -> list[str]:
    """k random answers of the reference's shape: digit strings of its length, lists of its
    size, strings of its length over its own characters; floats far enough off."""
    shape = shape_of(ref)
    alphabet = sorted(set(ref))  # once: per character it made this quadratic in the reference
    out = []
    for _ in range(4 * k):
        if len(out) >= k:
            break
        if shape.kind == "int":
            body = ref.lstrip("+-")
            lead = rng.choice("123456789") if len(body) > 1 else ""
            cand = ref[: len(ref) - len(body)] + lead + random_string(rng, "0123456789", len(body) - len(lead))
        elif shape.kind == "float":
            x = float(ref)
            d = rng.uniform(0.05, 0.5)
            cand = repr(round(x + rng.choice((-1, 1)) * max(d * abs(x), d), 6))
        elif shape.kind == "list":
            numeric = all(INT.fullmatch(t) for t in shape.tokens)
            pool = [v for v in instance_values if INT.fullmatch(v)] if numeric else list(shape.tokens)
            pool = pool or list(shape.tokens)
            cand = shape.sep.join(rng.choices(pool, k=len(shape.tokens)))
        else:
            cand = random_string(rng, alphabet, len(ref))  # one draw, not one rng call per character
        if cand not in out:
            out.append(cand)
    return out


def _dressed(ref: str, kind: str, wrong: list[str]) -> tuple[list[str], list[str]]:
    """`wrapped`: a wrong value of the reference's shape in each of WRAPPERS' forms, and two in
    exponent notation where they are numbers; `embedded`: the reference written among true
    equations of other values (several answers at once, each stated as a fact)."""
    picks = [w for w in wrong if w.strip() and w != ref][:2]
    wrapped = [wrap(w) for w in picks[:1] for wrap in WRAPPERS]
    if kind in ("int", "float"):
        wrapped += [f"{float(w):.6e}" for w in picks]
        a, b = (picks + [ref, ref])[:2]
        embedded = [f"{a} = {a}, {ref} = {ref}, {b} = {b}", f"{a} + 0 = {a}; {ref}; {b} * 1 = {b}"]
    else:
        embedded = [f"{w} = {w}; {ref}" for w in picks[:1]]
    return wrapped, embedded


def scalars(value: object) -> list[str]:
    """The instance's distinct scalars (short ones, as strings), in the order they appear."""
    out: dict[str, None] = {}
    todo = [value]
    while todo:  # depth first, left to right, without recursion (an instance may nest deep)
        v = todo.pop()
        if isinstance(v, dict):
            todo += reversed(list(v.values()))
        elif isinstance(v, list):
            todo += reversed(v)
        elif isinstance(v, (int, float, str)) and not isinstance(v, bool):
            s = str(v)
            if s.strip() and len(s) <= 200:
                out.setdefault(s)
    return list(out)


def _echoes(instance: dict, prompt: str, sep: str) -> list[str]:
    """The instance's own values as answers: its scalars, each list it holds written as a list,
    the instance's JSON and the prompt itself."""
    held = scalars(instance)
    lists = [
        v for v in instance.values() if isinstance(v, list) and v and all(not isinstance(x, (dict, list)) for x in v)
    ]
    out = held[:16] + [s.join(map(str, v)) for v in lists[:3] for s in {sep, ", "}]
    out += [json.dumps(instance)[:MAX_ECHO_CHARS], prompt[:MAX_ECHO_CHARS]]
    return out


def _same_value(a: str, b: str) -> bool:
    """Whether two answers say the same thing (a format of the reference is not a mutation)."""
    na, nb = normalize(a), normalize(b)
    if na == nb:
        return True
    try:
        x, y = float(na.replace(" ", "")), float(nb.replace(" ", ""))
    except ValueError:
        return False
    return math.isfinite(x) and math.isfinite(y) and math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)


def _reorders(answer: str, shape) -> bool:
    """Whether `answer` is the reference's list items in another order."""
    return shape.kind == "list" and sorted(shape_of(answer).tokens) == sorted(shape.tokens)


def plan(
    cases: list[tuple[dict, str, str]],
    source: str | bytes,
    unique: bool,
    rng: random.Random,
    max_calls: int,
    order_free: bool = False,
) -> list[Mutant]:
    """The mutants of each (instance, prompt, reference) in `cases`, at most `max_calls`,
    spread so every kind is tried on every instance before the literals fill the rest. Not
    `unique`: `order_free` (a list any order of which is the answer) gets every kind but
    reorderings, in full; otherwise (planted) the kinds of SHAPE_FREE count in full and the
    rest at partial pay only (`Mutant.full`)."""
    lits = literals(source)
    case_task = case_is_information([(text, reference) for _, text, reference in cases])
    per_kind: dict[str, list[Mutant]] = {k: [] for k in KINDS}
    for i, (instance, text, reference) in enumerate(cases):
        ref = reference.strip()
        if not ref:
            continue
        ctx = Context.of(instance, text, reference)
        shape = shape_of(ref)
        values = scalars(instance)
        if shape.kind == "int":
            found = _int_mutants(int(ref), ref)
        elif shape.kind == "float":
            found = _float_mutants(float(ref), ref)
        elif shape.kind == "list":
            found = _list_mutants(list(shape.tokens), shape.sep, ctx, values)
            found["nearest"] = _nearest(list(shape.tokens), shape.sep, instance)
        else:
            found = _str_mutants(ref, ctx)
        found["echo"] = _echoes(instance, text, shape.sep)
        found["nonfinite"] = list(NONFINITE) if shape.kind in ("int", "float") else []
        found["case"] = _case_mutants(ref) if case_task else []
        wrong = found.get("neighbour") or found["case"] or found.get("permutation", [])
        found["wrapped"], found["embedded"] = _dressed(ref, shape.kind, wrong)
        found["random_shape"] = random_shape(ref, rng, values, RANDOM_PER_INSTANCE)
        found["literal"] = [v for v in lits if not ctx.holds(v)] if i < 3 else []
        free = order_free and not unique
        for kind, answers in found.items():
            for a in answers:
                if not a or not a.strip() or _same_value(a, ref) or (free and _reorders(a, shape)):
                    continue
                # a planted answer's kinds count in full only where no valid answer can be of
                # that kind; a literal, only of another shape than the reference
                full = unique or free or (kind in SHAPE_FREE and (kind != "literal" or shape_of(a).kind != shape.kind))
                per_kind[kind].append(Mutant(kind, i, a, full))
    ordered = [m for k in KINDS if k != "literal" for m in per_kind[k]] + per_kind["literal"]
    return ordered[:max_calls]


@dataclass
class Finding:
    """The first kind paid above the noise, with one answer that was paid."""

    kind: str
    instances: int
    tried: int
    answer: str


def judge(
    mutants: list[Mutant],
    paid: list[bool],
    min_instances: int,
    full: list[bool] | None = None,
    beats_chance: Callable[[int, int], bool] | None = None,
) -> tuple[dict[str, int], Finding | None]:
    """Paid mutants per kind counted by distinct instances (literals by distinct value). A
    kind is the finding when it is paid in full (`full`, the old acceptance) on `min_instances`
    or more, or paid (`paid`: in full or over the chance line) on `min_instances` or more and
    more often than chance answers are (`beats_chance(paid, tried)`). Without `full` and
    `beats_chance`, paid is acceptance."""
    full = paid if full is None else full
    hits: dict[str, set] = {}
    full_hits: dict[str, set] = {}
    tried: dict[str, int] = {}
    paid_n: dict[str, int] = {}
    example: dict[str, str] = {}
    for m, ok, whole in zip(mutants, paid, full):
        tried[m.kind] = tried.get(m.kind, 0) + 1
        key = (m.answer, m.instance) if m.kind == "literal" else m.instance
        if ok:
            paid_n[m.kind] = paid_n.get(m.kind, 0) + 1
            hits.setdefault(m.kind, set()).add(key)
            example.setdefault(m.kind, m.answer)
        if whole:
            full_hits.setdefault(m.kind, set()).add(key)
    counts = {k: len(v) for k, v in hits.items()}

    def most(keys: set) -> tuple[str, int]:
        """A literal's instances are counted per value: the value paid on the most."""
        by_value: dict[str, int] = {}
        for answer, _ in keys:
            by_value[answer] = by_value.get(answer, 0) + 1
        return max(by_value.items(), key=lambda kv: kv[1], default=("", 0))

    for kind in KINDS:
        if kind == "literal":
            (answer, whole), (answer_paid, n) = most(full_hits.get(kind, set())), most(hits.get(kind, set()))
            if whole >= min_instances:
                return counts, Finding(kind, whole, tried[kind], answer)
            if n >= min_instances and (beats_chance is None or beats_chance(paid_n[kind], tried[kind])):
                return counts, Finding(kind, n, tried[kind], answer_paid)
            continue
        if len(full_hits.get(kind, ())) >= min_instances:
            return counts, Finding(kind, counts[kind], tried[kind], example[kind])
        if counts.get(kind, 0) >= min_instances and (beats_chance is None or beats_chance(paid_n[kind], tried[kind])):
            return counts, Finding(kind, counts[kind], tried[kind], example[kind])
    return counts, None
