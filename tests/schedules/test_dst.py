"""DST days end to end: a planner on a manual clock walks across New York's spring
forward and fall back; what ran and what was recorded MISSED is read back from the
real store, for each DST policy."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from cronwave import Client
from tests.harness.planner import StartPlanner
from tests.helpers import fresh
from tests.schedules.conftest import runs_of

# A guarantee (exactly once, fencing, zombie attempts, catch-up, DST): both backends.
pytestmark = [pytest.mark.slow, pytest.mark.both_backends]

NEW_YORK = ZoneInfo("America/New_York")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def daily(
    client: Client,
    cron: str,
    start: datetime,
    dst_gap: str | None = None,
    dst_repeat: str | None = None,
) -> str:
    schedule_id = fresh("dst")
    client.create_schedule(
        schedule_id,
        cron=cron,
        time_zone="America/New_York",
        job_type="cronwave.noop",
        overlap="allow_all",
        start_at=start,
        dst_gap=dst_gap,
        dst_repeat=dst_repeat,
    )
    return schedule_id


def outcomes(client: Client, schedule_id: str) -> list[tuple[datetime, str]]:
    return [
        (r.fire_time, f"MISSED:{r.error}" if r.state == "MISSED" else r.trigger)
        for r in runs_of(client, schedule_id)
    ]


def test_spring_forward_skip_records_the_slot_missed_and_shift_runs_it(
    client: Client, start_planner: StartPlanner
) -> None:
    # Given 02:30 New York every day, once with dst_gap skip and once with shift
    start = datetime(2030, 3, 9, 0, 0, tzinfo=NEW_YORK)
    skip = daily(client, "30 2 * * *", start, dst_gap="skip")
    shift = daily(client, "30 2 * * *", start, dst_gap="shift")
    planner = start_planner(utc(2030, 3, 9, 5, 0))
    planner.knows(skip)
    planner.knows(shift)

    # When the calendar crosses 2030-03-10, when 02:00-03:00 does not exist
    planner.run_until(utc(2030, 3, 11, 12, 0))
    planner.settle()

    # Then skip records that day's slot MISSED (at its nominal instant + 1 us) ...
    assert outcomes(client, skip) == [
        (utc(2030, 3, 9, 7, 30), "SCHEDULED"),  # 02:30 EST
        (datetime(2030, 3, 10, 7, 30, 0, 1, tzinfo=UTC), "MISSED:dst_gap_skip"),
        (utc(2030, 3, 11, 6, 30), "SCHEDULED"),  # 02:30 EDT
    ]
    # ... and shift runs it at the first instant after the gap, 03:00 EDT
    assert outcomes(client, shift) == [
        (utc(2030, 3, 9, 7, 30), "SCHEDULED"),
        (utc(2030, 3, 10, 7, 0), "SCHEDULED"),
        (utc(2030, 3, 11, 6, 30), "SCHEDULED"),
    ]


def test_fall_back_runs_once_last_or_twice_as_the_policy_says(
    client: Client, start_planner: StartPlanner
) -> None:
    # Given 01:30 New York every day, for each dst_repeat policy
    start = datetime(2030, 11, 2, 0, 0, tzinfo=NEW_YORK)
    ids = {
        policy: daily(client, "30 1 * * *", start, dst_repeat=policy)
        for policy in ("once", "last", "twice")
    }
    planner = start_planner(utc(2030, 11, 2, 4, 0))
    for schedule_id in ids.values():
        planner.knows(schedule_id)

    # When the calendar crosses 2030-11-03, when 01:00-02:00 happens twice
    planner.run_until(utc(2030, 11, 4, 12, 0))
    planner.settle()

    # Then the repeated 01:30 runs at the first (EDT), the second (EST) or both
    edt, est = utc(2030, 11, 3, 5, 30), utc(2030, 11, 3, 6, 30)
    before, after = utc(2030, 11, 2, 5, 30), utc(2030, 11, 4, 6, 30)
    expected = {"once": [edt], "last": [est], "twice": [edt, est]}
    for policy, schedule_id in ids.items():
        got = outcomes(client, schedule_id)
        assert got == [(t, "SCHEDULED") for t in (before, *expected[policy], after)], policy
