"""The code tokenizer behind the code signature: `code_tokens` turns a source into normalized
tokens, one list per top-level statement, so that a renamed, re-commented or reordered copy
reads the same. The names it keeps as they are (keywords, builtins, stdlib modules and the
public names of their types) are `STABLE_BARE` and `STABLE_ATTRS`."""

from __future__ import annotations

import builtins
import collections
import hashlib
import heapq
import io
import itertools
import json
import keyword
import math
import random
import re
import string
import zlib

from evoenv_cli.runtime import contract

_TOKEN = re.compile(  # one token, after spaces: name, string, line start, operator, number, ...
    r"""[ \t]*+((?:[^\W\d]\w*+(?!['"]))"""
    r"""|(?:[rRbBuUfF]{1,2})?(?:'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'(?:\\.|[^'\\\n])*+'|"(?:\\.|[^"\\\n])*+")"""
    r"|\n[ \t]*+"
    r"|[-+*/%&|^@<>=!:]=|\*\*=?|//=?|->|<<=?|>>=?"
    r"|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?[jJ]?"
    r"|\#[^\n]*+"
    r"|\\\n"
    r"|\w+"
    r"|[^\w\s])"
)
_QUOTES = frozenset("'\"")
_NAME_START = frozenset(string.ascii_letters + "_")
_OPENS, _CLOSES = frozenset("([{"), frozenset(")]}")
CONTRACT_NAMES = contract.CONTRACT_NAMES | {"self", "cls"}


def _stable_names() -> tuple[frozenset[str], frozenset[str]]:
    """Bare names kept as they are (keywords, builtins, the contract's names, stdlib module
    names; a file's own imports are added per file) and attribute names kept after a dot (the
    public names of builtin types and stdlib modules and classes)."""
    modules = (random, math, re, collections, itertools, heapq, string, json, hashlib, zlib)
    bare = set(keyword.kwlist) | set(dir(builtins)) - {"_"} | CONTRACT_NAMES
    # the module names every environment file is written with; not the contract's whole
    # allow-list, whose rarer names (numbers, abc) are common variable names elsewhere
    bare |= {m.__name__ for m in modules} | {
        "functools",
        "bisect",
        "fractions",
        "decimal",
        "statistics",
        "dataclasses",
        "typing",
        "operator",
        "copy",
        "enum",
        "textwrap",
        "cmath",
        "array",
    }
    attrs: set[str] = set()
    for obj in (
        *modules,
        list,
        dict,
        set,
        frozenset,
        str,
        bytes,
        int,
        float,
        tuple,
        random.Random,
        collections.deque,
        collections.Counter,
        re.Pattern,
        re.Match,
        io.StringIO,
    ):
        attrs |= {n for n in dir(obj) if not n.startswith("__")}
    return frozenset(bare), frozenset(attrs)


STABLE_BARE, STABLE_ATTRS = _stable_names()
_IMPORT = re.compile(r"import[ \t]+\(?([^\n#)]*)")  # `import a, b`, `from m import (a, b` (a \b would be slow)


def _imported_names(text: str) -> set[str]:
    names = set()
    for m in _IMPORT.finditer(text):
        for part in m.group(1).split(","):
            words = part.split()
            if words:
                names.add(words[0].split(".")[0])  # `import a as b`: the alias b is renamed
    return names


RECENCY_CAP = 4  # identifiers remembered per statement when naming by recency


def code_tokens(source: str | bytes) -> list[list[str]]:
    """The source as normalized tokens, one list per top-level statement.

    Comments, docstrings (a statement that is only a string), parentheses, trailing commas and
    layout vanish; strings become `S` (adjacent ones merge), numbers `N`; indentation becomes
    `>`/`<`; logical lines are separated by `;`. Keywords, builtins, imported modules and the
    contract's names stay, and so do attribute names of builtin and stdlib types; every other
    identifier is named by recency: `v0` if it is the identifier used last, `v1` if one other
    came in between, ... `vn` when new or not among the last few (`RECENCY_CAP`). So renaming
    changes nothing, a reordered function keeps its statement, and an added line disturbs only
    the names around it (numbering by first appearance would renumber the rest of the function).
    """
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    stable = STABLE_BARE | _imported_names(text)
    attrs, cap, recents = STABLE_ATTRS, RECENCY_CAP, _RECENT
    name_start, opens, closes, quotes = _NAME_START, _OPENS, _CLOSES, _QUOTES
    chunks: list[list[str]] = []
    cur: list[str] = []
    recent: list[str] = []  # the last identifiers used, most recent last
    depth = 0
    indents = [0]
    line_indent = 0  # >= 0 at a logical line's start, until its first token; else -1
    prev = ""
    line_start = 0  # where the current logical line begins in `cur`
    for tok in _TOKEN.findall(text):
        c = tok[0]
        if c == "(":  # parentheses are dropped (optional ones are a matter of style); depth kept
            depth += 1
            continue
        if c == ")":
            if depth:
                depth -= 1
            if prev == ",":
                cur.pop()  # a trailing comma
                prev = ""
            continue
        if c == "\n":
            if not depth:
                line_indent = len(tok.expandtabs(8)) - 1 if "\t" in tok else len(tok) - 1
            continue
        if c == "#" or c == "\\":
            continue
        if line_indent >= 0:  # the first token of a logical line
            if len(cur) - line_start == 1 and cur[-1] == "S":
                cur.pop()  # the last line was only a string: a docstring or a bare literal
            if line_indent == 0:
                if cur:
                    chunks.append(cur)
                cur, recent, indents = [], [], [0]
            elif cur:
                if cur[-1] != ";" and cur[-1] != ">":  # (after a dropped docstring it is there)
                    cur.append(";")
                while line_indent < indents[-1]:
                    indents.pop()
                    cur.append("<")
                if line_indent > indents[-1]:
                    indents.append(line_indent)
                    cur.append(">")
            line_start = len(cur)
            line_indent = -1
        if c in name_start or c > "\x7f":
            if tok[-1] in quotes:
                if prev == "S":
                    continue
                norm = "S"  # a prefixed string: f"...", rb'...'
            elif tok in stable if prev != "." else tok in attrs:
                norm = tok
            elif tok in recent:
                k = len(recent) - 1 - recent.index(tok)
                norm = recents[k]
                if k:
                    recent.remove(tok)
                    recent.append(tok)
            else:
                norm = "vn"
                if len(recent) >= cap:
                    del recent[0]
                recent.append(tok)
        elif c in quotes:
            if prev == "S":
                continue  # implicit concatenation: adjacent strings are one
            norm = "S"
        elif c in opens:
            depth += 1
            norm = tok
        elif c in closes:
            if depth:
                depth -= 1
            if prev == ",":
                cur.pop()  # a trailing comma
            norm = tok
        elif c.isdigit() or (c == "." and len(tok) > 1):
            norm = "N"
        else:
            norm = tok
        cur.append(norm)
        prev = norm
    if len(cur) - line_start == 1 and cur and cur[-1] == "S":
        cur.pop()
    if cur:
        chunks.append(cur)
    return chunks


_RECENT = [f"v{k}" for k in range(RECENCY_CAP)]
