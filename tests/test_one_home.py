"""One fact, one home: the round's order lives in the stage records' `place`, reward.format_weight's
bound in its field's metadata, each round step's marker path in its record. This reads the code
(every module of the package, by AST) and fails where a second copy appears."""

import ast
import functools
import re
from pathlib import Path

import pytest
from conftest import ROOT

from evoenv_cli import config as cfgmod
from evoenv_cli import stages
from evoenv_cli.stages import train

PACKAGE = ROOT / "evoenv_cli"
STEPS = stages.round_steps()


@functools.cache  # the package is parsed once for every test here
def modules() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(), str(p))) for p in sorted(PACKAGE.rglob("*.py"))]


@functools.cache
def strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_no_module_writes_the_round_s_order_out_by_hand():
    """A tuple or list naming three or more round steps is an order kept by hand (the loop's
    step calls, PIPELINE_ORDER, the report's lists were)."""
    names = {st.name for st in STEPS}
    found = []
    for path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List)):
                named = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names]
                if len(named) >= 3:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {named}")
    assert found == []


def test_the_loop_runs_its_steps_in_the_records_order():
    assert [st.place for st in STEPS] == sorted(st.place for st in STEPS)
    assert len({st.place for st in STEPS}) == len(STEPS)  # two steps never share a place


def test_format_weight_is_bounded_once_and_train_accepts_what_the_recipe_does():
    rule = dict(next(f for f in cfgmod.dataclasses.fields(cfgmod.RewardConfig) if f.name == "format_weight").metadata)
    assert rule == {"min": 0, "lt": 1}
    row = {"env_id": "e", "instance": {}, "prompt": [{"role": "user", "content": "q"}]}
    for weight, ok in ((0.0, True), (0.999, True), (1.0, False), (1, False), (-0.1, False)):
        accepted_by_recipe = cfgmod.field_problem(cfgmod.RewardConfig, "format_weight", weight) is None
        accepted_by_train = "format_weight" not in (train.row_problem({**row, "format_weight": weight}) or "")
        assert accepted_by_recipe == accepted_by_train == ok, weight
    found = []
    for path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                named = any(
                    isinstance(s, (ast.Name, ast.Attribute)) and "format_weight" in ast.unparse(s) for s in sides
                )
                numbers = any(isinstance(s, ast.Constant) and isinstance(s.value, (int, float)) for s in sides)
                if named and numbers:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


@pytest.mark.parametrize("st", [st for st in STEPS if "/" in st.where], ids=lambda st: st.name)
def test_a_round_step_s_marker_path_is_written_only_in_its_record(st):
    """round-NN/<folder>/<marker> spelled out elsewhere is a path re-derived: readers take
    `stages.get(name).where` (or `.marker`)."""
    found = [
        f"{path.relative_to(ROOT)}: {text!r}" for path, tree in modules() for text in strings(tree) if st.where in text
    ]
    assert found == []


def test_an_origin_is_named_only_in_its_table():
    """Where a pool member came from (evoenv_cli/origins.py): its phrase is written nowhere else, no module writes an index's `origin` key as a literal, and none compares an
    origin with a literal key (the loop's newcomer line, the report's table, its figures and
    numbers each wrote their own before)."""
    from evoenv_cli import origins

    home = PACKAGE / "origins.py"
    spelled = {o.phrase for o in origins.ORIGINS.values()}  # (a color is the figures' palette too)
    keys = set(origins.ORIGINS)
    found = []
    for path, tree in modules():
        if path == home:
            continue
        where = path.relative_to(ROOT)
        found += [f"{where}: {text!r}" for text in strings(tree) if text in spelled]
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):  # {"origin": "compose", ...}
                for k, v in zip(node.keys, node.values):
                    if isinstance(k, ast.Constant) and k.value == "origin" and isinstance(v, ast.Constant):
                        found.append(f"{where}:{node.lineno}: origin written as {v.value!r}")
            if isinstance(node, ast.Compare):  # rec.get("origin") == "offered"
                sides = [node.left, *node.comparators]
                about = any("origin" in ast.unparse(s) for s in sides if not isinstance(s, ast.Constant))
                literal = [s.value for s in sides if isinstance(s, ast.Constant) and s.value in keys]
                if about and literal:
                    found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    assert found == []
    # every key the index may hold has its words, and the words tell the origins apart
    assert len({o.label for o in origins.ORIGINS.values()}) == len({o.phrase for o in origins.ORIGINS.values()}) == 4
    assert origins.label(None) == "unknown" and origins.label("elsewhere") == "elsewhere"
    assert origins.phrase({}) == origins.SYNTHESIZE.phrase  # a record from before offered files existed


def test_a_round_folder_s_name_is_written_only_by_round_name():
    """RUN/round-NN is written, parsed and listed in stage.py alone (`round_name`, `round_number`,
    `round_folders`): a glob or a pattern of it elsewhere is a second copy (the pool's globs and
    the report's pattern were, and sorted round-100 before round-11)."""
    found = [
        f"{path.relative_to(ROOT)}: {text!r}"
        for path, tree in modules()
        if path != PACKAGE / "stage.py"
        for text in strings(tree)
        if text == "round-" or re.search(r"round-[*(\[\\]", text)  # f"round-{r}", a glob, a pattern
    ]
    assert found == []


def test_the_round_folders_are_listed_by_number(tmp_path):
    from evoenv_cli.stage import round_folders, round_name, round_number

    for r in (100, 9, 11, 2):
        (tmp_path / round_name(r)).mkdir()
    (tmp_path / "round-5").mkdir()  # not a name the loop writes
    (tmp_path / "round-07").write_text("")  # a file
    assert [round_number(p.name) for p in round_folders(tmp_path)] == [2, 9, 11, 100]
    assert round_folders(tmp_path / "missing") == []


def test_a_step_s_folder_is_named_only_by_its_record():
    """A path into a round step's folder is made from its record (`out_in`, the report's
    `step_dir`), never from the folder's name written again (the report wrote eleven:
    f"{rdir(r)}/compose/verdicts.jsonl"), so a record that moves its folder moves every reader.
    Docstrings may name the folders; a metric key such as "train/score_mean" is not a path."""
    folders = {st.out_in(Path("R")).name for st in STEPS if st.out_in(Path("R")) != Path("R")}
    found = []
    for path, tree in modules():
        docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                if any(f"/{f}/" in node.value or node.value.endswith(f"/{f}") for f in folders):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert found == []


# the checkpoint formats' own file names, set by transformers and PEFT: every reader of a model
# folder names them as those libraries do
THEIRS = {"config.json", "adapter_config.json", "tokenizer_config.json"}
# one name, two files: RUN/log.txt (the loop's lines) and a training OUT/log.txt (its child's output)
TWO_FILES = {"log.txt"}
_FILE = re.compile(r"(?:[\w.{}-]*/)*([\w-]+\.(?:jsonl|json|txt|parquet|safetensors|yaml|html|csv|pth|bin))")


def test_a_file_s_name_is_written_in_one_module():
    """A path piece naming a file ("verdicts.jsonl", f"{rel}/verdicts.jsonl") in two modules is
    one output's name written twice: its writer holds it as a constant (admission.VERDICTS,
    artifacts.INDEX, loop.ROUNDS_FILE, synthesize.GENERATIONS, train.METRICS_FILE...), and its
    readers import that, so a rename moves every reader (the report alone
    spelt verdicts.jsonl nine times). Docstrings and help texts may name the files."""
    homes: dict[str, set[str]] = {}
    for path, tree in modules():
        docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                if m := _FILE.fullmatch(node.value.lstrip("/")):
                    homes.setdefault(m.group(1), set()).add(str(path.relative_to(ROOT)))
    twice = {name: sorted(mods) for name, mods in homes.items() if len(mods) > 1 and name not in THEIRS | TWO_FILES}
    assert twice == {}
    assert {"verdicts.jsonl", "index.jsonl", "rounds.jsonl", "summary.json"} <= set(homes)  # the scan sees them
