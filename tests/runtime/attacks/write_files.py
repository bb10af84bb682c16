"""Attack: write a file at instance["path"], append to this environment's own source, or plant
a folder next to the worker's own. Returns 1.0 if the write succeeded (wherever it landed),
raises with the refusal otherwise."""

import os

NAME = "attack_write_files"


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    if answer in ("path", "own_source", "plant_sibling"):
        try:
            if answer == "path":
                with open(instance["path"], "w") as f:
                    f.write("pwned by an environment\n")
            elif answer == "own_source":
                with open(__file__, "a") as f:
                    f.write("\n# pwned\n")
            else:
                target = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                      instance["name"])
                os.mkdir(target)
        except OSError as exc:
            raise RuntimeError(f"refused: {type(exc).__name__} errno {exc.errno}") from None
        return 1.0
    return 1.0 if answer == solve(instance) else 0.0
