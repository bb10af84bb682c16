"""A cargo plane takes crates up to a mass limit; what is the most worth it can carry? (re-skin of knapsack_max_value)."""

import random
import re

NAME = "cargo_plane_loading"
TAGS = ["optimization", "test-corpus"]
ANSWER_TYPE = "int"
AIRLINES = ("Nordwind", "Skylark Freight", "Condor Cargo", "Blue Heron Air")


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}|{seed}|{level}")
    crates = [{"mass": rng.randint(1, 4 + 2 * level), "worth": rng.randint(1, 10 * level)} for _ in range(3 + level)]
    limit = max(1, sum(c["mass"] for c in crates) // 2)
    return {"airline": rng.choice(AIRLINES), "crates": crates, "max_mass": limit}


def prompt(instance: dict) -> str:
    manifest = "; ".join(f"crate {k + 1} has mass {c['mass']} t and worth {c['worth']}k" for k, c in enumerate(instance["crates"]))
    return (
        f"{instance['airline']} is loading a freighter. The manifest: {manifest}. The hold takes "
        f"at most {instance['max_mass']} t. Which crates maximise the cargo's worth? Reply with "
        "that total worth (in thousands) as an integer."
    )


def solve(instance: dict) -> str:
    room = [0] * (instance["max_mass"] + 1)
    for crate in instance["crates"]:
        for left in range(instance["max_mass"], crate["mass"] - 1, -1):
            room[left] = max(room[left], room[left - crate["mass"]] + crate["worth"])
    return str(room[-1])


def score(instance: dict, answer: str) -> float:
    text = answer.strip() if isinstance(answer, str) else ""
    return 1.0 if re.fullmatch(r"\d{1,30}", text) and int(text) == int(solve(instance)) else 0.0
