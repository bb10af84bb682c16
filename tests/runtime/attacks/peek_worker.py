"""Attack: read the memory of another process (another environment's worker, given by
instance["pid"]) through /proc/<pid>/mem. Returns 1.0 if any byte was read, raises with the
refusal otherwise."""

NAME = "attack_peek_worker"


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    if answer == "attack":
        pid = instance["pid"]
        try:
            with open(f"/proc/{pid}/maps") as f:
                regions = [line.split() for line in f.read(1 << 20).splitlines()]
            start = next(int(r[0].split("-")[0], 16) for r in regions if r[1].startswith("r"))
            with open(f"/proc/{pid}/mem", "rb") as f:
                f.seek(start)
                data = f.read(64)
        except (OSError, ValueError, StopIteration) as exc:
            raise RuntimeError(f"refused: {type(exc).__name__} {getattr(exc, 'errno', '')}") from None
        return 1.0 if data else 0.0
    return 1.0 if answer == solve(instance) else 0.0
