"""Catch-up after a simulated 6-hour outage, for every catch-up policy: a planner on a
manual clock fires for an hour, goes away, and a new planner takes over six hours
later. The MISSED rows and catch-up runs are read back from the real store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronwave import Client, Run
from tests.harness.planner import StartPlanner
from tests.helpers import fresh
from tests.schedules.conftest import runs_of

# A guarantee (exactly once, fencing, zombie attempts, catch-up, DST): both backends.
pytestmark = [pytest.mark.slow, pytest.mark.both_backends]

T0 = datetime(2030, 1, 7, 0, 0, tzinfo=UTC)


def at(hours: int, minutes: int) -> datetime:
    return T0 + timedelta(hours=hours, minutes=minutes)


def every_ten_minutes(client: Client, catchup: str) -> str:
    schedule_id = fresh(f"catchup-{catchup}")
    client.create_schedule(
        schedule_id,
        cron="*/10 * * * *",
        job_type="cronwave.noop",
        catchup=catchup,
        overlap="allow_all",  # the clock outruns the jobs; overlap is tested apart
        catchup_window=timedelta(hours=1),
        catchup_max_runs=3,
        start_at=T0,
    )
    return schedule_id


def outcome(run: Run) -> str:
    """A run as ``STATE/TRIGGER`` or ``MISSED:<reason>``."""
    return f"MISSED:{run.error}" if run.state == "MISSED" else f"RUN/{run.trigger}"


def test_catch_up_after_a_six_hour_outage_for_every_policy(
    client: Client, start_planner: StartPlanner
) -> None:
    # Given three schedules every 10 minutes with a one-hour catch-up window, one per
    # policy (``all`` capped at 3 runs), and a planner that fires them for an hour
    ids = {policy: every_ten_minutes(client, policy) for policy in ("skip", "latest", "all")}
    first = start_planner(T0 - timedelta(minutes=1))
    for schedule_id in ids.values():
        first.knows(schedule_id)
    first.run_until(at(1, 5))
    first.settle()
    for schedule_id in ids.values():
        fired = runs_of(client, schedule_id)
        assert [r.fire_time for r in fired] == [at(0, 10 * i) for i in range(7)]
        assert {outcome(r) for r in fired} == {"RUN/SCHEDULED"}

    # When that planner goes away for six hours and another one takes over at 07:05
    first.stop()
    second = start_planner(at(7, 5))
    second.run_until(at(7, 5) + timedelta(seconds=30))
    second.settle()
    # (the catch-up runs of ``all`` start a minute apart, not as a storm)
    assert [outcome(r) for r in runs_of(client, ids["all"])].count("RUN/CATCHUP") == 1
    second.run_until(at(7, 8))
    second.settle()

    # Then every slot of the outage has exactly one outcome, in the store
    outside = {
        at(h, m): "MISSED:outside_catchup_window" for h in range(1, 7) for m in range(0, 60, 10)
    }
    outside = {t: o for t, o in outside.items() if at(1, 10) <= t <= at(6, 0)}
    in_window = [at(6, 10), at(6, 20), at(6, 30), at(6, 40), at(6, 50), at(7, 0)]
    expected = {
        "skip": {t: "MISSED:catchup_skip" for t in in_window},
        "latest": {
            **{t: "MISSED:superseded_by_latest" for t in in_window[:-1]},
            at(7, 0): "RUN/CATCHUP",
        },
        "all": {
            **{t: "MISSED:catchup_cap" for t in in_window[:3]},
            **{t: "RUN/CATCHUP" for t in in_window[3:]},
        },
    }
    for policy, schedule_id in ids.items():
        got = {
            r.fire_time: outcome(r) for r in runs_of(client, schedule_id) if r.fire_time > at(1, 0)
        }
        assert got == {**outside, **expected[policy]}, policy

    # And the catch-up runs carry the new leader's fencing token
    catchups = [r for sid in ids.values() for r in runs_of(client, sid) if r.trigger == "CATCHUP"]
    assert {r.fencing_token for r in catchups} == {second.planner.elector.token()}
    assert second.planner.loop.stats.catchups == 0 + 1 + 3
    # (their jobs wait for their nominal fire time, in 2030: workers never start a
    # body early, so this test does not wait for them)
