"""A hub model id on a machine with no hub fails fast, names the fix, and leaves OUT as it was.

The hub is made unreachable the same way on every machine: HF_ENDPOINT points at a local port
nothing listens on (and, for a second run, at a name that never resolves), HF_HUB_OFFLINE is
unset and HF_HOME is empty, so the model is neither local, cached, nor downloadable.

"Fast" is measured against the same command failing on a local folder that does not exist (no
network at all), on the same machine at the same moment: the hub client's own retries, which
these guard against, take a minute; a loaded machine's slowness, which a fixed bound of two
seconds also caught (calibrate: 2.07 s, 2026-12-06), is in both."""

import os
import time

import pytest
from conftest import ROOT, SEEDS

HUB_ID = "SomeOrg/Some-Model-4B"
LLM_COMMANDS = {
    "synthesize": ["synthesize", "--seeds", SEEDS, "--n", "2"],
    "review": ["review", SEEDS],
    "calibrate": ["calibrate", SEEDS],
    "evaluate": ["evaluate", "--library", SEEDS],
}


SLACK_S = 5.0  # what the hub may add to a failure with no network: far under the client's retries


def timed(evoenv, *args) -> tuple[object, float]:
    started = time.perf_counter()
    p = evoenv(*args)
    return p, time.perf_counter() - started


@pytest.fixture
def no_hub(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: refused at once


@pytest.mark.parametrize("command", sorted(LLM_COMMANDS))
def test_a_hub_id_with_no_hub_fails_as_fast_as_a_missing_folder_and_leaves_out_untouched(
    evoenv, tmp_path, no_hub, command
):
    out = tmp_path / "out"
    local, baseline = timed(evoenv, *LLM_COMMANDS[command], "--model", tmp_path / "no-such-model", "--out", out)
    assert local.returncode == 2 and "no such model folder" in local.stderr, local.stderr
    p, wall = timed(evoenv, *LLM_COMMANDS[command], "--model", HUB_ID, "--out", out)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert HUB_ID in lines[0] and "cannot be reached" in lines[0]
    assert "local model folder" in lines[0] and "HF_HUB_OFFLINE=1" in lines[0]
    assert not out.exists(), sorted(str(x) for x in out.rglob("*"))
    assert wall < baseline + SLACK_S, f"{command} took {wall:.2f} s to fail, {baseline:.2f} s with no network"


def test_train_and_iterate_fail_as_fast_before_writing(evoenv, tmp_path, no_hub):
    rows = tmp_path / "rows.jsonl"
    p = evoenv("sample", SEEDS, "--out", rows, "--per-env", "1")
    assert p.returncode == 0, p.stderr
    train = ["train", rows, "--library", SEEDS, "--out", tmp_path / "ckpt", "--model"]
    local, baseline = timed(evoenv, *train, tmp_path / "no-such-model")
    assert local.returncode == 2 and "no such model folder" in local.stderr, local.stderr
    p, wall = timed(evoenv, *train, HUB_ID)
    assert p.returncode == 2 and "HF_HUB_OFFLINE=1" in p.stderr, p.stderr
    assert wall < baseline + SLACK_S, f"train took {wall:.2f} s to fail, {baseline:.2f} s with no network"
    assert not (tmp_path / "ckpt").exists()
    recipe = ROOT / "recipes" / "default.yaml"
    p = evoenv("iterate", "--recipe", recipe, "--model", HUB_ID, "--run", tmp_path / "run", "--seeds", SEEDS)
    assert p.returncode == 2 and "cannot be reached" in p.stderr, p.stderr
    assert not (tmp_path / "run").exists()


def test_a_name_that_never_resolves_is_bounded_too(monkeypatch, tmp_path):
    """A resolver that cannot answer (no network at all) costs the probe's timeout at most."""
    from evoenv_cli.llm.base import BackendError, resolve_model

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "https://hub.evoenv-test.invalid")
    started = time.perf_counter()
    with pytest.raises(BackendError, match="hub.evoenv-test.invalid"):
        resolve_model(HUB_ID)
    assert time.perf_counter() - started < 1.5 + SLACK_S  # the probe's 1.5 s, not a resolver's minute
    assert os.environ.get("HF_HUB_OFFLINE") is None
