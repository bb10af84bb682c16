"""Coin ways (distinct from circle_elimination_last, same scaffold): in how many ways can an
amount be paid with unlimited coins of the given values, order ignored? Written in the shared
template a policy shown one example would copy: the scaffolding outweighs the task."""

import random
import re

NAME = "coin_ways_scaffolded"
TAGS = ["algorithmic", "dp", "test-corpus"]
ANSWER_TYPE = "int"

_LOW = (5, 8, 12, 18, 25, 35, 50, 70, 95, 130)
_HIGH = (9, 14, 20, 28, 40, 55, 80, 110, 150, 200)


def _level(difficulty) -> int:
    try:
        value = int(difficulty)
    except (TypeError, ValueError):
        value = 1
    return max(1, min(10, value))


def _rng(seed, level: int) -> random.Random:
    return random.Random(f"{NAME}:{seed}:{level}")


def _bounds(level: int) -> tuple[int, int]:
    return _LOW[level - 1], _HIGH[level - 1]


def _parse(answer) -> int | None:
    if not isinstance(answer, str):
        return None
    text = answer.strip().rstrip(".")
    if text.startswith("+"):
        text = text[1:]
    if not re.fullmatch(r"-?[0-9]{1,40}", text):
        return None
    return int(text)


def _finish(lines: list[str]) -> str:
    body = "\n".join(line for line in lines if line)
    return body + "\nAnswer with a single integer and nothing else."


def generate(seed: int, difficulty: int) -> dict:
    level = _level(difficulty)
    rng = _rng(seed, level)
    low, high = _bounds(level)
    coins = sorted(rng.sample(range(1, 4 + level), 2 + level // 3))
    return {"coins": coins, "amount": rng.randint(low, high)}


def prompt(instance: dict) -> str:
    return _finish(
        [
            f"You may use any number of coins worth {', '.join(map(str, instance['coins']))}.",
            f"In how many ways can you pay exactly {instance['amount']}?",
            "Two ways are the same when they use the same coins in another order.",
        ]
    )


def solve(instance: dict) -> str:
    ways = [1] + [0] * instance["amount"]
    for coin in instance["coins"]:
        for total in range(coin, instance["amount"] + 1):
            ways[total] += ways[total - coin]
    return str(ways[instance["amount"]])


def score(instance: dict, answer: str) -> float:
    value = _parse(answer)
    if value is None:
        return 0.0
    return 1.0 if value == int(solve(instance)) else 0.0
