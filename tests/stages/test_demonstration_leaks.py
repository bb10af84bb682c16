"""A demonstration turn never shares an answer with the instance it precedes: not its answer,
and not written in its task. The hostile environments come from a generator: each derives the
demonstration seeds `sample` will use beside an instance (the derivation is public) and writes
the instance's answer into those prompts, in one of several phrasings."""

import json
import random
import re

import pytest

from evoenv_cli.artifacts import EnvLibrary
from evoenv_cli.config import SampleConfig
from evoenv_cli.runtime.workers import SandboxWorkers
from evoenv_cli.stages import sample

TEMPLATE = """import hashlib
import random
NAME = "NAME_HERE"
_NEXT = {}
def _demo_seed(seed, k):
    digest = hashlib.sha256(f"demonstration:{seed}:{k}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
def generate(seed, difficulty):
    r = random.Random(seed)
    inst = {"a": r.randint(100, 999), "b": r.randint(100, 999)}
    inst["note"] = _NEXT.get(seed, 0)
    for k in range(8):  # the demonstrations sample will make beside this instance
        _NEXT[_demo_seed(seed, k)] = inst["a"] * 1000 + inst["b"]
    return inst
def prompt(instance):
    return "Join " + str(instance["a"]) + " and " + str(instance["b"]) + " into one number." + PHRASE_HERE
def solve(instance):
    return str(instance["a"] * 1000 + instance["b"])
def score(instance, answer):
    return 1.0 if answer.strip() == solve(instance) else 0.0
"""
PHRASES = (
    '" (ref " + str(instance["note"]) + ")"',
    '" Previously: " + str(instance["note"]) + "."',
    '"\\n[" + str(instance["note"]) + "]"',
)


def colluding_source(rng: random.Random, name: str) -> str:
    return TEMPLATE.replace("NAME_HERE", name).replace("PHRASE_HERE", rng.choice(PHRASES))


@pytest.mark.parametrize("family_seed", [1, 2, 3])
def test_a_demonstration_never_writes_the_asked_answer(tmp_path, family_seed):
    name = f"colluding_{family_seed}"
    (tmp_path / f"{name}.py").write_text(colluding_source(random.Random(family_seed), name))
    lib = EnvLibrary.open(tmp_path)
    with SandboxWorkers(workers=1) as pool:
        rows = sample.run(lib, SampleConfig(per_env=8, seed=family_seed, demonstrations=1), pool).rows
    assert len(rows) == 8
    leaked = 0
    for row in rows:
        turns = row["prompt"][:-1]
        demo_text = " ".join(t["content"] for t in turns if t["role"] != "system")
        leaked += re.search(rf"(?<![0-9]){row['answer']}(?![0-9])", demo_text) is not None
        inst = json.loads(row["instance"])
        assert str(inst["a"] * 1000 + inst["b"]) == row["answer"]
    assert leaked == 0
    assert all(len(row["prompt"]) == 1 for row in rows)  # no clean candidate: asked bare


def test_the_family_writes_the_asked_answer_into_every_candidate():
    """What the old pick (answers that differ first, the task unread) chose from: every
    demonstration candidate of every row states the asked answer, and its own answer differs."""
    from evoenv_cli.conversations import DEMONSTRATION_TRIES, demonstration_seed

    namespace: dict = {}
    exec(colluding_source(random.Random(1), "c"), namespace)
    for seed in range(20):
        asked = namespace["generate"](seed, 1)
        for k in range(1 + DEMONSTRATION_TRIES):
            demo = namespace["generate"](demonstration_seed(seed, k), 1)
            assert namespace["solve"](asked) in namespace["prompt"](demo)
            assert namespace["solve"](asked) != namespace["solve"](demo)
