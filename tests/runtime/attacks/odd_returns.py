"""Attack: return values of the wrong kind. score(instance, kind) returns an odd object chosen
by kind; generate(seed, ...) returns an odd instance chosen by seed (0 is a normal one)."""

import collections
import decimal
import fractions

NAME = "attack_odd_returns"


class Float(float):
    pass


class LyingFloat(float):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __hash__(self):
        return 0

    def __float__(self):
        return 1.0

    def __repr__(self):
        return "1.0"


class AlwaysEqual:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __float__(self):
        return 1.0

    def __hash__(self):
        return 0

    def __lt__(self, other):
        return False

    def __le__(self, other):
        return True

    def __gt__(self, other):
        return False

    def __ge__(self, other):
        return True


class Int(int):
    pass


SCORES = {
    "float_subclass": lambda: Float(1.0),
    "lying_float": lambda: LyingFloat(0.25),
    "always_equal": lambda: AlwaysEqual(),
    "nan": lambda: float("nan"),
    "inf": lambda: float("inf"),
    "minus_inf": lambda: float("-inf"),
    "negative": lambda: -0.5,
    "above_one": lambda: 1.5,
    "bool_true": lambda: True,
    "bool_false": lambda: False,
    "string": lambda: "1.0",
    "none": lambda: None,
    "decimal": lambda: decimal.Decimal("1.0"),
    "fraction": lambda: fractions.Fraction(1, 1),
    "int_subclass": lambda: Int(1),
    "complex": lambda: complex(1, 0),
    "list": lambda: [1.0],
    "bytes": lambda: b"1.0",
    "big_int": lambda: 10**400,
}


def generate(seed: int, difficulty: int) -> dict:
    if seed == 1:
        return [1, 2, 3]
    if seed == 2:
        return "{}"
    if seed == 3:
        return None
    if seed == 4:
        return {"items": {1, 2, 3}}
    if seed == 5:
        return {"x": float("nan")}
    if seed == 6:
        return {"blob": "x" * 100_000}
    if seed == 7:
        return collections.OrderedDict(n=7)
    if seed == 8:
        return {(1, 2): "tuple key"}
    if seed == 9:
        return {"obj": AlwaysEqual()}
    return {"n": seed % 1000}


def prompt(instance: dict) -> str:
    return "Repeat the number " + str(instance["n"]) + "."


def solve(instance: dict) -> str:
    return str(instance["n"])


def score(instance: dict, answer: str) -> float:
    if answer in SCORES:
        return SCORES[answer]()
    if answer == "int_one":
        return 1
    return 1.0 if answer == solve(instance) else 0.0
