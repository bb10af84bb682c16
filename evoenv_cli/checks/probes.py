"""Probe answers for `evoenv validate`: answers that are certainly wrong under a prompt's own
rules, built from the reference's apparent shape (whatever ANSWER_TYPE declares), plus the
encodings a prompt could hide the reference in and the constants a `score` compares against.

A probe must be wrong for every valid environment, or a good "hard to solve, easy to check"
environment is rejected: a reordered list is a valid answer to "any k-clique", so order is
measured apart (`reordered`) and never counted as a miss. Everything here is pure (strings and
the AST of the source in, strings out); nothing of the environment runs in this process.
"""

from __future__ import annotations

import ast
import base64
import functools
import json
import random
import re
from dataclasses import dataclass

from evoenv_cli.runtime.contract import parse_python

# a number answer is at most this many digits: int() of a longer one is refused by Python
# (sys.int_info.default_max_str_digits) and quadratic below that, so a longer run of digits is a string
MAX_NUMBER_DIGITS = 4000
INT = re.compile(rf"[+-]?\d{{1,{MAX_NUMBER_DIGITS}}}")
FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
_SPLIT = re.compile(r"[,\s]+")
_NUMBERS = re.compile(r"\d+")
_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
OUTSIDE_CHARS = "~@^`|QZJX§¤"
OUTSIDE_WORDS = ("Z", "Q", "J", "X", "zq", "qz", "zzq", "qqz", "zqzq")
DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


@dataclass(frozen=True)
class Shape:
    """What a reference looks like: `kind` is int | float | list | str; `tokens` the list's
    items (lists only) and `sep` the separator they were written with."""

    kind: str
    tokens: tuple[str, ...] = ()
    sep: str = " "


def shape_of(reference: str) -> Shape:
    ref = reference.strip()
    tokens = tuple(t for t in _SPLIT.split(ref) if t)
    if len(tokens) > 1:
        sep = ", " if ", " in ref else ("," if "," in ref else ("\n" if "\n" in ref else " "))
        return Shape("list", tokens, sep)
    if INT.fullmatch(ref):
        return Shape("int")
    if len(ref) <= MAX_NUMBER_DIGITS and FLOAT.fullmatch(ref):
        return Shape("float")
    return Shape("str")


@dataclass(frozen=True)
class Context:
    """What an instance holds (its JSON, its prompt and its reference), to pick values that
    are certainly outside it."""

    text: str
    numbers: frozenset[int]
    words: frozenset[str]

    @classmethod
    def of(cls, instance: dict, prompt: str, reference: str) -> Context:
        text = json.dumps(instance) + "\n" + prompt + "\n" + reference
        return cls(
            text, frozenset(int(n) for n in _NUMBERS.findall(text) if len(n) <= 18), frozenset(_WORDS.findall(text))
        )

    def holds(self, value: str) -> bool:
        """Whether `value` is one of the instance's numbers or occurs in its text."""
        v = value.strip()
        return int(v) in self.numbers if INT.fullmatch(v) and len(v) <= 18 else value in self.text

    def outside_int(self) -> int:
        n = 0
        while n in self.numbers:
            n += 1
        return n

    def outside_word(self) -> str:
        return next((w for w in OUTSIDE_WORDS if w not in self.words), "zq" * 8)

    def outside_char(self) -> str:
        return next((c for c in OUTSIDE_CHARS if c not in self.text), "\u2603")

    def outside_token(self, like: str) -> str:
        return str(self.outside_int()) if INT.fullmatch(like) else self.outside_word()


def whole_token_in(needle: str, haystack: str) -> bool:
    """Whether `needle` (stripped) occurs in `haystack` with no letter or digit either side."""
    needle = needle.strip()
    return bool(needle) and token_in(needle, haystack)


def _declared_numeric(answer_type: str | None) -> bool:
    return answer_type in (None, "int", "float")


NEAR_MISS_KINDS = ("number", "changed", "duplicate", "extra", "missing")


def near_misses(reference: str, ctx: Context, answer_type: str | None = None) -> list[tuple[str, str]]:
    """(kind, answer) for answers one small step from the reference that no valid answer can
    be: `number` one off (when the answer is a number); `changed`, a list item changed to a
    value outside the instance (or a character outside its alphabet put in); `duplicate`, an
    item repeated; `extra`, one item (or character) too many; `missing`, one too few. A
    string of digits declared `str` (a bit string) is treated as a string: another bit
    string may be valid too, so it gets no `number` miss."""
    ref = reference.strip()
    if not ref:
        return []
    shape = shape_of(ref)
    out: list[tuple[str, str]] = []
    if shape.kind == "int" and _declared_numeric(answer_type):
        n = int(ref)
        out += [("number", str(n + 1)), ("number", str(n - 1))]
    elif shape.kind == "float" and not (answer_type or "").startswith("list"):
        x = float(ref)
        out += [("number", repr(x + 1.0)), ("number", repr(x - 1.0))]
    elif shape.kind == "list":
        tokens, sep = list(shape.tokens), shape.sep
        mid = len(tokens) // 2
        out += [
            ("changed", sep.join(tokens[:mid] + [ctx.outside_token(tokens[mid])] + tokens[mid + 1 :])),
            ("duplicate", sep.join(tokens + [tokens[0]])),
            ("extra", sep.join(tokens + [ctx.outside_token(tokens[-1])])),
            ("missing", sep.join(tokens[:-1])),
        ]
    else:
        if (answer_type or "").startswith("list"):  # a one-item list
            out += [("duplicate", f"{ref} {ref}"), ("extra", f"{ref} {ctx.outside_token(ref)}")]
        mid = len(ref) // 2
        bad = ctx.outside_char()
        out += [("changed", ref[:mid] + bad + ref[mid + 1 :]), ("extra", ref + bad)]
        if len(ref) > 1:
            out.append(("missing", ref[:-1]))
    seen, kept = set(), []
    for kind, answer in out:
        if answer.strip() and answer.strip() != ref and answer not in seen:
            seen.add(answer)
            kept.append((kind, answer))
    return kept


def reordered(reference: str) -> str | None:
    """The reference's items in another order (reversed, or rotated when reversing changes
    nothing); None for a single item or items all alike. Scoring it measures whether the
    environment accepts any order (a fact about it, not a defect)."""
    shape = shape_of(reference)
    if shape.kind != "list" or len(set(shape.tokens)) < 2:
        return None
    tokens = list(shape.tokens)
    other = tokens[::-1] if tokens[::-1] != tokens else tokens[1:] + tokens[:1]
    return shape.sep.join(other)


@functools.lru_cache(maxsize=256)
def _byte_table(chars: tuple[str, ...]) -> dict[int, str | None]:
    """random_string's byte -> character table: a byte past the largest multiple of the
    alphabet's size maps to None (str.translate deletes it)."""
    m = len(chars)
    limit = 256 - 256 % m
    return {b: (chars[b % m] if b < limit else None) for b in range(256)}


def random_string(rng: random.Random, alphabet: str | list[str], n: int) -> str:
    """n characters drawn uniformly from `alphabet`, from `rng`. A reference at the caps is
    100,000 characters and the fuzzer draws dozens of them: one `rng.choice` per character was
    most of such an environment's judgement. Here random bytes are mapped onto the alphabet
    in one `str.translate`, the bytes past the largest multiple of its size deleted, so every
    character stays equally likely."""
    chars = tuple(alphabet)
    m = len(chars)
    if m > 256 or n <= 0:
        return "".join(rng.choices(chars, k=max(0, n)))
    limit = 256 - 256 % m
    table = _byte_table(chars)
    out = ""
    while len(out) < n:
        want = n - len(out)
        out += rng.randbytes(want * 256 // limit + 16).decode("latin-1").translate(table)
    return out[:n]


def random_shaped(reference: str, ctx: Context, rng: random.Random, k: int = 3) -> list[str]:
    """Random answers of the reference's apparent shape, never the reference itself nor a
    reordering of its items: numbers near it (within 0.5% and within 2%, or within 2) and one
    of its digit count, lists of its length from the instance's values in its range, strings of
    its length from its own characters."""
    ref = reference.strip()
    if not ref:
        return []
    shape = shape_of(ref)
    out: list[str] = []
    for _ in range(8 * k):
        if len(out) >= k:
            break
        if shape.kind == "int":
            n = int(ref)
            if len(out) >= 2:
                digits = len(ref.lstrip("+-"))
                low = 10 ** (digits - 1) if digits > 1 else 0
                cand = str(rng.randint(low, 10**digits - 1) * (-1 if n < 0 else 1))
            else:  # within 0.5%, then within 2%: a tolerance a declared type hides shows here
                width = max(2, abs(n) // (200 if not out else 50))
                cand = str(n + rng.choice((-1, 1)) * rng.randint(1, width))
        elif shape.kind == "float":
            x = float(ref)
            delta = max(abs(x) * rng.uniform(0.002, 0.02), rng.uniform(0.02, 0.1))
            cand = repr(round(x + rng.choice((-1, 1)) * delta, 6))
        elif shape.kind == "list":
            tokens = list(shape.tokens)
            if all(INT.fullmatch(t) for t in tokens):
                values = [int(t) for t in tokens]
                low, high = min(values), max(values)
                pool = sorted({v for v in ctx.numbers if low <= v <= high} | set(values))
                if len(pool) < 2:
                    pool = list(range(low - 2, high + 3))
                items = [str(v) for v in rng.choices(pool, k=len(tokens))]
            else:
                items = rng.choices(tokens, k=len(tokens))
            if sorted(items) == sorted(tokens):
                continue
            cand = shape.sep.join(items)
        else:
            chars = sorted(set(ref))
            if len(chars) < 2:
                chars.append(ctx.outside_char())
            cand = random_string(rng, chars, len(ref))
        if cand.strip() != ref and cand not in out:
            out.append(cand)
    return out


def flood(reference: str, ctx: Context, others: list[str]) -> list[str]:
    """Many candidates in one answer, the reference among them: a score that accepts any
    answer containing the right one pays a response that lists everything."""
    ref = reference.strip()
    if not ref:
        return []
    shape = shape_of(ref)
    # Wrong candidates of the reference's own form first and last, the reference in between:
    # a score that reads the first (or last) answer it finds is not fooled, one that looks for
    # the reference anywhere is.
    wrong = [o for o in others if o.strip() != ref][:4] + [a for _, a in near_misses(ref, ctx)]
    lines = wrong[:1] + [ref] + wrong[1:] if wrong else [ref]
    out = ["\n".join(lines), " or ".join(lines)] if wrong else []
    if shape.kind == "int":
        n = int(ref)
        values = list(range(0, 1001))
        if not 0 <= n <= 1000:
            values.append(n)
        out.append(" ".join(map(str, values)))
    elif shape.kind == "list":
        held = set(shape.tokens)
        extra = (
            [t for t in map(str, sorted(ctx.numbers)[:1000]) if t not in held]
            if all(INT.fullmatch(t) for t in shape.tokens)
            else list(dict.fromkeys(shape.tokens)) * 2
        )
        out.append(shape.sep.join(list(shape.tokens) + extra))
    return [f for f in out if f.strip() != ref]


def expression(reference: str) -> str | None:
    """The reference written as a Python expression: only a score that evaluates (or
    computes) the response accepts it, and a response it evaluates can pay itself."""
    ref = reference.strip()
    shape = shape_of(ref)
    if shape.kind == "int":
        n = int(ref)
        return f"{n - 7} + 7"
    if shape.kind == "float":
        return f"{float(ref) - 1.5!r} + 1.5"
    if shape.kind == "str" and len(ref) >= 2 and "'" not in ref:
        k = len(ref) // 2
        return f"'{ref[:k]}' + '{ref[k:]}'"
    return None


# -- encodings a prompt might hide the reference in -----------------------------------------------------
def encodings(reference: str) -> dict[str, str]:
    """{encoding: the reference so encoded}, for the encodings worth looking for: reversed,
    base64, hex, digits spelled out. One that is too short or equals the reference is left out
    (a plain copy is the plain leak check's business)."""
    ref = reference.strip()
    out: dict[str, str] = {}
    if len(ref) >= 3 and ref[::-1] != ref:
        out["reversed"] = ref[::-1]
    shape = shape_of(ref)
    if shape.kind == "list" and len(set(shape.tokens)) > 1:
        out["reversed_items"] = shape.sep.join(shape.tokens[::-1])
    if len(ref) >= 3:
        out["base64"] = base64.b64encode(ref.encode()).decode().rstrip("=")
    if shape.kind == "int" and abs(int(ref)) >= 10:
        out["hex"] = format(abs(int(ref)), "x")
    elif len(ref) >= 2:
        out["hex"] = ref.encode().hex()
    digits = re.sub(r"\D", "", ref)
    if digits and len(digits) >= 1 and shape.kind in ("int", "list"):
        out["spelled_out"] = " ".join(DIGIT_WORDS[int(d)] for d in digits)
    return {k: v for k, v in out.items() if len(v) >= 3 and v != ref}


def encoded_in(kind: str, encoded: str, text: str) -> bool:
    if kind == "spelled_out":  # the words in a row (one substring search: linear), or run together
        lowered = text.lower()
        words = " ".join(re.findall(r"[a-z]+", lowered))
        want = encoded.split()
        return f" {' '.join(want)} " in f" {words} " or "".join(want) in lowered.replace(" ", "").replace("-", "")
    if kind == "base64":
        return encoded in text
    # a substring search first (linear): the bounded regex tries the needle at every position
    if kind == "hex":
        return encoded.lower() in text.lower() and (
            re.search(rf"(?<![0-9A-Fa-f]){re.escape(encoded)}(?![0-9A-Fa-f])", text, re.IGNORECASE) is not None
        )
    return token_in(encoded, text)


def token_in(needle: str, text: str) -> bool:
    """Whether `needle` occurs in `text` with no letter or digit right before or after it."""
    return needle in text and re.search(rf"(?<![A-Za-z0-9]){re.escape(needle)}(?![A-Za-z0-9])", text) is not None


# -- constants score compares against (static, on the source) --------------------------------------------
@dataclass
class ScoreConstants:
    """The literals `score` (and every module-level function it reaches) compares an answer
    against, and whether it compares a digest with a hex literal (a backdoor no probe finds)."""

    values: list[str]
    digest_compare: str | None = None


_HEX_DIGEST = re.compile(r"[0-9a-fA-F]{16,}")


def score_constants(source: str | bytes, cap: int = 64) -> ScoreConstants:
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    try:
        tree = parse_python(text)
    except SyntaxError:
        return ScoreConstants([])
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    literals: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                literals[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                pass
    reached, todo = set(), ["score"]
    while todo:
        name = todo.pop()
        if name in reached or name not in functions:
            continue
        reached.add(name)
        for sub in ast.walk(functions[name]):
            if isinstance(sub, ast.Name) and sub.id in functions:
                todo.append(sub.id)
    found: list[object] = []
    uses_hash = False

    def take(node: ast.AST) -> None:
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, (str, bytes, int, float))
            and not isinstance(node.value, bool)
        ):
            found.append(node.value)
        elif isinstance(node, ast.Name) and node.id in literals:
            value = literals[node.id]
            items = value if isinstance(value, (list, tuple, set, frozenset)) else [value]
            found.extend(v for v in items if isinstance(v, (str, bytes, int, float)) and not isinstance(v, bool))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            for elt in node.elts:
                take(elt)

    for name in reached:
        for sub in ast.walk(functions[name]):
            if isinstance(sub, ast.Compare):
                for operand in [sub.left, *sub.comparators]:
                    take(operand)
            elif (
                isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Attribute)
                and sub.func.attr in ("startswith", "endswith", "count", "find", "index")
            ):
                for arg in sub.args:
                    take(arg)
            elif isinstance(sub, ast.MatchValue):
                take(sub.value)
            elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "hashlib":
                uses_hash = True
    values: dict[str, None] = {}
    digest = None
    for v in found:
        s = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
        if uses_hash and _HEX_DIGEST.fullmatch(s.strip()):
            digest = digest or s
        if s.strip():
            values.setdefault(s)
    return ScoreConstants(list(values)[:cap], digest)
