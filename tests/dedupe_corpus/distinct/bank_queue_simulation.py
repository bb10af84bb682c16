"""A bank with several tellers serves customers in arrival order, each at the first teller to
come free: at what minute does the last customer leave? An event simulation with a heap is a
few lines; by hand one juggles every teller's clock."""

import heapq
import random

NAME = "bank_queue_simulation"
TAGS = ["simulation", "queues", "heap"]
ANSWER_TYPE = "int"


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"bank/{level}/{seed}")
    tellers = 1 + level // 3
    arrivals, t = [], 0
    for _ in range(3 + 2 * level):
        t += rng.randint(0, 6)
        arrivals.append([t, rng.randint(2, 15)])
    return {"tellers": tellers, "customers": arrivals}


def prompt(instance):
    listing = "\n".join(f"customer {i + 1}: arrives at minute {a}, needs {s} minutes"
                        for i, (a, s) in enumerate(instance["customers"]))
    return (
        f"A bank has {instance['tellers']} teller(s). Customers are served in order of arrival; "
        "each goes to a teller as soon as one is free (or waits in line), and keeps that teller "
        "for the time they need.\n" + listing +
        "\n\nAt what minute does the last customer finish? Give the minute as an integer."
    )


def solve(instance):
    free_at = [0] * instance["tellers"]
    heapq.heapify(free_at)
    finish = 0
    for arrive, need in instance["customers"]:
        start = max(arrive, heapq.heappop(free_at))
        heapq.heappush(free_at, start + need)
        finish = max(finish, start + need)
    return str(finish)


def score(instance, answer):
    if not isinstance(answer, str):
        return 0.0
    words = answer.strip().split()
    if len(words) == 2 and words[0].lower() == "minute":
        words = words[1:]
    if len(words) != 1 or not words[0].isdigit() or len(words[0]) > 6:
        return 0.0
    return 1.0 if int(words[0]) == int(solve(instance)) else 0.0
