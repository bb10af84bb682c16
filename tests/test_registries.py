"""What a new stage or operator touches: one record where the registry reads it, and
every reader follows. (Backends: tests/llm/test_llm_base.py;
validation checks and row formats: test_validate_checks.py, test_row_formats.py.)"""

import dataclasses
from pathlib import Path

from evoenv_cli import stage, stages
from evoenv_cli.envfile import EnvFile, env_id_of
from evoenv_cli.operators import REGISTRY
from evoenv_cli.stages.dedupe import composite_structure


def test_every_stage_module_registers_its_record_and_the_round_reads_them_in_order():
    records = stages.all()
    steps = [s.name for s in stages.round_steps()]
    assert steps == [
        "synthesize", "validate", "review", "rotate", "compose", "dedupe", "calibrate",
        "pool update", "sample", "train", "evaluate",
    ]  # fmt: skip
    assert {"distill"} <= set(records) - set(steps)  # a command-only stage: no place in the round
    for s in records.values():  # every runnable record can be executed
        assert (s.run is None) == (s.name == "pool update"), s.name


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
        place=8.5,  # after the pool update, before sample
        envs=False,
        library_optional=True,
    )
    monkeypatch.setitem(stage._REGISTRY, "echo", extra)
    assert [s.name for s in stages.round_steps()].index("echo") == 8
    assert ("echo", "echo/done.json") in numbers.round_steps(numbers.loop_order())
    result = stage.execute(extra, stage.Context(None, tmp_path / "echo", inputs={"word": "hi"}))
    assert result == {"ok": True} and seen == [("hi", tmp_path / "echo")]
    assert (tmp_path / "echo" / "run-config.json").exists()  # its settings fingerprinted, as any stage's


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
    unknown = EnvFile(Path("comp_x.py"), b"OPERATOR = 'nope'\n", env_id_of(b"OPERATOR = 'nope'\n"))
    assert composite_structure(unknown, {"origin": "compose", "operator": "nope", "parents": ["a"]}) is None
