"""The k-th move of the optimal Tower of Hanoi solution: which disk moves, from which peg, to
which peg. The binary structure of the solution (the disk is the lowest set bit of k) makes it
a formula in code; by hand one would replay k moves."""

import random

NAME = "hanoi_kth_move"
TAGS = ["recursion", "bits", "puzzle"]
ANSWER_TYPE = "list[str]"


def generate(seed, difficulty):
    lv = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}/{seed}/{lv}")
    disks = 3 + lv
    return {"disks": disks, "k": rng.randint(1, 2 ** disks - 1)}


def _move(disks, k):
    """(disk, from peg, to peg) of move k in the optimal solution moving A to C."""
    disk = (k & -k).bit_length()
    # how many times this disk moved before, and its cycle direction
    times = k >> disk
    pegs = "ACB" if (disks - disk) % 2 == 0 else "ABC"
    frm = pegs[times % 3]
    to = pegs[(times + 1) % 3]
    return disk, frm, to


def prompt(instance):
    n = instance["disks"]
    return (
        f"Tower of Hanoi with {n} disks, numbered 1 (smallest) to {n} (largest), all starting on "
        "peg A. The goal is to move the whole tower to peg C with the fewest moves, one disk at a "
        "time, never a larger disk on a smaller one. In the optimal solution, what is move number "
        f"{instance['k']}? Answer as: the disk number, the peg it leaves, the peg it lands on, "
        "separated by spaces (for example: 2 A B)."
    )


def solve(instance):
    disk, frm, to = _move(instance["disks"], instance["k"])
    return f"{disk} {frm} {to}"


def score(instance, answer):
    if not isinstance(answer, str):
        return 0.0
    parts = answer.upper().replace(",", " ").split()
    return 1.0 if parts == solve(instance).split() else 0.0
