"""The scorer fuzzer of `evoenv validate`: structured mutations of the reference that a policy
under GRPO finds by searching (alternatives joined by a delimiter, ranges, supersets, subsets,
permutations, other number formats, signs and neighbour values, echoes of the instance, a
formula, random answers of the reference's shape, non-finite numbers, and every literal the
module holds). A
`score` that accepts one of them on more than noise pays for answers that are not the answer.

Only environments whose answer is unique get the whole set; a planted or order-free one (whose
`score` rightly accepts other valid answers) gets the mutations its declared rule forbids
whatever the answer is: several answers in one, a range, echoes of the whole task, and
literals of another shape than the reference. Everything here is pure: the mutants are
planned from strings and the source's AST, and scored by validate through the sandbox.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import random
from dataclasses import dataclass

from evoenv_cli.checks.leak_solvers import normalize
from evoenv_cli.checks.probes import INT, Context, shape_of
from evoenv_cli.runtime.contract import parse_python

# The order the kinds are judged in: the first over the noise names the verdict.
KINDS = (
    "alternatives",
    "range",
    "random_shape",
    "superset",
    "subset",
    "permutation",
    "number_format",
    "sign",
    "neighbour",
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


def _random_shape(ref: str, rng: random.Random, instance_values: list[str], k: int) -> list[str]:
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
            cand = ref[: len(ref) - len(body)] + "".join(
                rng.choice("123456789" if i == 0 and len(body) > 1 else "0123456789") for i in range(len(body))
            )
        elif shape.kind == "float":
            x = float(ref)
            d = rng.uniform(0.05, 0.5)
            cand = repr(round(x + rng.choice((-1, 1)) * max(d * abs(x), d), 6))
        elif shape.kind == "list":
            numeric = all(INT.fullmatch(t) for t in shape.tokens)
            pool = [v for v in instance_values if INT.fullmatch(v)] if numeric else list(shape.tokens)
            pool = pool or list(shape.tokens)
            cand = shape.sep.join(rng.choice(pool) for _ in shape.tokens)
        else:
            cand = "".join(rng.choice(alphabet) for _ in ref)
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


def _scalars(value: object) -> list[str]:
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
    scalars = _scalars(instance)
    lists = [
        v for v in instance.values() if isinstance(v, list) and v and all(not isinstance(x, (dict, list)) for x in v)
    ]
    out = scalars[:16] + [s.join(map(str, v)) for v in lists[:3] for s in {sep, ", "}]
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


def plan(
    cases: list[tuple[dict, str, str]], source: str | bytes, unique: bool, rng: random.Random, max_calls: int
) -> list[Mutant]:
    """The mutants of each (instance, prompt, reference) in `cases`, at most `max_calls`,
    spread so every kind is tried on every instance before the literals fill the rest."""
    lits = literals(source)
    per_kind: dict[str, list[Mutant]] = {k: [] for k in KINDS}
    for i, (instance, text, reference) in enumerate(cases):
        ref = reference.strip()
        if not ref:
            continue
        ctx = Context.of(instance, text, reference)
        shape = shape_of(ref)
        values = _scalars(instance)
        if shape.kind == "int":
            found = _int_mutants(int(ref), ref)
        elif shape.kind == "float":
            found = _float_mutants(float(ref), ref)
        elif shape.kind == "list":
            found = _list_mutants(list(shape.tokens), shape.sep, ctx, values)
        else:
            found = _str_mutants(ref, ctx)
        found["echo"] = _echoes(instance, text, shape.sep)
        found["nonfinite"] = list(NONFINITE) if shape.kind in ("int", "float") else []
        wrong = found.get("neighbour") or found.get("permutation", [])
        found["wrapped"], found["embedded"] = _dressed(ref, shape.kind, wrong)
        found["random_shape"] = _random_shape(ref, rng, values, RANDOM_PER_INSTANCE)
        found["literal"] = [v for v in lits if not ctx.holds(v)] if i < 3 else []
        for kind, answers in found.items():
            if not unique and kind not in SHAPE_FREE:
                continue
            if not unique and kind == "literal":  # another shape than any valid answer can have
                answers = [a for a in answers if shape_of(a).kind != shape.kind]
            for a in answers:
                if a and a.strip() and not _same_value(a, ref):
                    per_kind[kind].append(Mutant(kind, i, a))
    ordered = [m for k in KINDS if k != "literal" for m in per_kind[k]] + per_kind["literal"]
    return ordered[:max_calls]


@dataclass
class Finding:
    """The first kind accepted above the noise, with one answer that passed."""

    kind: str
    instances: int
    tried: int
    answer: str


def judge(mutants: list[Mutant], accepted: list[bool], min_instances: int) -> tuple[dict[str, int], Finding | None]:
    """Accepted mutants per kind counted by distinct instances (literals by distinct value);
    a kind at `min_instances` or more is the finding."""
    hits: dict[str, set] = {}
    tried: dict[str, int] = {}
    example: dict[str, str] = {}
    for m, ok in zip(mutants, accepted):
        tried[m.kind] = tried.get(m.kind, 0) + 1
        if ok:
            key = (m.answer, m.instance) if m.kind == "literal" else m.instance
            hits.setdefault(m.kind, set()).add(key)
            example.setdefault(m.kind, m.answer)
    counts = {k: len(v) for k, v in hits.items()}
    for kind in KINDS:
        if kind == "literal":
            by_value: dict[str, int] = {}
            for answer, _ in hits.get(kind, ()):
                by_value[answer] = by_value.get(answer, 0) + 1
            best = max(by_value.items(), key=lambda kv: kv[1], default=("", 0))
            if best[1] >= min_instances:
                return counts, Finding(kind, best[1], tried[kind], best[0])
        elif counts.get(kind, 0) >= min_instances:
            return counts, Finding(kind, counts[kind], tried[kind], example[kind])
    return counts, None
