"""A recipe's steps with "this before that" rules; the order a cook takes, always the lowest-numbered step that is ready (re-skin of topological_order)."""

import heapq
import random
import re

NAME = "recipe_step_order"
TAGS = ["graphs", "test-corpus"]
ANSWER_TYPE = "list[int]"
DISHES = ("risotto", "ramen", "paella", "tagine", "lasagne")


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    steps = 3 + 2 * level
    hidden = rng.sample(range(steps), steps)
    rules = set()
    for _ in range(steps + level):
        i, j = sorted(rng.sample(range(steps), 2))
        rules.add((hidden[i], hidden[j]))
    return {"dish": rng.choice(DISHES), "steps": steps, "rules": [{"first": a, "then": b} for a, b in sorted(rules)]}


def prompt(instance: dict) -> str:
    rules = "; ".join(f"step {r['first']} before step {r['then']}" for r in instance["rules"])
    return (
        f"Cooking {instance['dish']} takes steps 0 to {instance['steps'] - 1}, with these rules: {rules}. "
        "The cook always does the lowest-numbered step whose earlier steps are done. List the steps in "
        "the cook's order, separated by spaces."
    )


def solve(instance: dict) -> str:
    after = {s: [] for s in range(instance["steps"])}
    waiting = [0] * instance["steps"]
    for r in instance["rules"]:
        after[r["first"]].append(r["then"])
        waiting[r["then"]] += 1
    ready = [s for s in range(instance["steps"]) if waiting[s] == 0]
    heapq.heapify(ready)
    done = []
    while ready:
        s = heapq.heappop(ready)
        done.append(s)
        for t in after[s]:
            waiting[t] -= 1
            if waiting[t] == 0:
                heapq.heappush(ready, t)
    return " ".join(map(str, done))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 4000:
        return 0.0
    got = re.findall(r"-?\d+", answer)
    return 1.0 if " ".join(got) == solve(instance) and re.fullmatch(r"[\d\s,]*", answer) else 0.0
