"""What a new stage or operator touches: one record where the registry reads it, and
every reader follows. (Backends: tests/llm/test_llm_base.py;
validation checks and row formats: test_validate_checks.py, test_row_formats.py.)"""

import ast
import dataclasses
import importlib
import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SEEDS

from evoenv_cli import loop, stage, stages
from evoenv_cli.config import recipe_from_dict
from evoenv_cli.envfile import EnvFile, env_id_of
from evoenv_cli.errors import InputError
from evoenv_cli.operators import REGISTRY
from evoenv_cli.stages.dedupe import composite_structure


def test_every_stage_module_registers_its_record_and_the_round_reads_them_in_order():
    records = stages.all()
    steps = [s.name for s in stages.round_steps()]
    assert steps == [
        "synthesize", "validate", "review", "rotate", "compose", "dedupe", "calibrate",
        "pool update", "baseline", "sample", "train", "evaluate",
    ]  # fmt: skip
    assert {"distill"} <= set(records) - set(steps)  # a command-only stage: no place in the round
    for s in records.values():  # every record can be executed
        assert s.run is not None, s.name
    for name in steps:  # every step is wired by its record, which is in the module of its name
        assert records[name].in_round is not None, name
        module = "evoenv_cli.pool" if name == "pool update" else f"evoenv_cli.stages.{name}"
        assert stages.get(name) in vars(importlib.import_module(module)).values(), name
    assert not hasattr(loop, "LOOP_STEPS") and not hasattr(loop.Loop, "train")  # no step is the loop's own


def test_a_new_stage_is_one_record_and_the_loop_and_report_read_it(tmp_path, monkeypatch):
    """A stage registered by its module shows up in the round at its place, with its marker
    where the report looks for it, and runs through execute like any other."""
    from evoenv_cli.report import numbers

    seen = []

    def run(ctx, lib, out, llm, bar):
        seen.append((ctx.inputs["word"], out))
        (out / "done.json").write_text("{}")
        return {"ok": True}

    extra = stage.Stage(
        "echo",
        sections=(),
        marker="done.json",
        settings=lambda ctx: {"word": ctx.inputs["word"]},
        run=run,
        place=8.75,  # after the pool update and the baseline, before sample
        envs=False,
        library_optional=True,
        inputs=(stage.Input("word", "A word it writes."),),
    )
    monkeypatch.setitem(stage._REGISTRY, "echo", extra)
    assert [s.name for s in stages.round_steps()].index("echo") == 9
    assert extra in numbers.round_steps(numbers.loop_order())  # the report's round status lists it
    result = stage.execute(extra, stage.Context(None, tmp_path / "echo", inputs={"word": "hi"}))
    assert result.value == {"ok": True} and seen == [("hi", tmp_path / "echo")]
    assert (result.stage, result.out, result.marker, result.summary) == (
        "echo",
        tmp_path / "echo",
        tmp_path / "echo" / "done.json",
        {},
    )
    assert (tmp_path / "echo" / "run-config.json").exists()  # its settings fingerprinted, as any stage's


ONE_ROUND = """\
runtime:
  workers: 1
synthesize:
  n: 1
  max_requests: 1
  batch: 1
compose:
  n: 0
review:
  votes: 1
calibrate:
  coarse_levels: [1]
  instances: 1
  samples: 1
  on_no_answers: admit
evaluate:
  instances: 1
  samples: 1
iterate:
  bench: []
  baseline: false
  train_launch: {python} {train}
"""


@pytest.mark.slow
def test_a_new_round_step_is_one_record_and_the_loop_runs_it_in_its_place(tmp_path, monkeypatch):
    """The loop runs a step from its record alone: at its `place` (after the pool update, before
    sample here), handed the round's latest Result of each kind its record `takes`; every step
    leaves a Result (its kind, folder and marker from its record) that the round summary, a
    resumed run and the report read back the same; the report finds the new step's marker."""
    from support.loop_child import ScriptedPolicy

    from evoenv_cli.report import numbers
    from evoenv_cli.report.run_files import RunFiles

    seen = []

    def run(ctx, lib, out, llm, bar):
        (out / "done.json").write_text(json.dumps({"before": ctx.inputs["before"], "pool": len(lib.files)}))
        return {"ok": True}

    def in_round(rnd, got):
        seen.append((rnd, {kind: r.stage for kind, r in got.items()}))
        return dict(library=rnd.pool.root, inputs={"before": [r.stage for r in rnd.results]})

    extra = stage.Stage(
        "echo",
        sections=(),
        marker="done.json",
        settings=lambda ctx: {"before": ctx.inputs["before"]},
        run=run,
        place=8.75,
        envs=False,
        in_round=in_round,
        takes=("pool", "library"),
        inputs=(stage.Input("before", "The steps before it this round."),),
    )
    monkeypatch.setitem(stage._REGISTRY, "echo", extra)
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    shutil.copy(SEEDS / "register_machine.py", seeds)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(ONE_ROUND.format(python=sys.executable, train=ROOT / "tests" / "support" / "scripted_train.py"))
    spec = loop.cfgmod.load_recipe(recipe)
    run_dir = tmp_path / "run"
    said = []
    the_loop = loop.Loop(
        run_dir, recipe, "scripted", spec.iterate, seeds, log=said.append, backend_factory=ScriptedPolicy
    )
    (summary,) = loop.run(the_loop, 1)
    d = run_dir / "round-01"
    done = json.loads((d / "echo" / "done.json").read_text())
    steps = [st for st in stages.round_steps() if st.name != "baseline"]  # iterate.baseline: false here
    names = [st.name for st in steps]
    assert done == {"before": names[: names.index("echo")], "pool": 1}
    assert (d / "sample" / "train.jsonl").exists()  # and the round went on after it
    assert numbers.rounds_status(RunFiles(run_dir))[0]["steps"]["echo"] == "done"

    ((rnd, got),) = seen
    assert got == {"pool": "pool update", "library": "calibrate"}  # the latest of each kind: calibrate's, not dedupe's
    results = {r.stage: r for r in rnd.results}
    assert list(results) == names  # every step ran and left its Result, in round order
    for st in steps:
        r = results[st.name]
        assert (r.kind, r.out, r.marker) == (st.gives, st.out_in(d), st.out_in(d) / st.marker), st.name
        assert r.marker.is_file(), st.name
    kinds = [r.kind for r in rnd.results]
    assert kinds == ["library", "library", "library", "measured", "composites", "library", "library", "pool", None,
                     "rows", "checkpoint", "metrics"]  # fmt: skip
    train, rows = results["train"], results["sample"]
    assert train.policy == rnd.policy == str(d / "train")  # the round's policy is the one its train Result names
    assert results["evaluate"].summary["model"] == train.policy  # evaluate was handed train's checkpoint
    assert rows.summary == {"rows": len((d / "sample" / "train.jsonl").read_text().splitlines())}
    assert train.summary["rows"] == rows.summary["rows"]  # train read the rows sample's Result named
    assert (summary["train_steps"], summary["pool_size"], summary["candidates"]) == (
        train.summary["steps"],
        results["pool update"].summary["pool_size"],
        results["synthesize"].summary["candidates"],
    )
    # a resumed run and the report read the finished round back as the same Results
    assert stage.round_results(d, stages.round_steps()) == results
    assert RunFiles(run_dir).results("round-01") == results
    assert numbers.training(RunFiles(run_dir))["rounds"][0]["steps"] == train.summary["steps"]


def test_a_round_step_whose_record_does_not_say_what_it_takes_is_refused_before_the_round(tmp_path, monkeypatch):
    mute = stage.Stage("mute", sections=(), marker="done.json", settings=None, run=lambda *a: None, place=8.5)
    monkeypatch.setitem(stage._REGISTRY, "mute", mute)
    recipe = ROOT / "recipes" / "cpu-demo.yaml"
    the_loop = loop.Loop(tmp_path / "run", recipe, "m", loop.cfgmod.load_recipe(recipe).iterate, SEEDS)
    with pytest.raises(loop.StageFailed, match="round steps with no in_round in their record: mute"):
        loop._rounds(the_loop, 1)
    assert not (tmp_path / "run").exists()


def test_a_round_step_that_takes_what_no_step_before_it_gives_is_refused_before_the_round(tmp_path, monkeypatch):
    early = stage.Stage(
        "early",
        sections=(),
        marker="done.json",
        settings=None,
        run=lambda *a: None,
        place=0.5,  # before synthesize: no step has left a checkpoint yet
        in_round=lambda rnd, got: None,
        takes=("checkpoint",),
    )
    monkeypatch.setitem(stage._REGISTRY, "early", early)
    recipe = ROOT / "recipes" / "cpu-demo.yaml"
    the_loop = loop.Loop(tmp_path / "run", recipe, "m", loop.cfgmod.load_recipe(recipe).iterate, SEEDS)
    with pytest.raises(loop.StageFailed, match="round step early takes checkpoint, which no step before it gives"):
        loop._rounds(the_loop, 1)
    assert not (tmp_path / "run").exists()
    loop.check_wiring([st for st in stages.round_steps() if st is not early])  # the real round is wired
    odd = dataclasses.replace(early, name="odd", gives="weights")
    with pytest.raises(ValueError, match="'odd': weights is not a kind of Result"):
        stage.register(odd)  # a kind the other records do not know is a typo, refused at import
    assert "odd" not in stage.registered()


def test_a_new_operator_is_one_record_and_dedupe_judges_its_composites_by_lineage(monkeypatch):
    """dedupe reads the operator registry: a composite of a new operator is judged by its
    parents, in order or sorted as the record says, never by its text."""
    for name, unordered in (("zip", True), ("chain", False)):
        monkeypatch.setitem(
            REGISTRY, name, dataclasses.replace(REGISTRY["parallel"], name=name, unordered_parts=unordered)
        )
        source = f"OPERATOR = '{name}'\n".encode()
        env = EnvFile(Path(f"comp_{name}.py"), source, env_id_of(source))
        record = {"origin": "compose", "operator": name, "parents": ["b", "a"]}
        assert composite_structure(env, record) == ((name, "a", "b") if unordered else (name, "b", "a"))
    # the recipe offers the new names with nothing else edited: config reads the registry
    assert recipe_from_dict({"compose": {"ops": ["zip", "chain"]}}, "r.yaml").compose.ops == ["zip", "chain"]
    with pytest.raises(InputError, match="r.yaml: .*nope"):
        recipe_from_dict({"compose": {"ops": ["nope"]}}, "r.yaml")
    unknown = EnvFile(Path("comp_x.py"), b"OPERATOR = 'nope'\n", env_id_of(b"OPERATOR = 'nope'\n"))
    assert composite_structure(unknown, {"origin": "compose", "operator": "nope", "parents": ["a"]}) is None


def _input_reads(tree: ast.Module) -> set[str]:
    """The names a module reads from a Context's inputs: `ctx.inputs["x"]`, `ctx.inputs.get("x")`
    and the same through a name bound to `ctx.inputs`."""
    aliases = {"inputs"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple):
            for target, value in zip(
                node.targets[0].elts if isinstance(node.targets[0], ast.Tuple) else [], node.value.elts
            ):
                if isinstance(target, ast.Name) and ast.unparse(value).endswith(".inputs"):
                    aliases.add(target.id)

    def is_inputs(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr in aliases) or (
            isinstance(node, ast.Name) and node.id in aliases
        )

    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and is_inputs(node.value) and isinstance(node.slice, ast.Constant):
            found.add(node.slice.value)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and is_inputs(node.func.value)
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add(node.args[0].value)
    return found


@pytest.mark.parametrize("name", [s.name for s in stages.all().values()])
def test_every_input_a_stage_reads_is_declared_by_its_record(name):
    """A stage's inputs are its record's (stage.Input): what its module reads from ctx.inputs is
    declared there, with the help its command shows, and nothing declared goes unread."""
    record = stages.get(name)
    module = "evoenv_cli.pool" if name == "pool update" else f"evoenv_cli.stages.{name}"
    source = Path(importlib.import_module(module).__file__)
    read = _input_reads(ast.parse(source.read_text()))
    if record.run is not None and getattr(record.run, "__module__", module) != module:
        read |= _input_reads(ast.parse(Path(sys.modules[record.run.__module__].__file__).read_text()))
    declared = {i.name for i in record.inputs}
    assert read <= declared, f"{name} reads {sorted(read - declared)}, which its record does not declare"
    assert declared <= read, f"{name} declares {sorted(declared - read)}, which it never reads"
    assert all(i.help.strip() for i in record.inputs)


def test_execute_refuses_an_input_its_record_does_not_declare_before_out_is_touched(tmp_path):
    with pytest.raises(TypeError, match="stage dedupe: inputs agianst not declared by its record"):
        stage.execute(
            stages.get("dedupe"), stage.Context(None, tmp_path / "out", library=SEEDS, inputs={"agianst": []})
        )
    with pytest.raises(TypeError, match="stage train: inputs model missing"):
        stage.execute(stages.get("train"), stage.Context(None, tmp_path / "out", library=SEEDS, inputs={"data": SEEDS}))
    assert not (tmp_path / "out").exists()


def test_an_input_option_s_help_is_its_record_s_and_is_read_when_its_command_is_looked_up():
    import typer

    from evoenv_cli.cli import app
    from evoenv_cli.commands.common import INPUT_HELP

    group = typer.main.get_command(app)
    seen = 0
    for name in list(group.commands):
        placeholders = {
            p.name: p.help.removeprefix(INPUT_HELP)
            for p in group.commands[name].params
            if (getattr(p, "help", None) or "").startswith(INPUT_HELP)
        }
        command = group.get_command(typer.Context(group), name)
        for param in command.params:
            if param.name in placeholders:
                record, field = placeholders[param.name].rsplit(".", 1)
                assert param.help == next(i.help for i in stages.get(record).inputs if i.name == field)
                seen += 1
    assert seen >= 12  # synthesize's 3, compose's, dedupe's, train's 3, evaluate's 2, distill's 3


def test_a_context_is_written_and_read_back_by_its_inputs_declared_kinds():
    """What a child process gets (`run-context`): paths and lists of paths come back as paths, an
    absent optional input as None, and an object of this process is refused rather than lost."""
    from evoenv_cli.config import Recipe

    synthesize = stages.get("synthesize")
    given = {"seeds": Path("s"), "pools": [Path("a"), Path("b")], "offered": None}
    record = stage.context_record(synthesize, stage.Context(Recipe(), Path("/o"), inputs=given))
    assert json.loads(json.dumps(record))["inputs"] == {
        "seeds": {"path": "s"},
        "pools": [{"path": "a"}, {"path": "b"}],
        "offered": None,
    }
    assert stage.context_from_record(record, "r.json", stages.get) == (
        synthesize,
        stage.Context(Recipe(), Path("/o"), inputs=given),
    )
    # read back by the declared kind, not by shape: a value that looks like a written path stays a value
    train = stages.get("train")
    shaped = {"data": Path("d"), "model": {"path": "m"}}
    back = stage.context_from_record(
        stage.context_record(train, stage.Context(Recipe(), Path("/o"), inputs=shaped)), "r.json", stages.get
    )
    assert back[1].inputs == shaped
    odd = {**record, "inputs": {**record["inputs"], "seed": 1}}
    with pytest.raises(InputError, match="r.json: input 'seed' is not one stage synthesize declares"):
        stage.context_from_record(odd, "r.json", stages.get)
    with pytest.raises(TypeError, match="input examples is an object of this process"):
        stage.context_record(synthesize, stage.Context(Recipe(), Path("/o"), inputs={**given, "examples": ()}))
