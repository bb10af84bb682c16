"""The environment contract, checked on every seed in seeds/: names and types, determinism
across processes, reference scores 1.0, wrong answers 0.0, no leaked answer, no constant
answer, and speed. Seeds are trusted, so they are loaded in-process."""

import functools
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from evoenv_cli.runtime import contract

SEEDS_DIR = Path(__file__).resolve().parents[2] / "seeds"
SEED_PATHS = sorted(path for path in SEEDS_DIR.glob("*.py") if not path.name.startswith("_"))
ANSWER_TYPES = set(contract.ANSWER_TYPES)
ODD_INPUTS = {
    "int": [0, 1, -1, 7, -(10**6), 2**63, 10**100],
    "float": [0.0, -1.5, 1e300, 3.25],
    "str": ["", "a", "Hello, World!", "ÜñÎçødé ☃ 0123", "x" * 10_000],
    "list[int]": [[], [0], [-5, 10**30, 3]],
    "list[str]": [[], [""], ["a", "b c"]],
}
GARBAGE = ["", "   ", "garbage text", "None", "ÜñÎçødé ☃", "x" * 100_000]
MAX_INSTANCE_BYTES = contract.ASKED_INSTANCE_BYTES
MAX_PROMPT_CHARS = contract.ASKED_PROMPT_CHARS
MAX_CALL_SECONDS = 2 * contract.ASKED_CALL_SECONDS  # what the prompt asks, with room for a busy test machine

pytestmark = pytest.mark.parametrize("path", SEED_PATHS, ids=[path.stem for path in SEED_PATHS])


@functools.cache
def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"seed_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def round_trip(instance: dict) -> dict:
    return json.loads(json.dumps(instance))


def whole_token(text: str, haystack: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(text)}(?![A-Za-z0-9])", haystack) is not None


def near_misses(answer_type: str, reference: str) -> list[str]:
    """Answers one step away from the reference, which a strict scorer must reject."""
    if answer_type == "int":
        return [str(int(reference) + 1), str(int(reference) - 1)]
    if answer_type.startswith("list["):
        items = reference.split()
        if not items:
            return ["0"]
        last = str(int(items[-1]) + 1) if answer_type == "list[int]" else items[-1] + "x"
        misses = [" ".join(items[:-1] + [last])]
        if items[::-1] != items:
            misses.append(" ".join(items[::-1]))
        return misses
    return [reference + "x"]


def test_required_names(path):
    env = load(path)
    assert env.__doc__ and env.__doc__.strip(), "module docstring missing"
    assert env.NAME == path.stem
    assert re.fullmatch(r"[a-z][a-z0-9_]*", env.NAME)
    for name in contract.REQUIRED_FUNCTIONS:
        assert callable(getattr(env, name, None)), f"{name} missing"
    assert isinstance(env.TAGS, list) and all(isinstance(tag, str) for tag in env.TAGS)
    assert env.ANSWER_TYPE in ANSWER_TYPES


def test_generate_from_accepts_odd_values(path):
    env = load(path)
    input_type = getattr(env, "INPUT_TYPE", None)
    if input_type is None:
        pytest.skip("no INPUT_TYPE")
    assert input_type in ANSWER_TYPES
    for value in ODD_INPUTS[input_type]:
        for difficulty in (1, 10):
            instance = env.generate_from(value, 3, difficulty)
            assert instance == env.generate_from(value, 3, difficulty)
            assert len(json.dumps(instance)) < MAX_INSTANCE_BYTES
            instance = round_trip(instance)
            assert env.score(instance, env.solve(instance)) == 1.0


DETERMINISM_SCRIPT = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("env", sys.argv[1])
env = importlib.util.module_from_spec(spec)
spec.loader.exec_module(env)
rows = []
for seed in range(5):
    for difficulty in (1, 5, 10):
        instance = env.generate(seed, difficulty)
        rows.append([instance, env.prompt(instance), env.solve(instance)])
print(json.dumps(rows, sort_keys=True))
"""


def test_deterministic_across_processes(path):
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        run = subprocess.run(
            [sys.executable, "-c", DETERMINISM_SCRIPT, str(path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
        outputs.append(run.stdout)
    assert outputs[0] == outputs[1]


def test_reference_scores_one(path):
    env = load(path)
    for seed in range(10):
        for difficulty in contract.LEVELS:
            instance = env.generate(seed, difficulty)
            assert len(json.dumps(instance)) < MAX_INSTANCE_BYTES
            instance = round_trip(instance)
            text = env.prompt(instance)
            assert isinstance(text, str) and len(text) < MAX_PROMPT_CHARS
            reference = env.solve(instance)
            assert isinstance(reference, str)
            result = env.score(instance, reference)
            assert type(result) is float and result == 1.0, (seed, difficulty, reference)


def test_wrong_answers_score_zero(path):
    env = load(path)
    planted = any("planted" in tag for tag in env.TAGS)
    for seed in range(5):
        for difficulty in (1, 5, 10):
            instance = round_trip(env.generate(seed, difficulty))
            reference = env.solve(instance)
            wrong = list(GARBAGE)
            # A planted seed accepts every valid answer, and a near miss or another
            # instance's answer can be one; its own tests cover those.
            if not planted:
                other = env.solve(round_trip(env.generate(seed + 100, difficulty)))
                wrong += near_misses(env.ANSWER_TYPE, reference)
                wrong += [other] if other != reference else []
            for answer in wrong:
                result = env.score(instance, answer)
                assert type(result) is float and result == 0.0, (seed, difficulty, answer[:50])


def test_prompt_does_not_leak_the_answer(path):
    env = load(path)
    leaks = 0
    for seed in range(30):
        instance = env.generate(seed, 5)
        leaks += whole_token(env.solve(instance), env.prompt(instance))
    assert leaks <= 9, f"reference appears in {leaks}/30 prompts"


@pytest.mark.parametrize("difficulty", [5, 10])
def test_answers_vary(path, difficulty):
    env = load(path)
    references = {env.solve(env.generate(seed, difficulty)) for seed in range(30)}
    assert len(references) >= min(5, math.ceil(0.3 * 30)), references


def test_no_answer_fits_most_instances_at_level_one(path):
    """Level 1 is near-trivial (a 4x4 grid, a list of three to five numbers), so it has only a
    few possible answers; still several occur, and none is right on most instances, so a
    policy cannot earn level 1's reward by repeating one answer."""
    env = load(path)
    instances = [round_trip(env.generate(seed, 1)) for seed in range(30)]
    references = Counter(env.solve(instance) for instance in instances)
    assert len(references) >= 3, references
    for answer, _ in references.most_common(3):
        right = sum(env.score(instance, answer) == 1.0 for instance in instances)
        assert right <= len(instances) // 2, (answer, right)


def test_calls_are_fast_at_top_difficulty(path):
    env = load(path)

    def timed(call, *args):
        start = time.perf_counter()
        result = call(*args)
        elapsed = time.perf_counter() - start
        assert elapsed < MAX_CALL_SECONDS, f"{call.__name__} took {elapsed:.3f} s"
        return result

    for seed in range(5):
        instance = timed(env.generate, seed, 10)
        timed(env.prompt, instance)
        timed(env.score, instance, timed(env.solve, instance))
