"""A run recorded far ahead of its planner's term -- by a planner whose clock ran a day
ahead, or a stolen planner certificate -- does not make the next term skip the slots
before it: a term counts only the fire times it could have recorded itself
(``ScheduleIndex.reach``), and the store's ``LatestFireTimes`` takes that bound."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cron_planner.ports import Start
from cronwave import Client
from cronwave_core.domain.runs import Trigger
from tests.harness.planner import StartPlanner
from tests.helpers import fresh
from tests.schedules.conftest import runs_of

# A guarantee (no slot silently dropped): both backends.
pytestmark = [pytest.mark.slow, pytest.mark.both_backends]

T0 = datetime(2030, 1, 7, 0, 0, tzinfo=UTC)
A_DAY_AHEAD = T0 + timedelta(days=1)


def at(hours: int, minutes: int) -> datetime:
    return T0 + timedelta(hours=hours, minutes=minutes)


def test_a_run_recorded_a_day_ahead_does_not_make_the_next_term_skip_the_slots_before_it(
    client: Client, start_planner: StartPlanner
) -> None:
    # Given a schedule every 10 minutes that a planner has fired up to 00:20
    schedule_id = fresh("clock-ahead")
    client.create_schedule(
        schedule_id,
        cron="*/10 * * * *",
        job_type="cronwave.noop",
        overlap="allow_all",  # the clock outruns the jobs; overlap is tested apart
        start_at=T0,
    )
    first = start_planner(T0 - timedelta(minutes=1))
    first.knows(schedule_id)
    first.run_until(at(0, 25))
    first.settle()
    assert [r.fire_time for r in runs_of(client, schedule_id)] == [at(0, 10 * i) for i in range(3)]

    # And a start of the slot a day ahead, made as that planner's clock would make it
    # had it run a day ahead: its own start call to the dispatcher, under its token
    started = first.start_runs([Start(schedule_id, A_DAY_AHEAD, Trigger.SCHEDULED)])
    assert [type(r) for r in started] == [str], started
    # (the store holds it: the fault really happened)
    held = [r.fire_time for r in runs_of(client, schedule_id)]
    assert held == [*(at(0, 10 * i) for i in range(3)), A_DAY_AHEAD]
    first.stop()

    # When the next term begins on a right clock, at 00:25, and runs to 01:05
    second = start_planner(at(0, 25))
    second.run_until(at(1, 5))
    second.settle()

    # Then it fired every slot from 00:30 to 01:00, each once, and the run a day ahead
    # still stands for its own slot
    fired = runs_of(client, schedule_id)
    assert [r.fire_time for r in fired] == [*(at(0, 10 * i) for i in range(7)), A_DAY_AHEAD]
    assert [r for r in fired if r.state == "MISSED"] == []
    assert all(r.trigger == "SCHEDULED" for r in fired)
