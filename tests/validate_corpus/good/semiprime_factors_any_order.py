"""Factor a semiprime: the product of two primes is given, and both primes are asked for, in
either order. Trial division by every candidate is a short loop in code but hopeless in one's
head once the primes have four or five digits, while checking an answer is one multiplication
and two primality tests."""

import random
import re

NAME = "semiprime_factors_any_order"
TAGS = ["number-theory", "factoring", "test-corpus"]
ANSWER_TYPE = "list[int]"


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    f = 3
    while f * f <= n:
        if n % f == 0:
            return False
        f += 2
    return True


def _prime_near(rng: random.Random, low: int, high: int) -> int:
    while True:
        candidate = rng.randint(low, high)
        if _is_prime(candidate):
            return candidate


def generate(seed: int, difficulty: int) -> dict:
    d = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{d}")
    low, high = 5 * d * d, 60 * d * d + 40
    p, q = _prime_near(rng, low, high), _prime_near(rng, low, high)
    return {"n": p * q, "factors": sorted([p, q])}


def prompt(instance: dict) -> str:
    return (
        f"The number {instance['n']} is the product of two prime numbers (possibly equal). "
        "Find them. Give the two primes separated by a single space, in either order."
    )


def solve(instance: dict) -> str:
    return " ".join(map(str, instance["factors"]))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 200:
        return 0.0
    parts = answer.replace(",", " ").split()
    if len(parts) != 2 or not all(re.fullmatch(r"[0-9]{1,12}", p) for p in parts):
        return 0.0
    a, b = int(parts[0]), int(parts[1])
    if a * b != instance["n"]:
        return 0.0
    return 1.0 if _is_prime(a) and _is_prime(b) else 0.0
