"""Size of a Huffman encoding: given letter frequencies, how many bits does an optimal prefix
code need for the whole text? Repeatedly merging the two rarest weights with a heap gives
it; by hand the merge order is easy to get wrong."""

import heapq
import random
import re

NAME = "huffman_total_bits"
TAGS = ["algorithmic", "greedy", "compression"]
ANSWER_TYPE = "int"


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    letters = "ETAOINSHRDLUCMFWYPGB"[: 3 + difficulty + difficulty // 2]
    return {"counts": {letter: rng.randint(1, 10 * difficulty + 5) for letter in letters}}


def prompt(instance: dict) -> str:
    counts = ", ".join(f"{letter}: {count}" for letter, count in instance["counts"].items())
    return (
        f"A text uses these letters, each this many times: {counts}.\n\n"
        "It is encoded with an optimal binary prefix code (a Huffman code), one codeword per "
        "letter. How many bits long is the encoded text? Give the number of bits as a single "
        "integer."
    )


def solve(instance: dict) -> str:
    heap = list(instance["counts"].values())
    heapq.heapify(heap)
    bits = 0
    while len(heap) > 1:
        merged = heapq.heappop(heap) + heapq.heappop(heap)
        bits += merged
        heapq.heappush(heap, merged)
    return str(bits)


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str):
        return 0.0
    text = answer.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        return 0.0
    return 1.0 if int(text) == int(solve(instance)) else 0.0
