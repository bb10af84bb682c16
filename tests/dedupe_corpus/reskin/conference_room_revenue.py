"""A conference room rents to one event at a time; which event requests to accept for the most revenue? (re-skin of weighted_interval_schedule)."""

import bisect
import random

NAME = "conference_room_revenue"
TAGS = ["dp", "scheduling"]
ANSWER_TYPE = "int"


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"rooms:{seed}:{level}")
    n = 3 + 2 * level
    day = 6 * n
    requests = []
    for _ in range(n):
        begin = rng.randrange(0, day - 2)
        requests.append({"begin": begin, "finish": min(day, begin + rng.randint(2, max(3, day // 4))),
                         "offer": rng.randint(5, 60)})
    return {"requests": requests}


def prompt(instance):
    lines = "\n".join(f"event {chr(65 + i % 26)}{i // 26 or ''}: slot {r['begin']} to {r['finish']}, offers {r['offer']} credits"
                      for i, r in enumerate(instance["requests"]))
    return (
        "Event requests for a single conference room:\n" + lines +
        "\n\nThe room hosts one event at a time; an event may begin in the slot where another "
        "finishes. Accepting any set of events whose times do not overlap, what is the largest "
        "total number of credits the room can earn? Reply with an integer."
    )


def solve(instance):
    reqs = sorted(instance["requests"], key=lambda r: r["finish"])
    finishes = [r["finish"] for r in reqs]
    dp = [0]
    for i, r in enumerate(reqs):
        j = bisect.bisect_right(finishes, r["begin"], 0, i)
        dp.append(max(dp[-1], dp[j] + r["offer"]))
    return str(dp[-1])


def score(instance, answer):
    if not isinstance(answer, str) or not answer.strip().isdigit() or len(answer.strip()) > 8:
        return 0.0
    return float(int(answer.strip()) == int(solve(instance)))
