"""Cron syntax the calendar accepts and refuses."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from cronwave_core.domain.calendar import fire_times, validate
from cronwave_core.domain.spec import Spec
from cronwave_core.errors import InvalidArgument


def z(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def first(cron: str, after: str, n: int = 3, tz: str = "UTC") -> list[datetime]:
    return list(itertools.islice(fire_times(Spec(cron=(cron,), time_zone=tz), z(after)), n))


@pytest.mark.parametrize(
    ("cron", "after", "expected"),
    [
        # L: the last day of the month, leap years included
        ("0 0 L * *", "2024-01-15", ["2024-01-31", "2024-02-29", "2024-03-31"]),
        ("0 0 L 2 *", "2023-01-01", ["2023-02-28", "2024-02-29", "2025-02-28"]),
        # W: the weekday nearest the day, never leaving the month
        # (2024-06-15 is a Saturday -> Fri 14th; 2024-09-15 a Sunday -> Mon 16th)
        ("0 0 15W 6,9 *", "2024-01-01", ["2024-06-14", "2024-09-16", "2025-06-16"]),
        # 2024-06-01 is a Saturday: 1W is Monday the 3rd, not Friday in May
        ("0 0 1W 6 *", "2024-01-01", ["2024-06-03", "2025-06-02", "2026-06-01"]),
        # #: the third Friday; L5: the last Friday
        ("0 0 * * 5#3", "2024-01-01", ["2024-01-19", "2024-02-16", "2024-03-15"]),
        ("0 0 * * fri#3", "2024-01-01", ["2024-01-19", "2024-02-16", "2024-03-15"]),
        ("0 0 * * L5", "2024-01-01", ["2024-01-26", "2024-02-23", "2024-03-29"]),
        # names, any case, and ranges of names
        ("0 0 1 JAN,jul *", "2024-02-01", ["2024-07-01", "2025-01-01", "2025-07-01"]),
        (
            "0 9 * * Mon-Wed",
            "2024-01-04",
            ["2024-01-08T09:00", "2024-01-09T09:00", "2024-01-10T09:00"],
        ),
        # both day fields restricted: either one matches (Vixie cron)
        ("0 0 13 * 5", "2024-09-01", ["2024-09-06", "2024-09-13", "2024-09-20"]),
        # 0 and 7 are both Sunday
        ("0 0 * * 7", "2024-01-01", ["2024-01-07", "2024-01-14", "2024-01-21"]),
        # steps, ranges, lists, wrap-around ranges
        (
            "10-50/20 * * * *",
            "2024-01-01T00:00",
            ["2024-01-01T00:10", "2024-01-01T00:30", "2024-01-01T00:50"],
        ),
        (
            "0 22-1 * * *",
            "2024-01-01T12:00",
            ["2024-01-01T22:00", "2024-01-01T23:00", "2024-01-02T00:00"],
        ),
        (
            "5/20 * * * *",
            "2024-01-01T00:00",
            ["2024-01-01T00:05", "2024-01-01T00:25", "2024-01-01T00:45"],
        ),
        # 6 fields: seconds FIRST
        (
            "*/20 * * * * *",
            "2024-01-01T00:00:05",
            ["2024-01-01T00:00:20", "2024-01-01T00:00:40", "2024-01-01T00:01:00"],
        ),
        (
            "30 0 12 * * *",
            "2024-01-01",
            ["2024-01-01T12:00:30", "2024-01-02T12:00:30", "2024-01-03T12:00:30"],
        ),
        # macros
        ("@yearly", "2024-05-05", ["2025-01-01", "2026-01-01", "2027-01-01"]),
        ("@annually", "2024-05-05", ["2025-01-01", "2026-01-01", "2027-01-01"]),
        ("@monthly", "2024-05-05", ["2024-06-01", "2024-07-01", "2024-08-01"]),
        ("@weekly", "2024-05-05", ["2024-05-12", "2024-05-19", "2024-05-26"]),
        ("@daily", "2024-05-05T12:00", ["2024-05-06", "2024-05-07", "2024-05-08"]),
        ("@midnight", "2024-05-05T12:00", ["2024-05-06", "2024-05-07", "2024-05-08"]),
        (
            "@HOURLY",
            "2024-05-05T12:30",
            ["2024-05-05T13:00", "2024-05-05T14:00", "2024-05-05T15:00"],
        ),
        # ? stands for *
        ("0 0 ? * mon", "2024-01-01", ["2024-01-08", "2024-01-15", "2024-01-22"]),
    ],
)
def test_fires_where_the_expression_says(cron: str, after: str, expected: list[str]) -> None:
    assert first(cron, after) == [z(t) for t in expected]


def test_six_fields_put_seconds_first_not_last() -> None:
    # "5 * * * * *" is second 5 of every minute, not every second of minute 5
    assert first("5 * * * * *", "2024-01-01T00:00:00") == [
        z("2024-01-01T00:00:05"),
        z("2024-01-01T00:01:05"),
        z("2024-01-01T00:02:05"),
    ]


def test_cron_slots_are_wall_clock_times_in_the_zone() -> None:
    assert first("0 9 * * *", "2024-06-01", tz="Asia/Kolkata") == [
        z("2024-06-01T03:30"),
        z("2024-06-02T03:30"),
        z("2024-06-03T03:30"),
    ]


@pytest.mark.parametrize(
    ("cron", "rule"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("* * * *", "has 4 fields"),
        ("0 0 0 * * * 2024", "has 7 fields"),
        ("61 * * * *", "'61 * * * *': minute 61 is out of range 0-59"),
        ("0 24 * * *", "'0 24 * * *': hour 24 is out of range 0-23"),
        ("0 25 * * *", "hour 25 is out of range 0-23"),
        ("60 0 0 * * *", "second 60 is out of range 0-59"),
        ("0 0 0 * *", "day-of-month 0 is out of range 1-31"),
        ("0 0 32W * *", "day-of-month 32 is out of range 1-31"),
        ("0 0 * 13 *", "month 13 is out of range 1-12"),
        ("0 0 * * 1-8", "day-of-week 8 is out of range 0-7"),
        ("0 0 * * L8", "day-of-week 8 is out of range 0-7"),
        ("0 0 * * 5#6", "day-of-week 5#n: n 6 is out of range 1-5"),
        ("0 1,99999999999 * * *", "hour 9999999999... (11 digits) is out of range 0-23"),
        ("*/0 * * * *", "not a valid cron expression"),
        ("0 0 * * 5L", "L5, not 5L"),
        ("0 0 * * funday", "not a valid cron expression"),
        ("0 0 * * 5#3,1", "not a valid cron expression"),
        ("H * * * *", "hashed and random"),
        ("R 0 * * *", "hashed and random"),
        ("H(0-29)/5 * * * *", "hashed and random"),
        ("@reboot", "unknown macro"),
        ("@fortnightly", "unknown macro"),
        ("0 0 30 2 *", "never matches"),
        ("0 0 31 4,6 *", "never matches"),
        ("0 0 15W * 1", "'W' in day-of-month"),
        ("0 0 1 * 5#3", "'#' and 'L<day>'"),
    ],
)
def test_refuses_with_the_field_and_the_rule(cron: str, rule: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        validate(Spec(cron=("0 * * * *", cron)))
    assert caught.value.field == "spec.cron[1]"
    assert rule in caught.value.rule


def test_names_in_day_of_week_do_not_look_like_random_values() -> None:
    # "fri" and "thu" contain r/h but are names, not R or H values
    validate(Spec(cron=("0 0 * * fri,thu", "0 0 * mar,apr *")))
