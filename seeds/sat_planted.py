"""3-SAT with a planted solution: a random formula of three-literal clauses over n Boolean
variables, and the task is an assignment that makes every clause true. The formula is built
around a hidden assignment, so one exists, and any satisfying assignment counts. At high
difficulty there are over four clauses per variable, where random formulas are hardest, so
finding an assignment takes a real search, while checking one is a single pass over the
clauses. Every clause is also satisfied by the complement of the hidden assignment, so the
signs of the literals carry no hint of it. At difficulty 1 there are three variables and
every clause the hidden assignment allows (six of them), so only it and its complement
satisfy the formula."""

import random

NAME = "sat_planted"
TAGS = ["planted", "logic", "sat", "np-hard"]
ANSWER_TYPE = "str"

_MAX_ANSWER_CHARS = 10_000
# The number of variables by difficulty 1 to 10, growing about geometrically.
_VARIABLES = (3, 4, 6, 8, 10, 14, 19, 26, 36, 49)
# Each set of three variables has 8 sign patterns; 6 have one or two literals true under the
# planted assignment (see generate), so a small formula cannot have more clauses than this.
_CLAUSES_PER_TRIPLE = 6


def _clamp(difficulty: int) -> int:
    return max(1, min(10, int(difficulty)))


def _holds(literal: int, bits: str) -> bool:
    return (bits[abs(literal) - 1] == "1") == (literal > 0)


def generate(seed: int, difficulty: int) -> dict:
    difficulty = _clamp(difficulty)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    count = _VARIABLES[difficulty - 1]
    ratio = 3.5 + 0.75 * (difficulty - 1) / 9
    triples = count * (count - 1) * (count - 2) // 6
    wanted = min(round(ratio * count), _CLAUSES_PER_TRIPLE * triples)
    planted = "".join(rng.choice("01") for _ in range(count))
    clauses: list[list[int]] = []
    seen: set[tuple[int, ...]] = set()
    while len(clauses) < wanted:
        variables = sorted(rng.sample(range(1, count + 1), 3))
        clause = [v if rng.random() < 0.5 else -v for v in variables]
        # One or two true literals: true under the planted assignment and its complement.
        true_literals = sum(_holds(literal, planted) for literal in clause)
        if true_literals in (1, 2) and tuple(clause) not in seen:
            seen.add(tuple(clause))
            clauses.append(clause)
    return {"variables": count, "clauses": clauses, "planted": planted}


def prompt(instance: dict) -> str:
    count = instance["variables"]
    clauses = "\n".join(
        " ".join(str(literal) for literal in clause) for clause in instance["clauses"]
    )
    return (
        f"Below is a Boolean formula over the variables x1 to x{count}, one clause per line. "
        "A clause is three nonzero integers: k stands for x_k and -k for NOT x_k. A clause "
        "is satisfied when at least one of its three literals is true, and the formula is "
        "satisfied when every clause is.\n\n"
        f"{clauses}\n\n"
        "Find a truth assignment that satisfies the formula. At least one exists, and any "
        "satisfying assignment is accepted.\n\n"
        f"Give the assignment as a string of exactly {count} characters, each 0 or 1, with no "
        "separators: the first character is the value of x1, the second that of x2, and so "
        "on (1 means true, 0 means false)."
    )


def solve(instance: dict) -> str:
    return instance["planted"]


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > _MAX_ANSWER_CHARS:
        return 0.0
    bits = "".join(answer.split())
    if len(bits) != instance["variables"] or not set(bits) <= {"0", "1"}:
        return 0.0
    satisfied = all(
        any(_holds(literal, bits) for literal in clause) for clause in instance["clauses"]
    )
    return 1.0 if satisfied else 0.0
