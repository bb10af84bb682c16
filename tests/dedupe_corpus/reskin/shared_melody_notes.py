"""Two melodies as note sequences: how many notes long is the longest tune both contain in order, skipping notes where needed? (re-skin of lcs_length)."""

import random

NAME = "shared_melody_notes"
TAGS = ["dp", "strings", "music"]
ANSWER_TYPE = "int"

NOTES = ["do", "re", "mi", "fa"]


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"melody#{seed}#{level}")
    palette = NOTES[: 2 + min(2, level // 3)]
    size = 5 + 4 * level
    return {"tune_a": [rng.choice(palette) for _ in range(size)],
            "tune_b": [rng.choice(palette) for _ in range(size + rng.randint(-2, 2))]}


def prompt(instance):
    return (
        "Melody one: " + " ".join(instance["tune_a"]) + "\nMelody two: " + " ".join(instance["tune_b"]) +
        "\n\nA hidden tune can be played from a melody by skipping some of its notes (never "
        "reordering). What is the largest number of notes of a tune hidden in both melodies? "
        "Answer with an integer."
    )


def solve(instance):
    a, b = instance["tune_a"], instance["tune_b"]
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            table[i][j] = table[i - 1][j - 1] + 1 if a[i - 1] == b[j - 1] else max(table[i - 1][j], table[i][j - 1])
    return str(table[-1][-1])


def score(instance, answer):
    if not isinstance(answer, str) or not answer.strip().isdigit() or len(answer.strip()) > 5:
        return 0.0
    return 1.0 if int(answer.strip()) == int(solve(instance)) else 0.0
