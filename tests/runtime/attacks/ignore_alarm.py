"""Attack: ignore every catchable signal and cancel any alarm, then loop forever."""

import signal

NAME = "attack_ignore_alarm"


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    if answer == "attack":
        for sig in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGHUP,
                    signal.SIGXCPU, signal.SIGVTALRM, signal.SIGPROF, signal.SIGUSR1):
            signal.signal(sig, signal.SIG_IGN)
        signal.alarm(0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.valid_signals()))
        while True:
            pass
    return 1.0 if answer == solve(instance) else 0.0
