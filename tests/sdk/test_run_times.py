"""A run's claim and its body start are two instants: with the dispatch lead a run is
claimed before its fire time, and its lateness and duration count from the body."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.harness.clients import client_for
from tests.helpers import eventually, fresh

pytestmark = [pytest.mark.slow, pytest.mark.both_backends]

#: The default dispatch lead (CRONWAVE_DISPATCH_LEAD): runs are claimed this early.
LEAD = timedelta(seconds=5)


def test_a_scheduled_noop_is_claimed_before_its_fire_time_and_starts_after_it(make_suite):
    # Given a whole suite with the default dispatch lead, and a noop due in 12 s
    suite = make_suite()
    sid = fresh("times")
    fire = (datetime.now(UTC) + LEAD + timedelta(seconds=7)).replace(microsecond=0)
    with client_for(suite) as client:
        client.create_schedule(sid, job_type="cronwave.noop", one_off=[fire])

        # When its run has succeeded
        def succeeded():
            runs = client.list_runs(sid)
            assert runs and runs[0].state == "SUCCEEDED", [r.state for r in runs]
            return runs[0]

        run = eventually(succeeded, timeout=60, interval=0.2, what="the scheduled run")

    # Then it was claimed ahead of the fire time and its body began at or after it
    assert run.fire_time == fire
    assert run.claimed_at is not None and run.started_at is not None
    assert run.finished_at is not None
    assert run.claimed_at <= run.fire_time <= run.started_at <= run.finished_at
    # so its lateness and duration, counted from the body, are not negative
    assert run.lateness is not None and run.lateness >= timedelta(0)
    assert run.duration is not None and run.duration >= timedelta(0)
