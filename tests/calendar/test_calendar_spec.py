"""What a spec means beyond one cron expression: unions, exclusions, bounds,
max_runs, intervals, one-off times, and the validation of every field."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest

from cronwave_core.domain.calendar import (
    fire_times,
    next_fire_time,
    runs_left,
    validate,
    zone,
)
from cronwave_core.domain.spec import Interval, Spec
from cronwave_core.errors import InvalidArgument


def z(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def take(spec: Spec, after: str, n: int = 10) -> list[datetime]:
    return list(itertools.islice(fire_times(spec, z(after)), n))


def test_union_of_expressions_intervals_and_one_offs_fires_each_instant_once() -> None:
    # Given two expressions that share 12:00, an interval that hits 12:00 and 18:00,
    # and a one-off at 09:00
    spec = Spec(
        cron=("0 12 * * *", "0 0,12 * * *"),
        intervals=(Interval(every=timedelta(hours=6)),),
        one_off=(z("2024-01-01T09:00"),),
    )
    # Then every instant appears once, in order
    assert take(spec, "2024-01-01T00:00", 5) == [
        z("2024-01-01T06:00"),
        z("2024-01-01T09:00"),
        z("2024-01-01T12:00"),
        z("2024-01-01T18:00"),
        z("2024-01-02T00:00"),
    ]


def test_interval_fires_at_epoch_plus_phase_plus_multiples() -> None:
    # every 15 minutes with a phase of 5: :05 :20 :35 :50
    spec = Spec(intervals=(Interval(timedelta(minutes=15), timedelta(minutes=5)),))
    assert take(spec, "2024-01-01T00:05", 4) == [
        z("2024-01-01T00:20"),
        z("2024-01-01T00:35"),
        z("2024-01-01T00:50"),
        z("2024-01-01T01:05"),
    ]
    # 7-hour steps keep their phase across midnight: they count from the epoch
    seven = Spec(intervals=(Interval(timedelta(hours=7)),))
    first = next_fire_time(seven, z("2024-01-01T00:00"))
    assert first is not None
    assert (first - datetime(1970, 1, 1, tzinfo=UTC)) % timedelta(hours=7) == timedelta(0)
    assert first - z("2024-01-01T00:00") <= timedelta(hours=7)


def test_one_offs_fire_once_each_and_then_the_spec_ends() -> None:
    spec = Spec(one_off=(z("2024-05-01T10:00"), z("2024-04-01T10:00"), z("2024-05-01T10:00")))
    assert take(spec, "2024-01-01T00:00") == [z("2024-04-01T10:00"), z("2024-05-01T10:00")]
    assert next_fire_time(spec, z("2024-05-01T10:00")) is None


def test_exclude_dates_are_local_dates() -> None:
    # Given 23:30 New York time daily, excluding 2024-07-04 (which is 03:30Z on 07-05)
    spec = Spec(
        cron=("30 23 * * *",),
        time_zone="America/New_York",
        exclude_dates=(date(2024, 7, 4),),
    )
    assert take(spec, "2024-07-03T04:00", 3) == [
        z("2024-07-04T03:30"),  # 07-03 23:30 EDT
        z("2024-07-06T03:30"),  # 07-05 23:30 EDT; 07-04 is excluded
        z("2024-07-07T03:30"),
    ]


def test_exclude_dates_apply_to_intervals_and_one_offs_by_local_date() -> None:
    spec = Spec(
        intervals=(Interval(timedelta(hours=12)),),
        one_off=(z("2024-01-02T05:00"),),
        time_zone="Asia/Tokyo",  # +09:00
        exclude_dates=(date(2024, 1, 2),),
    )
    # 01-01T12:00Z is 01-01 21:00 JST; 01-02T00:00Z, 05:00Z, 12:00Z are on 01-02 JST
    assert take(spec, "2024-01-01T06:00", 3) == [
        z("2024-01-01T12:00"),
        z("2024-01-02T00:00") + timedelta(days=1),  # 01-03 09:00 JST
        z("2024-01-03T12:00"),
    ]


def test_excluding_a_day_of_a_one_second_expression_is_cheap() -> None:
    spec = Spec(cron=("* * * * * *",), exclude_dates=tuple(date(2024, 1, d) for d in range(1, 31)))
    assert next_fire_time(spec, z("2023-12-31T23:59:59")) == z("2024-01-31T00:00")


def test_start_is_inclusive_and_end_exclusive() -> None:
    spec = Spec(cron=("0 * * * *",), start_at=z("2024-01-01T03:00"), end_at=z("2024-01-01T06:00"))
    assert take(spec, "2024-01-01T00:00") == [
        z("2024-01-01T03:00"),
        z("2024-01-01T04:00"),
        z("2024-01-01T05:00"),
    ]


def test_max_runs_counts_fire_times_from_start_at() -> None:
    # Given at most three runs from 03:00, excluding nothing
    spec = Spec(cron=("0 * * * *",), start_at=z("2024-01-01T03:00"), max_runs=3)
    expected = [z("2024-01-01T03:00"), z("2024-01-01T04:00"), z("2024-01-01T05:00")]
    # Then asked from before, at, or inside the run, the same three exist
    assert take(spec, "2023-06-01T00:00") == expected
    assert take(spec, "2024-01-01T03:00") == expected[1:]
    assert take(spec, "2024-01-01T04:30") == expected[2:]
    assert next_fire_time(spec, z("2024-01-01T05:00")) is None


def test_max_runs_answers_queries_out_of_order_past_many_marks() -> None:
    # Given 1,000 runs every minute from midnight (several counting marks)
    start = z("2024-01-01T00:00")
    spec = Spec(cron=("* * * * *",), start_at=start, max_runs=1000)
    last = start + timedelta(minutes=999)
    # When asked late first and then early
    assert next_fire_time(spec, last - timedelta(minutes=1)) == last
    assert next_fire_time(spec, last) is None
    assert next_fire_time(spec, start + timedelta(minutes=300)) == start + timedelta(minutes=301)
    assert next_fire_time(spec, start + timedelta(minutes=700, seconds=1)) == start + timedelta(
        minutes=701
    )
    # Then every answer keeps to the first 1,000 fire times
    assert len(list(fire_times(spec, start - timedelta(days=1)))) == 1000


def test_runs_left_lets_the_planner_enforce_max_runs_by_count() -> None:
    assert runs_left(Spec(cron=("* * * * *",)), 10**6) is None
    spec = Spec(cron=("* * * * *",), max_runs=5)
    assert [runs_left(spec, n) for n in (0, 4, 5, 9)] == [5, 1, 0, 0]
    with pytest.raises(InvalidArgument) as caught:
        runs_left(spec, -1)
    assert caught.value.field == "handled"


def test_fire_times_require_an_aware_instant() -> None:
    with pytest.raises(InvalidArgument) as caught:
        next_fire_time(Spec(cron=("* * * * *",)), datetime(2024, 1, 1))
    assert caught.value.field == "after"


def test_zone_names_the_field_it_was_given() -> None:
    with pytest.raises(InvalidArgument) as caught:
        zone("Mars/Olympus_Mons", field="request.time_zone")
    assert caught.value.field == "request.time_zone"


GOOD = Spec(cron=("0 * * * *",))
NAIVE = datetime(2024, 1, 1)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (Spec(), "spec.cron"),
        (replace(GOOD, cron=("0 * * * *", "bad cron")), "spec.cron[1]"),
        (replace(GOOD, cron=(42,)), "spec.cron[0]"),  # type: ignore[arg-type]
        (replace(GOOD, time_zone="Mars/Olympus_Mons"), "spec.time_zone"),
        (replace(GOOD, time_zone=""), "spec.time_zone"),
        (replace(GOOD, time_zone="../../etc/passwd"), "spec.time_zone"),
        (replace(GOOD, dst_gap="sideways"), "spec.dst_gap"),  # type: ignore[arg-type]
        (replace(GOOD, dst_repeat="thrice"), "spec.dst_repeat"),  # type: ignore[arg-type]
        (
            replace(GOOD, start_at=z("2024-02-01T00:00"), end_at=z("2024-01-01T00:00")),
            "spec.end_at",
        ),
        (
            replace(GOOD, start_at=z("2024-01-01T00:00"), end_at=z("2024-01-01T00:00")),
            "spec.end_at",
        ),
        (replace(GOOD, start_at=NAIVE), "spec.start_at"),
        (replace(GOOD, end_at=NAIVE), "spec.end_at"),
        (replace(GOOD, exclude_dates=(date(2024, 1, 1), NAIVE)), "spec.exclude_dates[1]"),
        (replace(GOOD, exclude_dates=("2024-13-01",)), "spec.exclude_dates[0]"),  # type: ignore[arg-type]
        (replace(GOOD, intervals=(Interval(timedelta(0)),)), "spec.intervals[0].every"),
        (replace(GOOD, intervals=(Interval(timedelta(seconds=-5)),)), "spec.intervals[0].every"),
        (
            replace(GOOD, intervals=(Interval(timedelta(milliseconds=10)),)),
            "spec.intervals[0].every",
        ),
        (
            replace(GOOD, intervals=(Interval(timedelta(minutes=1), timedelta(minutes=1)),)),
            "spec.intervals[0].phase",
        ),
        (
            replace(GOOD, intervals=(Interval(timedelta(minutes=1), timedelta(seconds=-1)),)),
            "spec.intervals[0].phase",
        ),
        (replace(GOOD, one_off=(z("2024-01-01T00:00"), NAIVE)), "spec.one_off[1]"),
        (replace(GOOD, one_off=(z("1969-12-31T23:59"),)), "spec.one_off[0]"),
        (replace(GOOD, start_at=datetime(1, 1, 1, tzinfo=UTC)), "spec.start_at"),
        (replace(GOOD, end_at=datetime(9999, 12, 31, tzinfo=UTC)), "spec.end_at"),
        (replace(GOOD, max_runs=-1), "spec.max_runs"),
        (replace(GOOD, jitter=timedelta(seconds=-1)), "spec.jitter"),
    ],
)
def test_every_malformed_field_is_named(spec: Spec, field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        validate(spec)
    assert caught.value.field == field
    assert caught.value.rule
    # fire_times refuses the same spec at once, before anything is iterated
    with pytest.raises(InvalidArgument):
        fire_times(spec, z("2024-01-01T00:00"))


@pytest.mark.parametrize(
    "after",
    [datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, tzinfo=UTC)],
)
@pytest.mark.parametrize("tz", ["UTC", "Pacific/Kiritimati", "Pacific/Niue"])
def test_the_ends_of_the_datetime_range_end_the_iteration_quietly(after: datetime, tz: str) -> None:
    for spec in (
        Spec(cron=("0 * * * *",), time_zone=tz),
        Spec(
            intervals=(Interval(timedelta(hours=1)),),
            time_zone=tz,
            exclude_dates=(date(2024, 1, 1),),
        ),
    ):
        result = next_fire_time(spec, after)
        assert result is None or result > after


def test_a_spec_built_with_lists_still_works() -> None:
    spec = Spec(cron=["0 * * * *"], exclude_dates=[date(2024, 1, 1)])  # type: ignore[arg-type]
    assert next_fire_time(spec, z("2023-12-31T23:30")) == z("2024-01-02T00:00")
