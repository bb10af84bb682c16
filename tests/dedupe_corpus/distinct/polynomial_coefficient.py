"""One coefficient of a product of polynomials, modulo a prime: multiply several small
polynomials and report the coefficient of x^k. Convolution is a short loop in code; by hand
the number of terms grows multiplicatively."""

import random

NAME = "polynomial_coefficient"
TAGS = ["algebra", "convolution", "modular-arithmetic"]
ANSWER_TYPE = "int"

MOD = 1009


def generate(seed, difficulty):
    d = max(1, min(10, int(difficulty)))
    rng = random.Random(f"poly[{seed}][{d}]")
    factors = [[rng.randint(0, 9) for _ in range(rng.randint(2, 3 + d // 3))] for _ in range(2 + d // 2)]
    for f in factors:
        f[-1] = rng.randint(1, 9)
    degree = sum(len(f) - 1 for f in factors)
    return {"factors": factors, "k": rng.randint(1, degree)}


def _show(coeffs):
    terms = []
    for power, c in enumerate(coeffs):
        if c:
            terms.append(str(c) if power == 0 else f"{c}x" if power == 1 else f"{c}x^{power}")
    return "(" + " + ".join(terms or ["0"]) + ")"


def prompt(instance):
    product = " * ".join(_show(f) for f in instance["factors"])
    return (
        f"Expand the product {product}. What is the coefficient of x^{instance['k']}, taken "
        f"modulo {MOD}? Give an integer from 0 to {MOD - 1}."
    )


def solve(instance):
    acc = [1]
    for f in instance["factors"]:
        out = [0] * (len(acc) + len(f) - 1)
        for i, a in enumerate(acc):
            for j, b in enumerate(f):
                out[i + j] = (out[i + j] + a * b) % MOD
        acc = out
    return str(acc[instance["k"]])


def score(instance, answer):
    if not isinstance(answer, str) or not answer.strip().isdigit():
        return 0.0
    value = int(answer.strip()[:6])
    return 1.0 if value < MOD and str(value) == solve(instance) and len(answer.strip()) <= 4 else 0.0
