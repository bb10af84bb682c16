"""A satellite image marks trees; how many separate forest patches (trees touching side by side) are there? (re-skin of island_count)."""

import random

NAME = "forest_patch_count"
TAGS = ["grid", "flood-fill"]
ANSWER_TYPE = "int"


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"forest-{seed}-{level}")
    height, width = 4 + level, 5 + 2 * level
    density = 0.35 + 0.02 * level
    return {"image": [["T" if rng.random() < density else "." for _ in range(width)] for _ in range(height)]}


def prompt(instance):
    picture = "\n".join(" ".join(row) for row in instance["image"])
    return (
        "A satellite image of a region, T for a tree and . for open ground:\n\n" + picture + "\n\n"
        "Trees that touch on a side (up, down, left, right; corners do not count) belong to the "
        "same forest patch. How many forest patches are there? Give the count."
    )


def solve(instance):
    img = instance["image"]
    rows, cols = len(img), len(img[0])
    label = {}
    patches = 0
    for r in range(rows):
        for c in range(cols):
            if img[r][c] == "T" and (r, c) not in label:
                patches += 1
                stack = [(r, c)]
                label[(r, c)] = patches
                while stack:
                    y, x = stack.pop()
                    for ny, nx in ((y - 1, x), (y + 1, x), (y, x - 1), (y, x + 1)):
                        if 0 <= ny < rows and 0 <= nx < cols and img[ny][nx] == "T" and (ny, nx) not in label:
                            label[(ny, nx)] = patches
                            stack.append((ny, nx))
    return str(patches)


def score(instance, answer):
    if not isinstance(answer, str) or len(answer) > 10:
        return 0.0
    return 1.0 if answer.strip() == solve(instance) else 0.0
