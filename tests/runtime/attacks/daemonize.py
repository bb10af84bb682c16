"""Attack: detach a daemon (fork, setsid, fork again), or call setsid directly. Returns 1.0 if a
step that must be refused succeeded, raises with the refusal otherwise."""

import os

NAME = "attack_daemonize"


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    try:
        if answer == "daemon":
            pid = os.fork()
            if pid == 0:
                try:
                    os.setsid()
                    if os.fork() == 0:
                        os._exit(0)
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
            return 1.0
        if answer == "setsid":
            os.setsid()
            return 1.0
    except OSError as exc:
        raise RuntimeError(f"refused: {type(exc).__name__} errno {exc.errno}") from None
    return 1.0 if answer == solve(instance) else 0.0
