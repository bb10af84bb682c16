"""Attack: values that break writers and terminals rather than the sandbox. Lone surrogates
(which no UTF-8 encoder accepts) in a prompt, an answer, an instance key and value, and an
error message; rich console markup in an error message; and instances nested deeper than any
parent should walk ("deep": a dict nested 900 levels, which json.loads still accepts but a
recursive json.dumps in a worker thread may not)."""

NAME = "attack_odd_text"


def _deep(levels):
    value = {"leaf": 1}
    for _ in range(levels):
        value = {"d": value}
    return value


def generate(seed: int, difficulty: int) -> dict:
    if seed == 1:
        return {"text\ud800": "value \udcff", "n": 1}
    if seed == 2:
        return _deep(900)
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    if instance.get("n") == 1:
        return "What is \ud800 one?"
    return "Repeat the number " + str(instance.get("n")) + "."


def solve(instance: dict) -> str:
    if instance.get("n") == 1:
        return "1\udcff"
    return str(instance.get("n"))


def score(instance: dict, answer: str) -> float:
    if answer == "surrogate":
        raise ValueError("bad \ud800 value \udfff")
    if answer == "markup":
        raise ValueError("[bold red]boom[/] [/oops] [link=file:///etc/passwd]x[/link]")
    return 1.0 if answer == str(instance.get("n")) else 0.0
