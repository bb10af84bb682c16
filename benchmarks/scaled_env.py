"""A valid environment whose output sizes are set by hand: the reference, the prompt and the
instance of a chosen length each, up to just under their caps (runtime.limits.max_answer_chars,
max_prompt_chars, validate.budget_instance_bytes). validate's cost must grow with them no faster
than linearly; `make bench` (bench_validate.py) and tests/checks/test_linear_admission.py judge it.
"""

from __future__ import annotations

# 1x is what a seed writes at difficulty 10 (seeds/, measured on this commit): the longest
# answer a seed gives (graph_coloring_planted, 119 characters), and a prompt and an instance of
# a typical seed's size (the medians are 870 characters and 530 bytes): so that 16x still fits
# under the prompt's cap.
SEED_REFERENCE_CHARS = 120
SEED_PROMPT_CHARS = 480
SEED_INSTANCE_BYTES = 500
# just under the caps: 100,000 answer characters, 8,000 prompt characters, 32,768 instance bytes
AT_CAPS = (99_000, 7_900, 32_000)

TEMPLATE = '''"""Copy a string of characters, each moved one place on in its alphabet (the last to the
first), as many times over as the answer's length asks. Sized by hand for validate's cost
benchmark."""

import random

NAME = "{name}"
TAGS = ["benchmark"]
ANSWER_TYPE = "str"
REFERENCE_CHARS = {reference}
PROMPT_CHARS = {prompt}
LETTERS = {letters}
ALPHABET = {alphabet!r}
_NEXT = str.maketrans(ALPHABET, ALPHABET[1:] + ALPHABET[0])


def generate(seed, difficulty):
    rng = random.Random(f"{{NAME}}:{{seed}}:{{difficulty}}")
    return {{"letters": "".join(rng.choice(ALPHABET) for _ in range(LETTERS))}}


def prompt(instance):
    head = f"Move every character one place on in {{ALPHABET}} (the last to the first) and write it out "
    head += f"until it is {{REFERENCE_CHARS}} letters long: "
    return (head + instance["letters"] * (1 + PROMPT_CHARS // LETTERS))[:PROMPT_CHARS]


def solve(instance):
    moved = instance["letters"].translate(_NEXT)
    return (moved * (1 + REFERENCE_CHARS // len(moved)))[:REFERENCE_CHARS]


def score(instance, answer):
    return 1.0 if answer.strip() == solve(instance) else 0.0
'''


def source(
    reference_chars: int, prompt_chars: int, instance_bytes: int, name: str, alphabet: str = "abcdefghij"
) -> str:
    """The environment's source, its answer `reference_chars` long, its prompt `prompt_chars`
    and its instance about `instance_bytes` of JSON, over `alphabet` (digits: the answer is one
    long number, longer than Python's int() takes at the caps)."""
    letters = max(8, instance_bytes - len('{"letters": ""}'))
    return TEMPLATE.format(
        name=name, reference=reference_chars, prompt=prompt_chars, letters=letters, alphabet=alphabet
    )


def scaled(factor: int) -> tuple[int, int, int]:
    """(reference chars, prompt chars, instance bytes) at `factor` times a seed's."""
    return (SEED_REFERENCE_CHARS * factor, SEED_PROMPT_CHARS * factor, SEED_INSTANCE_BYTES * factor)
