"""A spell checker counts the keystroke fixes (add, remove or replace one letter) from a typo to the word meant (re-skin of edit_distance)."""

import random
import re

NAME = "spell_checker_fixes"
TAGS = ["strings", "test-corpus"]
ANSWER_TYPE = "int"
LAYOUTS = ("qwerty", "azerty", "dvorak")


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    meant = "".join(rng.choice("abcdefgh") for _ in range(3 + 2 * level))
    typed = list(meant)
    for _ in range(rng.randint(1, 2 + level)):
        k = rng.randrange(len(typed) + 1)
        if k < len(typed) and rng.random() < 0.5:
            typed[k] = rng.choice("abcdefgh")
        else:
            typed.insert(k, rng.choice("abcdefgh"))
    return {"keyboard": rng.choice(LAYOUTS), "typed": "".join(typed), "meant": meant}


def prompt(instance: dict) -> str:
    return (
        f"On a {instance['keyboard']} keyboard someone typed '{instance['typed']}' but meant '{instance['meant']}'. "
        "A fix adds one letter, removes one letter or replaces one letter. How many fixes at least "
        "turn the typed word into the meant one? Give an integer."
    )


def solve(instance: dict) -> str:
    a, b = instance["typed"], instance["meant"]
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
        prev = cur
    return str(prev[-1])


def score(instance: dict, answer: str) -> float:
    text = answer.strip() if isinstance(answer, str) else ""
    return 1.0 if re.fullmatch(r"\d{1,30}", text) and int(text) == int(solve(instance)) else 0.0
