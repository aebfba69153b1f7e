"""Backfill listings: [start, end), truncation, skipped slots, bad ranges."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronwave_core.domain.backfill import plan_backfill
from cronwave_core.domain.calendar import DST_GAP_SKIP
from cronwave_core.domain.spec import DstGap, Spec
from cronwave_core.errors import InvalidArgument


def z(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


HOURLY = Spec(cron=("0 * * * *",))


def test_start_is_inclusive_and_end_exclusive() -> None:
    plan = plan_backfill(HOURLY, z("2024-01-01T00:00"), z("2024-01-01T03:00"))
    assert plan.fire_times == (z("2024-01-01T00:00"), z("2024-01-01T01:00"), z("2024-01-01T02:00"))
    assert not plan.truncated
    assert plan.resume_at is None


def test_adjacent_ranges_list_each_fire_time_once() -> None:
    a = plan_backfill(HOURLY, z("2024-01-01T00:00"), z("2024-01-01T05:00"))
    b = plan_backfill(HOURLY, z("2024-01-01T05:00"), z("2024-01-01T09:00"))
    whole = plan_backfill(HOURLY, z("2024-01-01T00:00"), z("2024-01-01T09:00"))
    assert a.fire_times + b.fire_times == whole.fire_times


def test_a_listing_past_the_limit_says_where_to_resume() -> None:
    plan = plan_backfill(HOURLY, z("2024-01-01T00:00"), z("2024-01-02T00:00"), limit=5)
    assert len(plan.fire_times) == 5
    assert plan.truncated
    assert plan.resume_at == z("2024-01-01T05:00")
    rest = plan_backfill(HOURLY, plan.resume_at, z("2024-01-02T00:00"), limit=100)
    assert len(plan.fire_times + rest.fire_times) == 24


def test_the_spec_bounds_still_apply() -> None:
    spec = Spec(cron=("0 * * * *",), start_at=z("2024-01-01T02:00"), max_runs=2)
    plan = plan_backfill(spec, z("2024-01-01T00:00"), z("2024-01-02T00:00"))
    assert plan.fire_times == (z("2024-01-01T02:00"), z("2024-01-01T03:00"))


def test_dst_skipped_slots_are_listed_apart() -> None:
    spec = Spec(cron=("30 2 * * *",), time_zone="America/New_York", dst_gap=DstGap.SKIP)
    plan = plan_backfill(spec, z("2024-03-09T00:00"), z("2024-03-12T00:00"))
    assert plan.fire_times == (z("2024-03-09T07:30"), z("2024-03-11T06:30"))
    assert [(o.slot, o.skipped) for o in plan.skipped] == [
        (datetime(2024, 3, 10, 2, 30), DST_GAP_SKIP)
    ]


@pytest.mark.parametrize(
    ("start", "end", "limit", "field"),
    [
        (z("2024-01-02T00:00"), z("2024-01-01T00:00"), 10, "backfill.end"),
        (z("2024-01-01T00:00"), z("2024-01-01T00:00"), 10, "backfill.end"),
        (datetime(2024, 1, 1), z("2024-01-02T00:00"), 10, "backfill.start"),
        (z("2024-01-01T00:00"), datetime(2024, 1, 2), 10, "backfill.end"),
        (z("2024-01-01T00:00"), z("2024-01-02T00:00"), 0, "limit"),
    ],
)
def test_a_bad_range_is_refused_naming_the_field(
    start: datetime, end: datetime, limit: int, field: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        plan_backfill(
            HOURLY, start, end, limit=limit, start_field="backfill.start", end_field="backfill.end"
        )
    assert caught.value.field == field


def test_a_bad_spec_is_refused_before_listing() -> None:
    with pytest.raises(InvalidArgument) as caught:
        plan_backfill(
            Spec(cron=("nope",)), z("2024-01-01T00:00"), z("2024-01-01T00:00") + timedelta(1)
        )
    assert caught.value.field == "spec.cron[0]"
