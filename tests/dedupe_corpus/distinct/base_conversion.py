"""Convert a number written in one base into another base (bases 2 to 16). Repeated division
is a loop in code; by hand, long numbers in odd bases invite slips."""

import random
import string

NAME = "base_conversion"
TAGS = ["number-systems", "arithmetic"]
ANSWER_TYPE = "str"

DIGITS = string.digits + "ABCDEF"


def to_base(value, base):
    if value == 0:
        return "0"
    out = []
    while value:
        value, rem = divmod(value, base)
        out.append(DIGITS[rem])
    return "".join(reversed(out))


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"base/{seed}/{level}")
    source, target = rng.sample([2, 3, 5, 7, 8, 9, 12, 16], 2)
    value = rng.randint(8 ** level, 16 ** (level + 1))
    return {"digits": to_base(value, source), "source": source, "target": target}


def prompt(instance):
    return (
        f"The number {instance['digits']} is written in base {instance['source']} (digits above 9 "
        "are A=10, B=11, ..., F=15). Write the same number in base "
        f"{instance['target']}, using the same digit symbols and no prefix or leading zeros."
    )


def solve(instance):
    return to_base(int(instance["digits"], instance["source"]), instance["target"])


def score(instance, answer):
    if not isinstance(answer, str) or len(answer) > 200:
        return 0.0
    return 1.0 if answer.strip().upper() == solve(instance) else 0.0
