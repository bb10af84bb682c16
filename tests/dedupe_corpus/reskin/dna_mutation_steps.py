"""The fewest point mutations (insert, delete or change one base) turning one DNA strand into another (re-skin of edit_distance)."""

import random

NAME = "dna_mutation_steps"
TAGS = ["dp", "strings", "biology"]
ANSWER_TYPE = "int"

BASES = "ACGT"


def _mutate(rng, strand, count):
    spots = set(rng.sample(range(len(strand) + 1), min(count, len(strand) + 1)))
    out = []
    for i in range(len(strand) + 1):
        base = strand[i] if i < len(strand) else ""
        if i not in spots:
            out.append(base)
            continue
        kind = rng.choice(("ins", "del", "sub")) if base else "ins"
        if kind == "ins":
            out.append(rng.choice(BASES) + base)
        elif kind == "sub":
            out.append(rng.choice([b for b in BASES if b != base]))
    return "".join(out)


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"dna/{seed}/{level}")
    length = rng.randint(2 + 3 * level, 4 + 3 * level)
    original = "".join(rng.choice(BASES) for _ in range(length))
    return {"parent": original, "child": _mutate(rng, original, rng.randint(1, 1 + length))}


def prompt(instance):
    return (
        f"Parent strand: {instance['parent']}\nChild strand:  {instance['child']}\n\n"
        "A point mutation inserts one base, deletes one base, or replaces one base by another. "
        "What is the smallest number of point mutations that turns the parent strand into the "
        "child strand? Answer with a whole number."
    )


def solve(instance):
    a, b = instance["parent"], instance["child"]
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        new = [i]
        for j, y in enumerate(b, start=1):
            new.append(min(row[j] + 1, new[j - 1] + 1, row[j - 1] + (x != y)))
        row = new
    return str(row[-1])


def score(instance, answer):
    if not isinstance(answer, str):
        return 0.0
    try:
        value = int(answer.strip()) if answer.strip().isdigit() else None
    except ValueError:
        value = None
    return 1.0 if value is not None and value == int(solve(instance)) else 0.0
