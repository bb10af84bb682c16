"""The README and docs/ as a newcomer meets them on a fresh clone.

- The README leads: under 200 lines, and every relative link in it and in docs/*.md resolves
  to a file (and heading) inside the repository.
- Every `evoenv` and `make` command written in a bash block of the README or docs/ names a
  real command, target and options.
- docs/stages.md's "One stage by hand" block runs as written (slow): its fenced bash block is
  run line by line (`set -e`) in a folder holding what a clone has (seeds/, recipes/,
  tests/recipes/) and nothing built, with this environment's `evoenv` on PATH. About a minute
  with the tiny model on 2 cores."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def by_hand_block() -> str:
    text = (ROOT / "docs" / "stages.md").read_text()
    start = text.index("## One stage by hand")
    start = text.index("```bash\n", start) + len("```bash\n")
    return text[start : text.index("```", start)]


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}


def bash_lines(page: Path) -> list[str]:
    """The commands of a page's bash blocks, continuation lines joined, comments dropped."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", page.read_text(), flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        out += [line.split(" #")[0].strip() for line in joined.splitlines() if line.strip()]
    return out


def test_the_readme_leads_in_under_200_lines():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) < 200, len(lines)
    first_screen = "\n".join(lines[:40])
    assert "make demo" in first_screen and "make test" in first_screen
    assert "composition" in first_screen and "4B" in first_screen  # what the demo will not show


def test_every_relative_link_resolves_inside_the_repository():
    checked = 0
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            assert dest.is_relative_to(ROOT), f"{page.name}: {target} points outside the repository"
            assert dest.exists(), f"{page.name}: {target} does not exist"
            if anchor and dest.suffix == ".md":
                assert anchor in anchors(dest), f"{page.name}: {target}: no such heading in {dest.name}"
            checked += 1
    assert checked > 20


def test_every_commit_docs_extending_cites_is_in_the_repository():
    """Its counts cite commits by hash (`git show --stat HASH`): each must exist here."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    text = (ROOT / "docs" / "extending.md").read_text()
    cited = sorted(
        set(re.findall(r"`([0-9a-f]{7,40})`", text)) | set(re.findall(r"git show --stat ([0-9a-f]{7,40})", text))
    )
    assert cited
    missing = [
        h
        for h in cited
        if subprocess.run(["git", "cat-file", "-e", f"{h}^{{commit}}"], cwd=ROOT, capture_output=True).returncode
    ]
    assert missing == []


def test_every_command_in_the_docs_names_real_commands_and_options():
    import typer

    from evoenv_cli.cli import app

    group = typer.main.get_command(app)
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.M))
    seen = 0
    for page in PAGES:
        for line in bash_lines(page):
            for part in re.split(r"\s*(?:\||&&|;)\s*", line):
                words = part.split()
                if words[:1] == ["make"]:
                    assert words[1] in targets, f"{page.name}: make {words[1]}: no such target"
                    seen += 1
                if words[:1] != ["evoenv"] or words[1].startswith("-"):
                    continue
                command = group.commands.get(words[1])
                assert command is not None, f"{page.name}: evoenv {words[1]}: no such command"
                options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
                for word in words[2:]:
                    if word.startswith("--"):
                        assert word.split("=")[0] in options, f"{page.name}: evoenv {words[1]} has no {word}"
                seen += 1
    assert seen > 30


def test_the_block_names_every_stage_and_writes_only_under_runs():
    block = by_hand_block()
    commands = [line.split()[1] for line in block.splitlines() if line.startswith("evoenv ")]
    assert commands == [
        "tiny-model",
        "synthesize",
        "validate",
        "review",
        "compose",
        "dedupe",
        "calibrate",
        "sample",
        "train",
        "evaluate",
    ]
    outs = [w for line in block.splitlines() for a, w in zip(line.split(), line.split()[1:]) if a == "--out"]
    assert outs and all(o.startswith("runs/") for o in outs)


@pytest.mark.slow
def test_one_stage_by_hand_runs_as_written_on_a_fresh_clone(tmp_path):
    clone = tmp_path / "clone"
    for part in ("seeds", "recipes", "tests/recipes"):
        shutil.copytree(ROOT / part, clone / part, ignore=shutil.ignore_patterns("__pycache__"))
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    p = subprocess.run(
        ["bash", "-euxo", "pipefail", "-c", by_hand_block()],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    hand = clone / "runs" / "hand"
    for marker in (
        "synth/summary.json",
        "validate/summary.json",
        "review/summary.json",
        "compose/summary.json",
        "dedupe/summary.json",
        "calibrate/summary.json",
        "train.jsonl",
        "ckpt/train-manifest.json",
        "eval/metrics.json",
    ):
        assert (hand / marker).exists(), marker
    assert list((hand / "calibrate" / "envs").glob("*.py")), "the chain after compose must not be empty"
    assert (hand / "train.jsonl").read_text().strip()


def demo_output():
    import importlib.util

    spec = importlib.util.spec_from_file_location("demo_output", ROOT / "benchmarks" / "demo_output.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_states_the_figures_of_the_demo_output_it_was_written_from():
    """The README's demo block is what benchmarks/demo_output.py writes from the committed
    docs/demo-output.txt (which `make demo` regenerates): same date, machine, pass@1 figures
    and round lines."""
    recorder = demo_output()
    text = (ROOT / "docs" / "demo-output.txt").read_text()
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index(recorder.START) : readme.index(recorder.END) + len(recorder.END)]
    assert block == recorder.readme_block(text)
    f = recorder.fields(text)
    assert f["pass@1"] and all(x["items"] > 0 for x in f["pass@1"].values())
    for line in text.splitlines():
        if line.startswith(("round ", "  ")):
            assert line in block


def test_the_demo_record_is_rendered_from_the_runs_rounds(tmp_path):
    """A run's rounds.jsonl becomes the record, and the record the README's block."""
    import json

    recorder = demo_output()
    run = tmp_path / "run"
    run.mkdir()
    ev = {"pass@1": 0.3, "items": 30, "delta_vs_baseline": 0.1, "delta_ci95": [0.02, 0.2]}
    rows = [{"round": 1, "evaluation": ev, "admitted": {}, "pool_size": 13, "joined": 1}]
    (run / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = recorder.record(run, 600.4, 1100.0, "2026-12-04 05:00 UTC", "Some CPU, 2 cores")
    assert "pass@1 round 1: 0.300 baseline 0.200 delta +0.100 paired95 [+0.020, +0.200] items 30" in text
    block = recorder.readme_block(text)
    assert "10.0 minutes wall, 1100 CPU-seconds" in block
    assert "30 frozen items went 0.200 at the start, 0.300 after round 1 (+0.100, paired 95% interval" in block
    assert "round 1 done: held-out pass@1 0.300" in block
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{recorder.START}\nold\n{recorder.END}\nrest\n")
    recorder.update_readme(text, readme)
    assert readme.read_text() == f"intro\n{block}\nrest\n"
