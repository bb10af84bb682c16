"""Attack: start another program (os.system, subprocess, exec, posix_spawn), each trying to
create instance["marker"]. Returns 1.0 if a program ran, raises with the refusal otherwise."""

import os
import subprocess

NAME = "attack_spawn_process"


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    marker = instance.get("marker", "/nonexistent/evoenv_marker")
    if answer == "system":
        rc = os.system("/usr/bin/touch " + marker)
        if rc == 0:
            return 1.0
        raise RuntimeError(f"refused: os.system returned {rc}")
    try:
        if answer == "subprocess":
            subprocess.run(["/usr/bin/id"], capture_output=True, timeout=5)
            subprocess.run(["/usr/bin/touch", marker], timeout=5)
            return 1.0
        if answer == "exec":
            os.execv("/usr/bin/touch", ["touch", marker])
        if answer == "posix_spawn":
            pid = os.posix_spawn("/usr/bin/touch", ["touch", marker], {})
            os.waitpid(pid, 0)
            return 1.0
    except OSError as exc:
        raise RuntimeError(f"refused: {type(exc).__name__} errno {exc.errno}") from None
    return 1.0 if answer == solve(instance) else 0.0
