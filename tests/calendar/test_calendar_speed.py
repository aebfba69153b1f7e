"""The planner asks for next fire times of 100,000 schedules: one answer must cost
far less than a millisecond."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from cronwave_core.calendar import next_fire_time
from cronwave_core.spec import Spec

CALLS = 2000


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_next_fire_time_of_a_five_minute_spec_is_well_under_a_millisecond(zone: str) -> None:
    spec = Spec(cron=("*/5 * * * *",), time_zone=zone)
    start = datetime(2024, 3, 1, tzinfo=UTC)
    next_fire_time(spec, start)  # compile once, as the planner does
    began = time.perf_counter()
    for i in range(CALLS):
        next_fire_time(spec, start + timedelta(seconds=7 * i))
    per_call = (time.perf_counter() - began) / CALLS
    assert per_call < 0.5e-3, f"{per_call * 1e6:.0f} us per call"
