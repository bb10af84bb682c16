"""A warehouse ledger of stock moves (set, add, sub, mul, and jump-back lines) over four bins; how much is left in the bin asked about? (re-skin of register_machine)."""

import random
import re

NAME = "warehouse_ledger_machine"
TAGS = ["simulation", "test-corpus"]
ANSWER_TYPE = "int"
M = 1000


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    lines = []
    for _ in range(2 + level):
        op = rng.choice(("set", "add", "sub", "mul"))
        lines.append({"op": op, "bin": rng.choice("abcd"), "by": rng.choice(["a", "b", "c", "d", rng.randint(0, 9)])})
    return {"opening": {"a": rng.randint(0, 99), "b": rng.randint(0, 99)}, "ledger": lines, "report": rng.choice("abcd")}


def prompt(instance: dict) -> str:
    rows = "\n".join(f"{k + 1}. {e['op']} {e['bin']} {e['by']}" for k, e in enumerate(instance["ledger"]))
    return (
        f"Bins a, b, c, d start at a = {instance['opening']['a']}, b = {instance['opening']['b']}, c = 0, d = 0 "
        f"(counts mod {M}). Ledger lines, in order:\n{rows}\n(set x y: x = y; add/sub/mul x y: x = x op y mod {M}; "
        f"y is a bin or a number.) What is bin {instance['report']} at the end?"
    )


def solve(instance: dict) -> str:
    bins = {"a": 0, "b": 0, "c": 0, "d": 0, **instance["opening"]}
    k = 0
    while k < len(instance["ledger"]):
        e = instance["ledger"][k]
        k += 1
        y = bins[e["by"]] if isinstance(e["by"], str) else e["by"]
        if e["op"] == "jnz":
            k = y - 1 if bins[e["bin"]] else k
        elif e["op"] == "set":
            bins[e["bin"]] = y
        elif e["op"] == "add":
            bins[e["bin"]] = (bins[e["bin"]] + y) % M
        elif e["op"] == "sub":
            bins[e["bin"]] = (bins[e["bin"]] - y) % M
        elif e["op"] == "mul":
            bins[e["bin"]] = (bins[e["bin"]] * y) % M
    return str(bins[instance["report"]])


def score(instance: dict, answer: str) -> float:
    text = answer.strip() if isinstance(answer, str) else ""
    return 1.0 if re.fullmatch(r"\d{1,30}", text) and int(text) == int(solve(instance)) else 0.0
