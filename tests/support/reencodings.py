"""A family of re-encoded re-skins, generated (issue 42, rule 8): `render(seed, kind)` writes an
environment that poses `seed`'s task with its instance re-encoded, under other keys and a new
prompt, so that neither its code, its prompts nor its instances' layout give it away.

The seed's own generate/solve/score are carried in, renamed (its prompt and generate_from are
dropped: the new file words its own prompt), and wrapped: generate encodes the seed's
instance, solve and score decode it first. `kind` picks the encoding; which field it applies to
is read from the seed's own instance, by shape:

- delta: the first list of integers written as its first item and then differences;
- runs / flat_runs: the first list of integers (or string) as [value, count] runs (one that
  has repeats: without, the pairs are the list zipped with ones, which the old layout signal
  already maps), or the same runs written flat (value, count, value, count, ...);
- join_sep / join_record / join_halves: the first two fields of one kind (two strings, two
  lists) joined into one field: with a "|" between them, as one record {a: .., b: ..}, or two
  lists of one length end to end.

`family()` is every (seed, kind) the seeds' shapes admit.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import random
from pathlib import Path

KINDS = ("delta", "runs", "flat_runs", "join_sep", "join_record", "join_halves")
_WORDS = ("ledger", "tape", "cargo", "stripe", "batch", "reel", "trail", "beacon", "quarry", "lantern")
_STORIES = (
    "A lighthouse keeper's log was compressed before it was radioed ashore.",
    "The museum archive stores every exhibit card in a packed form.",
    "A courier's manifest arrives squeezed into one short message.",
    "The weather balloon transmits its readings in a thrifty format.",
)

_CODECS = {
    "delta": (
        "def _enc(v):\n    return [v[0]] + [b - a for a, b in zip(v, v[1:])] if v else []\n",
        "def _dec(v):\n    total, out = 0, []\n    for d in v:\n        total += d\n        out.append(total)\n"
        "    return out\n",
    ),
    "runs": (
        "def _enc(v):\n    out = []\n    for x in v:\n        if out and out[-1][0] == x:\n            out[-1][1] += 1\n"
        "        else:\n            out.append([x, 1])\n    return out\n",
        "def _dec(v):\n    out = [x for x, k in v for _ in range(k)]\n    return ''.join(out) if _TEXT else out\n",
    ),
    "flat_runs": (
        "def _enc(v):\n    out = []\n    for x in v:\n        if out and out[-2] == x:\n            out[-1] += 1\n"
        "        else:\n            out += [x, 1]\n    return out\n",
        "def _dec(v):\n    out = [v[i] for i in range(0, len(v), 2) for _ in range(v[i + 1])]\n"
        "    return ''.join(out) if _TEXT else out\n",
    ),
    "join_sep": (
        "def _enc(a, b):\n    return a + '|' + b if _TEXT else a + ['|'] + b\n",
        "def _dec(v):\n    if _TEXT:\n        return v.split('|')\n    at = v.index('|')\n    return v[:at], v[at + 1 :]\n",
    ),
    "join_record": (
        "def _enc(a, b):\n    return {_PARTS[0]: a, _PARTS[1]: b}\n",
        "def _dec(v):\n    return v[_PARTS[0]], v[_PARTS[1]]\n",
    ),
    "join_halves": (
        "def _enc(a, b):\n    return a + b\n",
        "def _dec(v):\n    return v[: len(v) // 2], v[len(v) // 2 :]\n",
    ),
}


def _load(seed: Path):
    spec = importlib.util.spec_from_file_location(f"_seed_{seed.stem}", seed)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fields(seed: Path, kind: str) -> list[str] | None:
    """The seed's field(s) `kind` re-encodes, read from its instances' shapes; None if none fits."""
    mod = _load(seed)
    samples = [mod.generate(s, level) for s in range(3) for level in (1, 4, 7)]
    inst = samples[0]

    def ints(k):
        return all(isinstance(i[k], list) and i[k] and all(type(x) is int for x in i[k]) for i in samples)

    def text(k):  # two characters at least: one is a run of its own, which the old checks map
        return all(isinstance(i[k], str) and len(i[k]) >= 2 and "|" not in i[k] for i in samples)

    if kind == "delta":
        return next(([k] for k in inst if ints(k)), None)
    if kind == "runs":  # pairs of a list with no repeats are a zip with a column of ones: the old layouts map that
        repeats = [
            k for k in inst if (ints(k) or text(k)) and any(a == b for i in samples for a, b in zip(i[k], i[k][1:]))
        ]
        return repeats[:1] or None
    if kind == "flat_runs":
        return next(([k] for k in inst if ints(k) or text(k)), None)
    for a, b in zip(list(inst), list(inst)[1:]):
        same = (ints(a) and ints(b)) or (text(a) and text(b))
        if kind == "join_halves":
            same = ints(a) and ints(b) and all(len(i[a]) == len(i[b]) for i in samples)
        if same:
            return [a, b]
    return None


def family(seeds: list[Path]) -> list[tuple[Path, str]]:
    return [(s, k) for s in seeds for k in KINDS if _fields(s, k) is not None]


class _Rename(ast.NodeTransformer):
    NAMES = {"generate": "_base_generate", "solve": "_base_solve", "score": "_base_score", "NAME": "_BASE_NAME"}

    def visit_Name(self, node):
        node.id = self.NAMES.get(node.id, node.id)
        return node

    def visit_FunctionDef(self, node):
        node.name = self.NAMES.get(node.name, node.name)
        self.generic_visit(node)
        return node


def _carried(seed: Path) -> str:
    """The seed's code less its docstring, contract constants, prompt and generate_from, its
    contract functions renamed."""
    tree = ast.parse(seed.read_text())
    body = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue
        if isinstance(node, ast.FunctionDef) and node.name in ("prompt", "generate_from"):
            continue
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in ("TAGS", "ANSWER_TYPE", "INPUT_TYPE") for t in node.targets
        ):
            continue
        body.append(_Rename().visit(node))
    return ast.unparse(ast.Module(body=body, type_ignores=[]))


def render(seed: Path, kind: str, variant: int = 0) -> str:
    """The re-encoded re-skin's source."""
    fields = _fields(seed, kind)
    assert fields is not None, (seed, kind)
    mod = _load(seed)
    rng = random.Random(f"{seed.stem}:{kind}:{variant}")
    keys = list(mod.generate(0, 1))
    words = rng.sample(_WORDS, len(keys) + 2)
    story_keys = {k: f"{w}_{i}" for i, (k, w) in enumerate(zip(keys, words))}
    sample = mod.generate(0, 1)[fields[0]]
    enc, dec = _CODECS[kind]
    name = f"{words[-1]}_{seed.stem}_{kind}"[:60]
    if len(fields) == 1:
        encode_instance = (
            "def generate(seed, difficulty):\n    inst = _base_generate(seed, difficulty)\n"
            "    return {_KEYS[k]: _enc(v) if k == _FIELDS[0] else v for k, v in inst.items()}\n"
        )
        decode_instance = (
            "def _decode(enc):\n    return {k: _dec(enc[s]) if k == _FIELDS[0] else enc[s] for k, s in _KEYS.items()}\n"
        )
    else:
        encode_instance = (
            "def generate(seed, difficulty):\n    inst = _base_generate(seed, difficulty)\n    out = {}\n"
            "    for k, v in inst.items():\n        if k == _FIELDS[0]:\n"
            "            out[_KEYS[k]] = _enc(v, inst[_FIELDS[1]])\n        elif k != _FIELDS[1]:\n"
            "            out[_KEYS[k]] = v\n    return out\n"
        )
        decode_instance = (
            "def _decode(enc):\n    out = {}\n    for k, s in _KEYS.items():\n        if k == _FIELDS[0]:\n"
            "            out[_FIELDS[0]], out[_FIELDS[1]] = _dec(enc[s])\n        elif k != _FIELDS[1]:\n"
            "            out[k] = enc[s]\n    return {k: out[k] for k in _KEYS}\n"
        )
    return f'''"""{rng.choice(_STORIES)} (generated re-encoding: {kind} of {seed.stem})"""

{_carried(seed)}

NAME = {name!r}
TAGS = ["generated", "reencoded"]
ANSWER_TYPE = {mod.ANSWER_TYPE!r}
_KEYS = {story_keys!r}
_FIELDS = {fields!r}
_TEXT = {isinstance(sample, str)!r}
_PARTS = {(words[-2], words[-1])!r}

{enc}

{dec}

{encode_instance}

{decode_instance}

def prompt(instance):
    return (
        {rng.choice(_STORIES)!r}
        + " Unpack the record and work out what its owner asks for.\\n\\nRecord: "
        + __import_json().dumps(instance)
        + "\\n\\nReply with the result alone."
    )


def solve(instance):
    return _base_solve(_decode(instance))


def score(instance, answer):
    return _base_score(_decode(instance), answer)
'''.replace("__import_json()", "json").replace('"""\n\n', '"""\n\nimport json\n', 1)


def write_family(seeds: list[Path], out: Path) -> dict[str, str]:
    """Every family member written to `out`: {file name: its seed's file name}."""
    out.mkdir(parents=True, exist_ok=True)
    names = {}
    for seed, kind in family(seeds):
        path = out / f"zz_{seed.stem}_{kind}.py"
        path.write_text(render(seed, kind))
        names[path.name] = seed.name
    return names


if __name__ == "__main__":  # print one member
    import sys

    print(render(Path(sys.argv[1]), sys.argv[2]))
    print(json.dumps([(s.name, k) for s, k in family(sorted(Path("seeds").glob("*.py")))]))
