"""A festival books acts; each fan club's wish is "at least one of these three happens"; find a booking granting every wish (re-skin of sat_planted)."""

import random

NAME = "festival_booking_wishes"
TAGS = ["logic", "planted", "test-corpus"]
ANSWER_TYPE = "str"
FESTIVALS = ("Roskilde", "Paleo", "Sziget", "Primavera")


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    acts = 3 + 2 * level
    booking = "".join(rng.choice("01") for _ in range(acts))
    wishes = []
    while len(wishes) < 4 * acts:
        trio = sorted(rng.sample(range(1, acts + 1), 3))
        wish = [a if rng.random() < 0.5 else -a for a in trio]
        if any((booking[abs(a) - 1] == "1") == (a > 0) for a in wish):
            wishes.append(wish)
    return {"festival": rng.choice(FESTIVALS), "acts": acts, "wishes": wishes, "booking": booking}


def prompt(instance: dict) -> str:
    wishes = "\n".join(" or ".join(f"act {a} is booked" if a > 0 else f"act {-a} is not booked" for a in w) for w in instance["wishes"])
    return (
        f"{instance['festival']} may book acts 1 to {instance['acts']}. Every fan club's wish below must hold:\n{wishes}\n"
        f"Answer with {instance['acts']} characters, 1 for a booked act and 0 for one not booked, act 1 first."
    )


def solve(instance: dict) -> str:
    return instance["booking"]


def score(instance: dict, answer: str) -> float:
    bits = "".join(answer.split()) if isinstance(answer, str) and len(answer) < 4000 else ""
    if len(bits) != instance["acts"] or set(bits) - {"0", "1"}:
        return 0.0
    ok = all(any((bits[abs(a) - 1] == "1") == (a > 0) for a in w) for w in instance["wishes"])
    return 1.0 if ok else 0.0
