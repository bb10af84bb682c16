"""Attack: write instance["files"] files of instance["mib"] MiB each into instance["dir"]
(bounded: at most files * mib MiB). Returns 1.0 if everything was written, raises with how
much got through otherwise."""

import os

NAME = "attack_fill_disk"


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    if answer == "attack":
        block = b"x" * (1024 * 1024)
        written = 0
        try:
            for i in range(instance["files"]):
                path = os.path.join(instance["dir"], f"{instance['prefix']}{i}")
                with open(path, "wb") as f:
                    for _ in range(instance["mib"]):
                        f.write(block)
                        f.flush()
                        written += 1
        except OSError as exc:
            raise RuntimeError(f"stopped after {written} MiB: {type(exc).__name__} errno {exc.errno}") from None
        return 1.0
    return 1.0 if answer == solve(instance) else 0.0
