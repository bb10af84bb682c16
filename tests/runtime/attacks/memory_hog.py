"""Attack: allocate far more memory than the worker may have (one 10 GiB block, or 1 MiB
blocks in a loop bounded at 2 GiB)."""

NAME = "attack_memory_hog"


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    if answer == "bytearray":
        blob = bytearray(10 * 1024**3)
        return 1.0 if len(blob) else 0.0
    if answer == "grow":
        chunks = []
        try:
            for _ in range(2048):  # bounded: at most 2 GiB even with no limit at all
                chunks.append(bytearray(1024 * 1024))
        except MemoryError:
            got = len(chunks)
            chunks.clear()
            raise RuntimeError(f"refused after {got} MiB") from None
        return 1.0
    return 1.0 if answer == solve(instance) else 0.0
