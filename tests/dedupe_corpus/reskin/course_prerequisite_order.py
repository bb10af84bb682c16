"""Plan the order of courses under prerequisites, taking the lowest-numbered available course first (re-skin of topological_order)."""

import heapq
import random

NAME = "course_prerequisite_order"
TAGS = ["graph", "ordering"]
ANSWER_TYPE = "list[int]"


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"courses|{seed}|{level}")
    n = 4 + 2 * level
    secret = list(range(n))
    rng.shuffle(secret)
    candidates = [(secret[i], secret[j]) for i in range(n) for j in range(i + 1, n)]
    prereqs = sorted(rng.sample(candidates, min(len(candidates), round(1.5 * n))))
    return {"courses": n, "prereqs": [list(p) for p in prereqs]}


def prompt(instance):
    rules = "\n".join(f"course {a} must be taken before course {b}" for a, b in instance["prereqs"])
    return (
        f"A student must take courses 0 to {instance['courses'] - 1}, one at a time.\n{rules}\n\n"
        "Each time, the student takes the lowest-numbered course whose prerequisites are all "
        "done. In what order are the courses taken? List the course numbers, separated by spaces."
    )


def _plan(n, prereqs):
    after = [[] for _ in range(n)]
    missing = [0] * n
    for a, b in prereqs:
        after[a].append(b)
        missing[b] += 1
    ready = [c for c in range(n) if not missing[c]]
    heapq.heapify(ready)
    order = []
    while ready:
        c = heapq.heappop(ready)
        order.append(c)
        for nxt in after[c]:
            missing[nxt] -= 1
            if not missing[nxt]:
                heapq.heappush(ready, nxt)
    return order


def solve(instance):
    return " ".join(map(str, _plan(instance["courses"], instance["prereqs"])))


def score(instance, answer):
    if not isinstance(answer, str) or len(answer) > 1000:
        return 0.0
    words = answer.replace(",", " ").split()
    if not words or not all(w.isdigit() for w in words):
        return 0.0
    return 1.0 if [int(w) for w in words] == _plan(instance["courses"], instance["prereqs"]) else 0.0
