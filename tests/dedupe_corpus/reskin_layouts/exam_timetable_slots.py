"""Exams that share a student may not share a time slot; give each exam a slot (re-skin of graph_coloring_planted)."""

import random
import re

NAME = "exam_timetable_slots"
TAGS = ["graphs", "planted", "test-corpus"]
ANSWER_TYPE = "list[int]"


def generate(seed: int, difficulty: int) -> dict:
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"{NAME}:{seed}:{level}")
    exams, slots = 4 + 2 * level, 3
    plan = [e % slots for e in range(exams)]
    rng.shuffle(plan)
    pairs = [(a, b) for a in range(exams) for b in range(a + 1, exams) if plan[a] != plan[b]]
    clashes = sorted(rng.sample(pairs, min(len(pairs), 3 * exams // 2)))
    return {"exams": exams, "slots": slots, "clashes": [{"exam": a, "other": b} for a, b in clashes], "plan": plan}


def prompt(instance: dict) -> str:
    clashes = ", ".join(f"{c['exam']}&{c['other']}" for c in instance["clashes"])
    return (
        f"A college sets {instance['exams']} exams (0 to {instance['exams'] - 1}) in {instance['slots']} time "
        f"slots (0 to {instance['slots'] - 1}). These pairs share a student and need different slots: {clashes}. "
        "Give every exam's slot, in exam order, separated by spaces. Any valid timetable counts."
    )


def solve(instance: dict) -> str:
    return " ".join(map(str, instance["plan"]))


def score(instance: dict, answer: str) -> float:
    if not isinstance(answer, str) or len(answer) > 4000 or not re.fullmatch(r"[\d\s,]+", answer.strip() or "x"):
        return 0.0
    slots = [int(x) for x in re.findall(r"\d+", answer)]
    if len(slots) != instance["exams"] or max(slots) >= instance["slots"]:
        return 0.0
    return 1.0 if all(slots[c["exam"]] != slots[c["other"]] for c in instance["clashes"]) else 0.0
