"""Clients of a running suite: the SDK's ``Client``, built the way the benchmarks build
it, with the tests' deadline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronwave import Client, Run, ScheduleNotFound, Unavailable
from cronwave_bench.harness import client_for as bench_client_for
from cronwave_core.suite import Suite
from tests.helpers import eventually

#: Every call of a test's client has this deadline unless the test says otherwise.
TIMEOUT = timedelta(seconds=10)


def client_for(suite: Suite, timeout: timedelta = TIMEOUT) -> Client:
    """A client of ``suite``'s store, dispatcher, planner and leader-election."""
    return bench_client_for(suite, timeout)


def backfill_last_slot(client: Client, schedule_id: str, timeout: float = 60) -> Run:
    """Run the schedule's newest slot of the last day with trigger BACKFILL (a slot,
    not a manual run), once the planner has loaded it; the run, once SUCCEEDED."""

    def fire_times() -> list[datetime]:
        now = datetime.now(UTC)
        try:
            return client.backfill(schedule_id, now - timedelta(days=1), now, dry_run=True)
        # Not loaded by the planner yet: ScheduleNotFound, or Unavailable while it starts
        except (ScheduleNotFound, Unavailable) as exc:
            raise AssertionError(str(exc)) from exc

    night = eventually(fire_times, what=f"the planner loaded {schedule_id}")[-1]
    assert client.backfill(schedule_id, night, night + timedelta(seconds=1)) == [night]

    def succeeded() -> Run:
        (run,) = [r for r in client.list_runs(schedule_id) if r.fire_time == night]
        assert (run.trigger, run.state) == ("BACKFILL", "SUCCEEDED"), run
        return run

    return eventually(succeeded, timeout=timeout, what=f"the slot {night} succeeded")
