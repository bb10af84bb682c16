"""Villages must all be joined by water pipes; which pipe routes to lay for the least total cost? (re-skin of mst_weight)."""

import random

NAME = "village_pipe_network"
TAGS = ["graph", "greedy"]
ANSWER_TYPE = "int"

VILLAGES = ["Ashby", "Brook", "Crane", "Dale", "Esk", "Fold", "Garth", "Holm", "Ings", "Keld",
            "Lund", "Moss", "Ness", "Oak", "Pike", "Rigg", "Scar", "Thwaite", "Ulph", "Wray",
            "Yeld", "Zell", "Beck", "Cove"]


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"pipes/{seed}/{level}")
    n = 4 + 2 * level
    routes = [[rng.randrange(v), v, rng.randint(1, 50)] for v in range(1, n)]
    for _ in range(rng.randint(n // 2, n + level)):
        a, b = rng.sample(range(n), 2)
        routes.append([min(a, b), max(a, b), rng.randint(1, 50)])
    rng.shuffle(routes)
    return {"villages": n, "routes": routes}


def prompt(instance):
    name = VILLAGES
    text = "\n".join(f"{name[a]} - {name[b]}: {cost} thousand" for a, b, cost in instance["routes"])
    return (
        f"The county wants every one of its {instance['villages']} villages connected to the same "
        "water network (directly or through other villages). Possible pipe routes and their "
        f"costs:\n{text}\n\nWhat is the smallest total cost, in thousands, of a set of routes that "
        "connects all the villages? Reply with an integer."
    )


def solve(instance):
    group = list(range(instance["villages"]))

    def root(v):
        while group[v] != v:
            v = group[v]
        return v

    cost = 0
    for a, b, price in sorted(instance["routes"], key=lambda r: r[2]):
        ra, rb = root(a), root(b)
        if ra != rb:
            group[ra] = rb
            cost += price
    return str(cost)


def score(instance, answer):
    if not isinstance(answer, str) or not answer.strip().isdigit() or len(answer.strip()) > 7:
        return 0.0
    return 1.0 if int(answer) == int(solve(instance)) else 0.0
