"""Admission's parent-side work on what an environment returns is linear in its size: each piece
(the fuzzer's mutants, the probes, the leak solvers, the solve signature's pairings, the echoes and
the literal folding) is timed on an input at 1x and at 8x, and the 8x time must stay within a
generous multiple of 8 times the 1x (a quadratic piece takes 64 times). CPU time, the best of
several runs, so a loaded machine does not make it fail. Then the whole judgement's budget
(validate.max_judge_seconds), and the environment at the caps admitted.
"""

import random
import sys
import time
from pathlib import Path

import pytest

from evoenv_cli.artifacts import EnvLibrary, prepare_out_dir, read_jsonl
from evoenv_cli.checks import fuzz, leak_solvers, probes, registry, solve_signature
from evoenv_cli.config import RuntimeConfig, ValidateConfig
from evoenv_cli.runtime.workers import Limits
from evoenv_cli.stages import validate

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import scaled_env  # noqa: E402

GROWTH = 8
SLACK = 2.5  # the 8x input may cost up to 20 times the 1x: linear is 8, quadratic 64


def cpu_seconds(fn, arg, repeat: int = 5) -> float:
    """The best of `repeat` runs' CPU time, each run long enough for the clock to see it."""
    loops, best = 1, float("inf")
    while True:
        t = time.process_time()
        for _ in range(loops):
            fn(arg)
        if time.process_time() - t >= 0.005 or loops >= 4096:
            break
        loops *= 4
    for _ in range(repeat):
        t = time.process_time()
        for _ in range(loops):
            fn(arg)
        best = min(best, (time.process_time() - t) / loops)
    return best


def assert_linear(fn, make, n: int) -> None:
    small, big = make(n), make(GROWTH * n)
    t1, t8 = cpu_seconds(fn, small), cpu_seconds(fn, big)
    assert t8 <= SLACK * GROWTH * t1, f"{GROWTH}x the input cost {t8 / t1:.1f}x the time ({t1:.4f} s -> {t8:.4f} s)"


def _plan(case):
    instance, prompt, reference = case
    return fuzz.plan([(instance, prompt, reference)] * 2, "X = 1\n", True, random.Random(0), 600)


def _letters(n: int) -> str:
    rng = random.Random(n)
    return "".join(rng.choice("abcdefghij") for _ in range(n))


def _numbers(n: int) -> list[int]:
    return [random.Random(n + i).randrange(10**6) for i in range(n)]


def _case_case(n: int):
    """A reference in one case among a prompt of words in another: every word is read for it."""
    words = _letters(n).upper()
    return {"s": "x"}, " ".join(words[i : i + 8] for i in range(0, n, 8)), _letters(n // 2).title()


FUZZ_CASES = {
    # the case: a string reference, whose random answers of its shape took sorted(set(ref)) per character
    "str_reference": lambda n: ({"s": _letters(64)}, "Copy it.", _letters(n)),
    "list_reference": lambda n: (
        {"xs": _numbers(n)},
        "Sort them.",
        " ".join(map(str, sorted(_numbers(n)))),
    ),
    "int_reference": lambda n: ({"n": 3}, "A long number.", "7" + "3" * (n // 8)),
    "many_scalars": lambda n: ({f"k{i}": f"v{i}" for i in range(n // 4)}, "Echo.", "v1"),
    # case-only changes: the prompt's words read for the reference's letters in another case
    "case_reference": lambda n: _case_case(n),
    # an item swapped for its nearest neighbour in the instance's list (indices into it)
    "nearest_item": lambda n: ({"xs": _numbers(n)}, "Pick some.", " ".join(map(str, range(0, n, 2)))),
}


@pytest.mark.parametrize("kind", sorted(FUZZ_CASES))
def test_the_fuzzer_is_linear_in_what_the_environment_returns(kind):
    assert_linear(_plan, FUZZ_CASES[kind], 2000)


def _words_prompt(n: int) -> str:
    words = "one two three four five six seven eight nine twenty thirty hundred thousand".split()
    rng = random.Random(n)
    return " ".join(rng.choice(words) for _ in range(n // 6)) + " <think> 1 2" * (n // 200)


def _solver_case(n: int):
    prompts = [_words_prompt(n), _letters(n // 2) + " Caesar " + _words_prompt(n // 2)]
    return prompts, ["four", "1 2 3"]


PROBE_CASES = {
    "leak_solvers": (lambda c: leak_solvers.rates(*c), _solver_case, 4000),
    "random_shaped_str": (
        lambda r: probes.random_shaped(r, probes.Context.of({}, "", r), random.Random(1)),
        _letters,
        4000,
    ),
    "flood_list": (
        lambda c: probes.flood(c[1], c[0], []),
        lambda n: (probes.Context.of({"xs": _numbers(n)}, "", ""), " ".join(map(str, _numbers(n)))),
        2000,
    ),
    "encodings_found": (
        lambda c: [probes.encoded_in(k, v, c[1]) for k, v in probes.encodings(c[0]).items()],
        lambda n: ("12 " * (n // 3) + "4", "one two " * n),
        1000,
    ),
    "whole_token": (lambda c: probes.whole_token_in(*c), lambda n: ("a " * (n // 2) + "b", "a " * n), 2000),
    "score_constants": (
        probes.score_constants,
        lambda n: (
            "def score(instance, answer):\n    return answer in (" + ", ".join(f"'c{i}'" for i in range(n)) + ")\n"
        ),
        1000,
    ),
    "literals": (
        fuzz.literals,
        lambda n: "".join(f"X{i} = {i} + {i}\n" for i in range(n)),
        500,
    ),
    "field_pairings": (
        lambda c: solve_signature.field_orders(*c),
        lambda n: (
            {f"t{i}": (i if i % 2 else "s") for i in range(min(n, 60))},
            {f"m{i}": ("s" if i % 2 else i) for i in range(min(n, 60))},
        ),
        6,
    ),
}


@pytest.mark.parametrize("name", sorted(PROBE_CASES))
def test_probes_solvers_and_signatures_are_linear(name):
    fn, make, n = PROBE_CASES[name]
    assert_linear(fn, make, n)


def test_a_reference_too_long_for_int_is_judged_as_a_string():
    """Python refuses int() of more than 4,300 digits: a reference of 5,000 is a string to the
    probes and the fuzzer (on main it raised ValueError in the parent and stopped the batch)."""
    ref = "9" * 5000
    ctx = probes.Context.of({"n": 1}, "digits", ref)
    assert probes.shape_of(ref).kind == "str"
    assert probes.near_misses(ref, ctx, "int") and probes.flood(ref, ctx, [])
    assert _plan(({"n": 1}, "digits", ref))
    assert leak_solvers.normalize("-000" + ref) == "-" + ref and leak_solvers.normalize("+000") == "0"


# a score of about 0.3 s: at 0.1 s the whole judgement ended inside the test's 20 s budget on a
# quiet 2-core machine and was admitted (the test passed only under load)
SLOW = b"""import random
NAME = "slow_scorer"
def generate(seed, difficulty):
    return {"n": random.Random(seed).randint(0, 10**6)}
def prompt(instance):
    return "What is n plus one?"
def solve(instance):
    return str(instance["n"] + 1)
def score(instance, answer):
    for _ in range(4_500_000):  # about 0.3 s: every check that scores pays it
        pass
    return 1.0 if answer.strip() == solve(instance) else 0.0
"""
FAST = SLOW.replace(b"slow_scorer", b"quick_scorer").replace(b"4_500_000", b"1")


@pytest.mark.slow
def test_a_judgement_past_its_budget_is_rejected_at_budget_and_the_batch_goes_on(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "a_slow.py").write_bytes(SLOW)
    (lib / "b_fast.py").write_bytes(FAST)
    out = prepare_out_dir(tmp_path / "out", resume=False, clean=False)
    cfg = ValidateConfig(max_judge_seconds=20)  # the quick one takes ~6 s here, loaded
    # small batches: the budget is checked between slices of what the pool runs at once
    runtime = RuntimeConfig(workers=2, limits=Limits(batch_size=4))
    summary = validate.run(EnvLibrary.open(lib), cfg, runtime, out)
    verdicts = {r["file"]: r for r in read_jsonl(out / "verdicts.jsonl")}
    slow, fast = verdicts["a_slow.py"], verdicts["b_fast.py"]
    assert slow["stage"] == "budget" and not slow["admitted"], slow
    ran_out = slow["reason"].split(" in the ")[1].split(" check")[0]
    assert ran_out in registry.stage_names() and ran_out != "budget", slow["reason"]
    assert "validate.max_judge_seconds" in slow["reason"] and slow["probe"] == "judge_seconds"
    # one slice past the budget at most: 8 calls of ~0.3 s on two workers, and the pool's own turn
    assert slow["wall_s"] < cfg.max_judge_seconds + 8
    assert fast["admitted"], fast
    assert summary.entered == 2


@pytest.mark.slow
def test_the_environment_at_the_caps_is_admitted(tmp_path):
    """Reference, prompt and instance just under their caps (on main, one such file held
    validate for over 15 minutes in the fuzzer); its time per size is `make bench`'s line."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "scaled_caps.py").write_text(scaled_env.source(*scaled_env.AT_CAPS, "scaled_caps"))
    # one number of 99,000 digits: on main, int() of it ended the whole validate run
    digits = scaled_env.source(*scaled_env.AT_CAPS, "scaled_caps_digits", alphabet="1234567890")
    (lib / "scaled_caps_digits.py").write_text(digits)
    out = prepare_out_dir(tmp_path / "out", resume=False, clean=False)
    validate.run(EnvLibrary.open(lib), ValidateConfig(), RuntimeConfig(workers=2), out)
    verdicts = list(read_jsonl(out / "verdicts.jsonl"))
    assert len(verdicts) == 2
    for verdict in verdicts:
        assert verdict["admitted"], verdict
        assert verdict["instance_bytes_max"] > 30_000 and verdict["fuzz_calls"] > 0
