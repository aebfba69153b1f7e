"""Jitter: bounded by the spec's jitter and the same in every process."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronwave_core.domain.jitter import jitter_offset, jittered
from cronwave_core.errors import InvalidArgument

FIRE = datetime(2024, 1, 1, 2, 0, tzinfo=UTC)


@given(
    schedule_id=st.text(max_size=30),
    fire_time=st.datetimes(
        min_value=datetime(1971, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
    ),
    jitter=st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=2)),
)
def test_delay_is_within_zero_and_jitter(
    schedule_id: str, fire_time: datetime, jitter: timedelta
) -> None:
    moved = jittered(schedule_id, fire_time, jitter)
    assert fire_time <= moved
    assert moved < fire_time + jitter or (jitter < timedelta(microseconds=1) and moved == fire_time)
    assert moved == jittered(schedule_id, fire_time, jitter)
    assert moved.tzinfo is UTC


def test_zero_jitter_changes_nothing() -> None:
    assert jittered("billing", FIRE, timedelta(0)) == FIRE


def test_same_instant_in_another_offset_gets_the_same_delay() -> None:
    tokyo = FIRE.astimezone(timezone(timedelta(hours=9)))
    assert jittered("billing", tokyo, timedelta(minutes=5)) == jittered(
        "billing", FIRE, timedelta(minutes=5)
    )


def test_schedules_sharing_a_fire_time_are_spread() -> None:
    delays = {jitter_offset(f"s{i}", FIRE, timedelta(minutes=1)) for i in range(200)}
    assert len(delays) > 150
    fires = {
        jitter_offset("s", FIRE + timedelta(minutes=i), timedelta(minutes=1)) for i in range(200)
    }
    assert len(fires) > 150


def test_another_process_computes_the_same_delay() -> None:
    # hash() is salted per process; the jitter must not be
    code = (
        "from datetime import datetime, timedelta, UTC;"
        "from cronwave_core.domain.jitter import jittered;"
        "print(jittered('billing', datetime(2024, 1, 1, 2, tzinfo=UTC), timedelta(hours=1))"
        ".isoformat())"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
        env={"PYTHONHASHSEED": "12345"},
    )
    assert other.stdout.strip() == jittered("billing", FIRE, timedelta(hours=1)).isoformat()


def test_negative_jitter_and_naive_times_are_refused() -> None:
    with pytest.raises(InvalidArgument) as caught:
        jittered("billing", FIRE, timedelta(seconds=-1))
    assert caught.value.field == "spec.jitter"
    with pytest.raises(InvalidArgument) as caught:
        jittered("billing", datetime(2024, 1, 1), timedelta(seconds=1))
    assert caught.value.field == "fire_time"
