"""Count the ways to pay an exact amount with an unlimited supply of coins of given
denominations, where the order of the coins does not matter (at high difficulty, modulo a
stated prime). A counting dynamic program is five lines of code, but by hand the
combinations must be enumerated without missing or double-counting any, and their number
grows far beyond what one can list."""

import random
import re

NAME = "coin_change_ways"
TAGS = ["algorithmic", "dp", "counting"]
ANSWER_TYPE = "int"
INPUT_TYPE = "int"

PRIME = 1_000_000_007
_MODULO_FROM = 9  # difficulties from here on ask for the count modulo PRIME
# By difficulty 1 to 10: how many coin values, the largest value a coin may have, and the
# amount's range, which grows about geometrically from 4-12 (two small coins, a few ways to
# list at a glance) to over a thousand.
_COIN_COUNTS = (2, 2, 3, 3, 4, 5, 5, 6, 7, 8)
_LARGEST_COINS = (4, 5, 6, 7, 9, 11, 13, 16, 19, 23)
_SMALLEST_AMOUNTS = (4, 8, 14, 25, 47, 86, 160, 295, 545, 1005)
_LARGEST_AMOUNTS = (12, 20, 32, 55, 100, 180, 330, 600, 1100, 2010)


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def _amount_range(difficulty: int) -> tuple[int, int]:
    return _SMALLEST_AMOUNTS[difficulty - 1], _LARGEST_AMOUNTS[difficulty - 1]


def _coins(rng: random.Random, difficulty: int) -> list[int]:
    largest = _LARGEST_COINS[difficulty - 1]
    return sorted(rng.sample(range(1, largest + 1), _COIN_COUNTS[difficulty - 1]))


def _count(coins: list[int], amount: int) -> int:
    ways = [1] + [0] * amount
    for coin in coins:
        for total in range(coin, amount + 1):
            ways[total] += ways[total - coin]
    return ways[amount]


def _instance(coins: list[int], amount: int, difficulty: int) -> dict:
    return {
        "coins": coins,
        "amount": amount,
        "modulus": PRIME if difficulty >= _MODULO_FROM else None,
    }


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    low, high = _amount_range(difficulty)
    while True:
        coins, amount = _coins(rng, difficulty), rng.randint(low, high)
        if _count(coins, amount) > 0:
            return _instance(coins, amount, difficulty)


def generate_from(value: int, seed: int, difficulty: int) -> dict:
    """An instance whose amount is value itself when it lies in the difficulty's amount
    range, else value mapped into that range by modulo (any int, negative or huge); the count
    may then be 0."""
    if not isinstance(value, int):
        raise TypeError(f"value must be an int, not {type(value).__name__}")
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:from:{seed}:{difficulty}")
    low, high = _amount_range(difficulty)
    amount = value if low <= value <= high else low + value % (high - low + 1)
    return _instance(_coins(rng, difficulty), amount, difficulty)


def prompt(instance: dict) -> str:
    coins = ", ".join(str(coin) for coin in instance["coins"])
    modulus = instance["modulus"]
    ask = (
        f"Give the number of ways modulo {modulus} (the remainder after dividing it by "
        f"{modulus}) as a single integer."
        if modulus
        else "Give the number of ways as a single integer."
    )
    return (
        f"You have an unlimited supply of coins of each of these values: {coins}.\n"
        f"In how many different ways can you pay exactly {instance['amount']}? Two ways are "
        "the same when they use the same number of coins of each value; the order of the "
        f"coins does not matter. {ask}"
    )


def solve(instance: dict) -> str:
    count = _count(instance["coins"], instance["amount"])
    return str(count % instance["modulus"] if instance["modulus"] else count)


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,60}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
