"""The compact form of plain cron expressions fires exactly where croniter does."""

from __future__ import annotations

import itertools
import random
from datetime import datetime, timedelta

import pytest
from croniter import croniter

from cronwave_core.domain.calendar_cron import _Croniter, _Fields, parse_cron
from cronwave_core.errors import InvalidArgument

PLAIN = [
    "* * * * *",
    "0 0 * * *",
    "17 5 12 5 *",
    "*/15 * * * *",
    "5/20 * * * *",
    "59/15 * * * *",
    "10-50/20 * * * *",
    "0 9 * * mon-fri",
    "0 9 * * Mon,WED,fri",
    "0 0 1 jan,jul *",
    "0 0 1 jan/2 *",
    "0 0 13 * 5",
    "0 0 */1 * 1-5",
    "0 0 1-31 * 1",
    "0 0 1-31 * */2",
    "0 0 */2 * 0-6",
    "0 0 29 2 *",
    "0 0 31 * *",
    "30 2 * * *",
    "0 0 ? * mon",
    "0 0 * * 7",
    "0 0 * * 0",
    "0 12 1,15 * 3",
    "00 05 01 01 *",
    "*/20 * * * * *",
    "30 0 12 * * *",
    "5 * * * * *",
    "0 */7 */5 * * *",
    "15,45 */10 1-6 * 2-4 *",
    "0 0 0 29 2 *",
]
CRONITER = ["0 0 L * *", "0 0 15W * *", "0 0 * * 5#3", "0 22-2 * * *", "0 0 * * 1-7", "@daily"]


def croniter_slots(text: str, start: datetime, n: int) -> list[datetime]:
    it = croniter(text, start, second_at_beginning=True)
    return [it.get_next(datetime) for _ in range(n)]


def compact_slots(text: str, start: datetime, n: int) -> list[datetime]:
    expr = parse_cron(text, "spec.cron[0]")
    assert isinstance(expr, _Fields), text
    return list(itertools.islice(expr.slots_after(start), n))


def starts(rng: random.Random) -> list[datetime]:
    fixed = [
        datetime(2024, 1, 1),
        datetime(2024, 2, 28, 23, 59, 59, 999_999),
        datetime(2023, 12, 31, 23, 59),
        datetime(2024, 3, 31, 12, 0, 0, 1),
    ]
    spread = [
        datetime(2020, 1, 1)
        + timedelta(seconds=rng.randrange(10 * 365 * 86400), microseconds=rng.randrange(2) * 7)
        for _ in range(12)
    ]
    return fixed + spread


@pytest.mark.parametrize("text", PLAIN)
def test_plain_expressions_fire_where_croniter_says(text: str) -> None:
    for start in starts(random.Random(text)):
        assert compact_slots(text, start, 6) == croniter_slots(text, start, 6), (text, start)


def random_field(rng: random.Random, low: int, high: int, names: list[str]) -> str:
    def value() -> str:
        v = rng.randint(low, high)
        return names[v - low] if names and rng.random() < 0.3 else str(v)

    most = min(9, high - low + 1)  # a step may not exceed the field's count of values
    items = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        shape = rng.randrange(5)
        if shape == 0:
            items.append(value())
        elif shape == 1:
            a, b = sorted(rng.sample(range(low, high + 1), 2))
            items.append(f"{a}-{b}")
        elif shape == 2:
            a, b = sorted(rng.sample(range(low, high + 1), 2))
            items.append(f"{a}-{b}/{rng.randint(1, min(7, most))}")
        elif shape == 3:
            items.append(f"{value()}/{rng.randint(1, most)}")
        else:
            return f"*/{rng.randint(1, most)}" if rng.random() < 0.5 else "*"
    return ",".join(items)


def test_random_plain_expressions_fire_where_croniter_says() -> None:
    rng = random.Random(20261130)
    months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    days = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
    checked = 0
    for _ in range(400):
        fields = [
            random_field(rng, 0, 59, []),
            random_field(rng, 0, 23, []),
            random_field(rng, 1, 31, []),
            random_field(rng, 1, 12, months),
            random_field(rng, 0, 6, days),
        ]
        if rng.random() < 0.3:
            fields.insert(0, random_field(rng, 0, 59, []))
        text = " ".join(fields)
        try:
            expected_start = croniter_slots(text, datetime(2024, 1, 1), 1)
        except Exception:  # croniter finds no date: the compact form must refuse too
            with pytest.raises(InvalidArgument):
                compact_slots(text, datetime(2024, 1, 1), 1)
            continue
        assert expected_start
        for start in starts(rng)[:5]:
            assert compact_slots(text, start, 4) == croniter_slots(text, start, 4), (text, start)
        checked += 1
    assert checked > 300


@pytest.mark.parametrize("text", CRONITER)
def test_other_syntax_is_left_to_croniter(text: str) -> None:
    assert isinstance(parse_cron(text, "spec.cron[0]"), _Croniter)
