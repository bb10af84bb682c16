"""Calendar arithmetic: the weekday of a date some days after a given date, across months and
leap years. A date library or a modular count does it in code; by hand, month lengths and
leap years trip one up."""

import random

NAME = "weekday_after_days"
TAGS = ["calendar", "modular-arithmetic"]
ANSWER_TYPE = "str"

WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]


def _leap(year):
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _month_days(year, month):
    return [31, 29 if _leap(year) else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]


def _weekday(year, month, day):
    """Monday = 0, by Zeller's congruence."""
    if month < 3:
        month += 12
        year -= 1
    k, j = year % 100, year // 100
    h = (day + 13 * (month + 1) // 5 + k + k // 4 + j // 4 + 5 * j) % 7  # Saturday = 0
    return (h + 5) % 7


def generate(seed, difficulty):
    level = max(1, min(10, int(difficulty)))
    rng = random.Random(f"calendar:{seed}:{level}")
    year = rng.randint(1901, 2099)
    month = rng.randint(1, 12)
    day = rng.randint(1, _month_days(year, month))
    return {"year": year, "month": month, "day": day, "offset": rng.randint(10, 40 * level * level)}


def prompt(instance):
    date = f"{MONTHS[instance['month'] - 1]} {instance['day']}, {instance['year']}"
    weekday = WEEKDAYS[_weekday(instance["year"], instance["month"], instance["day"])]
    return (
        f"{date} is a {weekday}. Which day of the week is it {instance['offset']} days later? "
        "Answer with the English name of the weekday (e.g. Monday)."
    )


def solve(instance):
    start = _weekday(instance["year"], instance["month"], instance["day"])
    return WEEKDAYS[(start + instance["offset"]) % 7]


def score(instance, answer):
    if not isinstance(answer, str) or len(answer) > 30:
        return 0.0
    return 1.0 if answer.strip().rstrip(".").capitalize() == solve(instance) else 0.0
