"""`evoenv compose`: RACES — new verifiable environments from old ones, with no LLM.

Four operators fuse parts into one standalone environment file (the parts' sources embedded,
no import of evoenv), which is then judged by the execution contract like any candidate:

- SEQUENTIAL(A, B): A's answer feeds B (A's ANSWER_TYPE is B's INPUT_TYPE). B's instance is
  `B.generate_from(A's reference)`; B's prompt is shown with that value replaced by X, "the
  answer to part 1", so the solver must solve A to know B. The answer is B's.
- PARALLEL(A, B): both tasks in one prompt; the answer gives both parts on two lines; all
  parts right scores 1.0 (optionally the mean of the parts).
- SORT(A, n): n instances of A (numeric answers), labelled; answer: labels by increasing answer.
- SELECT(A, n): n instances of A; answer: the label of the largest (or smallest) answer.

Difficulty: a composite at level d runs each part at level ceil(d / 2), so d = 10 asks for
two (or n) level-5 solves. Parts whose answers are not unique (tagged "planted") never feed
a SEQUENTIAL step and are never sorted or selected: another valid answer would change the task.
A part whose list answer may come in any order (`order_free`, measured by validate) is never
sorted or selected either, and feeds a SEQUENTIAL step in a canonical form, its items in
increasing order, which part 2's prompt says is what X stands for.
"""

from __future__ import annotations

import ast
import hashlib
import random
import textwrap
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from evoenv_cli import artifacts
from evoenv_cli.config import ComposeConfig, RuntimeConfig, ValidateConfig, to_dict
from evoenv_cli.runtime.contract import check_source, parse_python
from evoenv_cli.runtime.pool import Call, EnvFile, EnvLoadError, SandboxPool, env_id_of
from evoenv_cli.runtime.session import Runtime, shared
from evoenv_cli.stages import probes, validate
from evoenv_cli.stages.admission import AdmissionLog, Summary, Verdict

OPERATORS = ("sequential", "parallel", "sort", "select")
NUMERIC = ("int", "float")
EXPORTS = ("NAME", "ANSWER_TYPE", "INPUT_TYPE", "TAGS", "generate", "generate_from", "prompt",
           "solve", "score")


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
class Plan:
    operator: str
    parts: list[Part]
    n: int = 2
    direction: str = "max"  # SELECT only

    @property
    def depth(self) -> int:
        return 1 + max(p.depth for p in self.parts)

    def name(self) -> str:
        names = "__".join(p.name for p in self.parts)
        head = {"sequential": "seq", "parallel": "par", "sort": f"sort{self.n}",
                "select": f"select{self.n}_{self.direction}"}[self.operator]
        full = f"{head}__{names}"
        if len(full) <= 64:
            return full
        digest = hashlib.sha256(full.encode()).hexdigest()[:8]
        return f"{full[:55]}_{digest}"


# -- embedding a part's source -----------------------------------------------------------------------
class _GlobalToNonlocal(ast.NodeTransformer):
    """Inside a wrapping function a part's `global x` must become `nonlocal x`."""

    def __init__(self):
        self.names: set[str] = set()
        self.depth = 0

    def _scope(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _scope

    def visit_ClassDef(self, node):
        return self._scope(node)

    def visit_Global(self, node):
        self.names.update(node.names)
        if self.depth == 0:
            return None  # `global` at a module's top level means nothing
        return ast.copy_location(ast.Nonlocal(names=node.names), node)


def embed(source: str, function: str) -> str:
    """A part's module as a function returning its public names: top-level code runs once when
    the composite is imported, and each part keeps its own namespace."""
    tree = parse_python(source)
    body = [n for n in tree.body
            if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
    fixer = _GlobalToNonlocal()
    body = [fixer.visit(n) for n in body]
    body = [n for n in body if n is not None]
    defined = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(t.id for t in targets if isinstance(t, ast.Name))
    pre = [parse_python(f"{name} = None").body[0] for name in sorted(fixer.names)]
    exported = ", ".join(f"{name!r}: {name}" for name in EXPORTS if name in defined)
    inner = ast.unparse(ast.Module(body=pre + body, type_ignores=[]))
    return (f"def {function}():\n" + textwrap.indent(inner, "    ")
            + f"\n    return {{{exported}}}\n")


# -- the composite's own code ------------------------------------------------------------------------
COMMON = '''
def _level(difficulty):
    """Each part runs at ceil(d / 2) of the composite's level d."""
    d = max(1, min(10, int(difficulty)))
    return (d + 1) // 2


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
    for k in range(_TRIES):
        a = make_a(_sub_seed(seed, k))
        b, masked = _chain(a, seed, level)
        if masked is not None:
            return {"a": a, "b": b, "seed": seed, "level": level}
    raise ValueError(f"part {_B['NAME']} never shows part {_A['NAME']}'s answer as is "
                     f"in {_TRIES} tries: the two do not chain")


def generate(seed, difficulty):
    level = _level(difficulty)
    return _first_chaining(lambda s: _call(_A, "generate", s, level), seed, level)


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

SEQUENTIAL_FROM = '''

def generate_from(value, seed, difficulty):
    level = _level(difficulty)
    return _first_chaining(lambda s: _call(_A, "generate_from", value, s, level), seed, level)
'''

PARALLEL = '''
_PART_LINE = re.compile(r"[ \\t]*part[ \\t]*(\\d+)[ \\t]*:[ \\t]*(.*?)[ \\t]*", re.IGNORECASE)


def generate(seed, difficulty):
    level = _level(difficulty)
    return {"parts": [_call(p, "generate", _sub_seed(seed, k), level) for k, p in enumerate(_PARTS)]}


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
'''

LABELLED = '''
_LABELS = "ABCDEFGH"[:N]


def generate(seed, difficulty):
    level = _level(difficulty)
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
'''

SORT = '''

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
'''

SELECT = '''

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
'''


def _doc_line(part: Part, meta_doc: str | None) -> str:
    first = (meta_doc or "").strip().split("\n\n")[0]
    first = " ".join(first.split())
    return f"{part.name}: {first[:300]}" if first else part.name


def render(plan: Plan, docs: dict[str, str | None], partial_credit: bool = False) -> str:
    """The composite's standalone source."""
    op, parts, name = plan.operator, plan.parts, plan.name()
    if op == "sequential":
        what = f"SEQUENTIAL composition: the answer to {parts[0].name} feeds {parts[1].name}."
    elif op == "parallel":
        what = f"PARALLEL composition: {' and '.join(p.name for p in parts)} in one prompt."
    elif op == "sort":
        what = f"SORT composition: {plan.n} instances of {parts[0].name}, ordered by their answers."
    else:
        what = (f"SELECT composition: which of {plan.n} instances of {parts[0].name} has the "
                f"{'largest' if plan.direction == 'max' else 'smallest'} answer.")
    doc = "\n".join([what, "Built by evoenv compose (RACES); each part keeps its own asymmetry:", ""]
                    + [f"- {_doc_line(p, docs.get(p.env.env_id))}" for p in parts])
    doc = doc.replace("\\", "\\\\").replace('"""', "'''")
    unique = list(dict.fromkeys(p.env.env_id for p in parts))
    sources = {eid: next(p for p in parts if p.env.env_id == eid).env.source.decode("utf-8") for eid in unique}
    tags = sorted({"composite", op} | ({"planted"} if any("planted" in p.tags for p in parts) else set())
                  | ({"multi-part"} if op == "parallel" else set()))
    if op == "sequential":
        answer_type, input_type = parts[1].answer_type, parts[0].input_type
    elif op == "sort":
        answer_type, input_type = "list[str]", None
    elif op == "select":
        answer_type, input_type = "str", None
    else:
        answer_type, input_type = "str", None
    lines = [f'"""{doc}\n"""', "", "from __future__ import annotations", "", "import re", "",
             f"NAME = {name!r}", f"TAGS = {tags!r}", f"ANSWER_TYPE = {answer_type!r}"]
    if input_type:
        lines.append(f"INPUT_TYPE = {input_type!r}")
    lines += [f"OPERATOR = {op!r}", f"PARENTS = {[p.name for p in parts]!r}", ""]
    for k, eid in enumerate(unique):
        lines += ["", embed(sources[eid], f"_part_{k}")]
    index = {eid: k for k, eid in enumerate(unique)}
    lines.append("")
    if op in ("sequential",):
        lines += [f"_A = _part_{index[parts[0].env.env_id]}()", f"_B = _part_{index[parts[1].env.env_id]}()",
                  f"_A_TYPE = {parts[0].answer_type!r}", f"_A_ORDER_FREE = {parts[0].order_free!r}",
                  f"_X_NOTE = {_x_note(parts[0])!r}"]
    elif op == "parallel":
        lines += [f"_PARTS = [{', '.join(f'_part_{index[p.env.env_id]}()' for p in parts)}]",
                  f"PARTIAL_CREDIT = {partial_credit!r}"]
    else:
        lines += [f"_A = _part_{index[parts[0].env.env_id]}()", f"N = {plan.n}"]
        if op == "select":
            lines.append(f"LARGEST = {plan.direction == 'max'!r}")
    body = COMMON
    if op == "sequential":
        body += SEQUENTIAL + (SEQUENTIAL_FROM if input_type else "")
    elif op == "parallel":
        body += PARALLEL
    else:
        body += LABELLED + (SORT if op == "sort" else SELECT)
    return "\n".join(lines) + "\n" + body


def _x_note(part: Part) -> str:
    if not part.answer_type.startswith("list"):
        return ""
    if part.order_free:
        return ", the list of its items in increasing order, though part 1 accepts any order"
    return ", the list of its items in order"


# -- choosing what to compose ------------------------------------------------------------------------
def candidates(parts: list[Part], ops: tuple[str, ...], rng: random.Random, min_depth: int) -> dict[str, list[Plan]]:
    """Every type-compatible plan whose deepest part has depth min_depth - 1, by operator."""
    out: dict[str, list[Plan]] = {op: [] for op in ops}

    def deep_enough(plan: Plan) -> bool:
        return plan.depth == min_depth

    for a in parts:
        for b in parts:
            if a.env.env_id == b.env.env_id:
                continue
            if "sequential" in ops and a.unique_answer and a.answer_type and b.input_type == a.answer_type:
                plan = Plan("sequential", [a, b])
                if deep_enough(plan):
                    out["sequential"].append(plan)
            flat = "parallel" not in a.tags and "parallel" not in b.tags  # no "Part 1:" inside a part
            if "parallel" in ops and a.name < b.name and flat:
                plan = Plan("parallel", [a, b])
                if deep_enough(plan):
                    out["parallel"].append(plan)
        if a.numeric:
            for op in ("sort", "select"):
                if op in ops:
                    plan = Plan(op, [a], n=rng.choice((3, 4)), direction=rng.choice(("max", "min")))
                    if deep_enough(plan):
                        out[op].append(plan)
    for plans in out.values():
        rng.shuffle(plans)
    return out


def round_robin(by_op: dict[str, list[Plan]]) -> list[Plan]:
    """Interleave operators so every one is represented in a small sample."""
    order, queues = [], [list(v) for v in by_op.values()]
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop(0))
    return order


def measure_order_free(env: EnvFile, pool: SandboxPool, levels: tuple[int, ...] = (1, 3, 5, 7)) -> bool:
    """Whether a list answer is accepted with its items reordered on most of a few instances
    (what validate measures, for a part whose index record does not say)."""
    generated = pool.run(env, [Call.generate(seed, d) for d in levels for seed in (0, 1)], stop_on_failure=True)
    if not all(r.ok for r in generated):
        return False
    refs = pool.run(env, [Call.solve(r.value) for r in generated], stop_on_failure=True)
    if not all(r.ok for r in refs):
        return False
    pairs = [(g.value, moved) for g, r in zip(generated, refs) if (moved := probes.reordered(r.value)) is not None]
    if not pairs:
        return False
    scores = pool.run(env, [Call.score(inst, moved) for inst, moved in pairs])
    return sum(1 for r in scores if r.ok and r.value >= 1.0) / len(pairs) >= 0.5


def describe_parts(library: artifacts.EnvLibrary, pool: SandboxPool) -> tuple[list[Part], dict, list[str]]:
    parts, docs, skipped = [], {}, [f"{r.file}: {r.reason}" for r in library.refused]
    for env in library.files:
        report = check_source(env.source)
        if not report.ok:
            skipped.append(f"{env.path.name}: {report.reason}")
            continue
        try:
            meta = pool.describe(env)
        except EnvLoadError as exc:
            skipped.append(f"{env.path.name}: {exc}")
            continue
        record = library.index.get(env.env_id, {})
        answer_type = meta.get("ANSWER_TYPE")
        order_free = record.get("order_free")
        if not isinstance(order_free, bool):
            order_free = bool(answer_type and answer_type.startswith("list")) and measure_order_free(env, pool)
        parts.append(Part(env, meta.get("NAME") or env.name, answer_type, meta.get("INPUT_TYPE"),
                          list(meta.get("TAGS") or []), int(record.get("depth", 0) or 0),
                          list(record.get("parents") or []), order_free))
        docs[env.env_id] = meta.get("doc")
    return parts, docs, skipped


def run(library: artifacts.EnvLibrary, cfg: ComposeConfig, vcfg: ValidateConfig, runtime: RuntimeConfig,
        out: Path, on_verdict: Callable[[Verdict], None] | None = None,
        session: Runtime | None = None) -> Summary:
    """Sample up to cfg.n composites (split over depths 1..max_depth), judge each with the
    execution contract, and write the admitted ones; verdicts already in `out` are reused."""
    rng = random.Random(f"compose:{cfg.seed}")
    made: list[EnvFile] = []
    lineage: dict[str, dict] = {}
    with shared(runtime, session) as rt, AdmissionLog(out, None) as log:
        pool, fresh = rt.pool, rt.fresh
        parts, docs, skipped = describe_parts(library, pool)
        for depth, want in enumerate(_split(cfg.n, cfg.max_depth), start=1):
            plans = round_robin(candidates(parts, tuple(cfg.ops), rng, depth))
            got = 0
            while got < want and plans:
                batch, plans = plans[: want - got], plans[want - got:]
                for plan, env, record in _judge(batch, docs, cfg, vcfg, pool, fresh, log, on_verdict):
                    made.append(env)
                    if record["admitted"]:
                        got += 1
                        parts.append(_as_part(plan, env))
                        docs[env.env_id] = f"{plan.operator} of {', '.join(p.name for p in plan.parts)}"
                        lineage[env.path.name] = {"origin": "compose", "operator": plan.operator,
                                                  "parents": record["parents"], "depth": plan.depth}
        composed = artifacts.EnvLibrary(library.root, made, {})
        return log.finish(
            "compose", validate.STAGES, composed,
            {"compose": to_dict(cfg), "validate": to_dict(vcfg), "runtime": to_dict(runtime)},
            index_extra=lineage, manifest_extra={"parts": len(parts), "skipped_parts": skipped},
        )


def _judge(batch: list[Plan], docs, cfg, vcfg, pool, fresh, log: AdmissionLog, on_verdict):
    """(plan, file, verdict record) per plan, judged in parallel; a verdict already final in
    the log (a resumed run) is reused."""
    envs = []
    for plan in batch:
        source = render(plan, docs, cfg.partial_credit).encode()
        envs.append(EnvFile(log.out / "envs" / f"{plan.name()}.py", source, env_id_of(source)))
    todo = [(plan, env) for plan, env in zip(batch, envs)
            if (log.done.get(env.path.name) or {}).get("env_id") != env.env_id]

    def one(item):
        plan, env = item
        verdict = validate.judge(env, vcfg, pool, fresh, plan.name())
        verdict.measurements = {"operator": plan.operator, "depth": plan.depth,
                                "parents": [p.env.path.name for p in plan.parts], **verdict.measurements}
        return verdict

    with ThreadPoolExecutor(max_workers=max(1, pool.workers)) as ex:
        for verdict, (_, env) in zip(ex.map(one, todo), todo):
            log.add(verdict, env.source)
            if on_verdict:
                on_verdict(verdict)
    return [(plan, env, log.done[env.path.name]) for plan, env in zip(batch, envs)]


def _as_part(plan: Plan, env: EnvFile) -> Part:
    if plan.operator == "sequential":
        answer_type, input_type = plan.parts[1].answer_type, plan.parts[0].input_type
    elif plan.operator == "sort":
        answer_type, input_type = "list[str]", None
    else:
        answer_type, input_type = "str", None
    tags = ["composite", plan.operator]
    if any("planted" in p.tags for p in plan.parts):
        tags.append("planted")
    if plan.operator != "sequential":
        tags.append("multi-part")  # labels and part lines feed nothing else
    return Part(env, plan.name(), answer_type, input_type, tags, plan.depth,
                [p.env.path.name for p in plan.parts])


def _split(n: int, depth: int) -> list[int]:
    """n composites over depths 1..depth, the remainder to depth 1."""
    base = [n // depth] * depth
    base[0] += n - sum(base)
    return base
