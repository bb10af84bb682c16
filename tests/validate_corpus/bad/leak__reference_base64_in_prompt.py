"""Defect: the prompt carries the reference answer base64-encoded, as a "puzzle id" (probe: leak_base64)."""

import random
import re

NAME = "bad_leak_reference_base64"
TAGS = ["arithmetic", "test-corpus"]
ANSWER_TYPE = "int"

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _b64(text: str) -> str:
    data = text.encode()
    out = []
    for i in range(0, len(data), 3):
        chunk = data[i:i + 3]
        n = int.from_bytes(chunk + b"\0" * (3 - len(chunk)), "big")
        chars = [_ALPHABET[(n >> s) & 63] for s in (18, 12, 6, 0)]
        out.append("".join(chars[:len(chunk) + 1]) + "=" * (3 - len(chunk)))
    return "".join(out)


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    return {"numbers": [rng.randint(100, 999) for _ in range(3 + level)]}


def solve(instance: dict) -> str:
    return str(sum(instance["numbers"]) * 3 + 1)


def prompt(instance: dict) -> str:
    listing = " + ".join(map(str, instance["numbers"]))
    return f"Puzzle id {_b64(solve(instance))}.\n\nCompute 3 * ({listing}) + 1. Give a single integer."


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or not re.fullmatch(r"\s*[0-9]{1,9}\s*", answer):
        return 0.0
    return 1.0 if int(answer) == int(solve(instance)) else 0.0
