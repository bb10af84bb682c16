"""Daily temperatures: how many days long is the longest run of days (not necessarily consecutive) on which it got strictly warmer each time? (re-skin of longest_increasing_subsequence)."""

import bisect
import random

NAME = "rising_temperature_streak"
TAGS = ["dp", "sequence"]
ANSWER_TYPE = "int"


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"weather:{seed}:{level}")
    mid = round(8 * 20 ** ((level - 1) / 9))
    days = rng.randint(mid - mid // 4, mid + mid // 4)
    spread = 2 * days
    drift = rng.uniform(-3.0, 3.0) * spread / days
    raw = [rng.randint(0, spread) + round(drift * i) for i in range(days)]
    offset = rng.randint(days + 1, 4 * days) - min(raw)
    return {"readings": [t + offset for t in raw]}


def prompt(instance):
    readings = ", ".join(str(t) for t in instance["readings"])
    return (
        f"A weather station logged these daily readings, in order:\n\n{readings}\n\n"
        "Pick some of the days, keeping them in calendar order, so that every picked day is "
        "strictly warmer than the picked day before it. What is the largest number of days "
        "you can pick? Answer with one integer."
    )


def solve(instance):
    tails = []
    for t in instance["readings"]:
        k = bisect.bisect_left(tails, t)
        if k == len(tails):
            tails.append(t)
        else:
            tails[k] = t
    return str(len(tails))


def score(instance, answer):
    if not isinstance(answer, str) or len(answer.strip()) > 6 or not answer.strip().isdigit():
        return 0.0
    return 1.0 if int(answer) == int(solve(instance)) else 0.0
