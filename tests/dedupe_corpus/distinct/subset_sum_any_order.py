"""Pick weights that balance a scale: from a list of weights, choose some (each at most once)
whose total equals a given load. A choice is planted, so one exists; any valid choice counts,
listed in any order. Exhaustive search doubles with every weight, while checking a choice is
one sum."""

import random
import re

NAME = "subset_sum_any_order"
TAGS = ["planted", "search", "arithmetic"]
ANSWER_TYPE = "list[int]"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}-{level}-{seed}")
    count = 5 + 2 * level
    weights = [rng.randint(3, 3 * 2 ** (3 + level)) for _ in range(count)]
    k = rng.randint(2, max(2, count // 2))
    picked = rng.sample(range(1, count + 1), k)
    return {"weights": weights, "load": sum(weights[i - 1] for i in picked), "picked": picked}


def prompt(instance: dict) -> str:
    rows = "\n".join(f"weight #{i}: {w} g" for i, w in enumerate(instance["weights"], start=1))
    return (
        f"{rows}\n\nSelect some of these weights, each at most once, whose masses add up to "
        f"exactly {instance['load']} g. At least one selection works, and any correct one is "
        "accepted. Answer with the weight numbers (the # labels) of your selection, separated "
        "by commas, in any order."
    )


def solve(instance: dict) -> str:
    return ", ".join(str(i) for i in instance["picked"])


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 3000:
        return 0.0
    labels = re.findall(r"[^\s,]+", answer)
    if not labels or any(not re.fullmatch(r"#?\d{1,3}", x) for x in labels):
        return 0.0
    chosen = [int(x.lstrip("#")) for x in labels]
    weights = instance["weights"]
    if len(set(chosen)) != len(chosen) or not all(1 <= i <= len(weights) for i in chosen):
        return 0.0
    return 1.0 if sum(weights[i - 1] for i in chosen) == instance["load"] else 0.0
