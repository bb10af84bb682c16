"""Run-length decoding, queried at one position: the encoded text "3a2b" stands for "aaabb";
which letter is at position k of the decoded text? A cumulative sum answers it; by hand one
must add run lengths carefully."""

import random

NAME = "run_length_decode_char"
TAGS = ["strings", "prefix-sums"]
ANSWER_TYPE = "str"


def generate(seed, difficulty):
    lvl = max(1, min(10, int(difficulty)))
    rng = random.Random(seed * 104729 + lvl * 13)
    runs, prev = [], ""
    for _ in range(3 + 2 * lvl):
        letter = rng.choice([c for c in "abcdefghijklmnopqrstuvwxyz" if c != prev])
        runs.append([rng.randint(1, 4 + 3 * lvl), letter])
        prev = letter
    total = sum(n for n, _ in runs)
    return {"runs": runs, "position": rng.randint(1, total)}


def prompt(instance):
    code = "".join(f"{n}{ch}" for n, ch in instance["runs"])
    return (
        f"The run-length code {code} stands for a text in which each number says how many times "
        "the letter after it repeats (so 3a2b means aaabb). Counting positions from 1, which "
        f"letter stands at position {instance['position']} of the text? Answer with the letter."
    )


def solve(instance):
    remaining = instance["position"]
    for count, letter in instance["runs"]:
        if remaining <= count:
            return letter
        remaining -= count
    raise ValueError("position past the end")


def score(instance, answer):
    if not isinstance(answer, str):
        return 0.0
    cleaned = answer.strip().strip("'\"").lower()
    return 1.0 if len(cleaned) == 1 and cleaned == solve(instance) else 0.0
