"""In how many ways can a postage amount be paid with stamps of given values, order not mattering? (re-skin of coin_change_ways)."""

import random

NAME = "postage_stamp_combinations"
TAGS = ["dp", "counting"]
ANSWER_TYPE = "int"

MOD = 1_000_000_007


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"stamps-{seed}-{level}")
    kinds = (2, 2, 3, 3, 4, 5, 5, 6, 7, 8)[level - 1]
    while True:
        stamps = sorted(rng.sample(range(1, 4 + 2 * level), kinds))
        postage = rng.randint(5 + 10 * level ** 2, 10 + 20 * level ** 2)
        if _ways(stamps, postage) > 0:
            return {"stamps": stamps, "postage": postage, "modular": level >= 9}


def _ways(stamps, postage):
    count = [1] + [0] * postage
    for s in stamps:
        for cents in range(s, postage + 1):
            count[cents] += count[cents - s]
    return count[postage]


def prompt(instance):
    values = ", ".join(f"{s}c" for s in instance["stamps"])
    tail = (f" Because the number is large, give it modulo {MOD}." if instance["modular"] else "")
    return (
        f"The post office sells stamps worth {values}, as many of each as you like. A parcel "
        f"needs exactly {instance['postage']}c of postage. Two ways count as the same if they use "
        "the same number of stamps of each value (the order of sticking does not matter). How "
        "many different ways are there?" + tail + " Answer with one integer."
    )


def solve(instance):
    n = _ways(instance["stamps"], instance["postage"])
    return str(n % MOD if instance["modular"] else n)


def score(instance, answer):
    if not isinstance(answer, str) or len(answer) > 80:
        return 0.0
    cleaned = answer.strip()
    return 1.0 if cleaned.isdigit() and int(cleaned) == int(solve(instance)) else 0.0
