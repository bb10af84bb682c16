"""Attack: connect to instance["port"] on 127.0.0.1 (TCP), or send it a UDP datagram.
Returns 1.0 on success, raises with the refusal otherwise."""

import socket

NAME = "attack_connect_socket"


def generate(seed: int, difficulty: int) -> dict:
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    try:
        if answer == "tcp":
            conn = socket.create_connection(("127.0.0.1", instance["port"]), timeout=1)
            conn.sendall(b"pwned")
            conn.close()
            return 1.0
        if answer == "udp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendto(b"pwned", ("127.0.0.1", instance["port"]))
            s.close()
            return 1.0
    except OSError as exc:
        raise RuntimeError(f"refused: {type(exc).__name__} errno {exc.errno}") from None
    return 1.0 if answer == solve(instance) else 0.0
