"""Updating a schedule while it fires, against a real suite (store, leader-election,
planner, dispatcher and worker processes, real clock): the planner re-plans from the
change without running a slot twice, without losing the next one, and without
counting the slots between the old and the new calendar as missed.

The module's tests share one suite per backend (``shared_suite``): each works on a
schedule of its own, under a fresh id, and reads only that schedule's runs."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

import cronwave
from cronwave import Client, Run
from tests.harness.clients import client_for
from tests.harness.suites import SuiteFactory
from tests.helpers import eventually, fresh
from tests.schedules.conftest import LEASE_ENV, runs_of

pytestmark = [pytest.mark.slow, pytest.mark.both_backends]

SECOND = timedelta(seconds=1)


def wait_until(instant: datetime) -> None:
    """Block until the wall clock reaches ``instant`` (at most 5 s ahead): it places
    an update at a chosen moment relative to a fire; nothing is asserted on timing."""
    left = (instant - datetime.now(UTC)).total_seconds()
    assert left <= 5, f"{instant} is too far ahead"
    if left > 0:
        time.sleep(left)


def whole_seconds(start: datetime, end: datetime) -> list[datetime]:
    first = start.replace(microsecond=0)
    return [first + i * SECOND for i in range(int((end - first) / SECOND) + 1)]


def every_run_once(runs: list[Run]) -> None:
    """Each fire time has one run, claimed once and ended once."""
    counts = Counter(r.fire_time for r in runs)
    assert [t for t, n in counts.items() if n > 1] == []
    assert {r.state for r in runs} == {"SUCCEEDED"}, [(r.fire_time, r.state, r.error) for r in runs]
    assert {r.attempt for r in runs} == {1}


def settled(client: Client, schedule_id: str, through: datetime) -> list[Run]:
    """The schedule's runs of fire times up to ``through``, once it has fired past it
    and they have all ended (it goes on firing)."""

    def ended() -> list[Run]:
        runs = runs_of(client, schedule_id)
        if not any(r.fire_time > through for r in runs):
            return []
        done = [r for r in runs if r.fire_time <= through]
        return done if all(r.terminal for r in done) else []

    return eventually(ended, timeout=60, what=f"every run through {through} ended")


def test_payload_and_job_type_updates_around_fires_keep_one_run_per_slot(
    shared_suite: SuiteFactory,
) -> None:
    # Given a schedule every second that runs every slot (none is skipped or missed
    # for load: catch-up all, overlaps allowed)
    suite = shared_suite(env=LEASE_ENV)
    client = client_for(suite)
    sid = fresh("edge")
    client.create_schedule(
        sid,
        cron="* * * * * *",
        job_type="cronwave.noop",
        payload={"v": 0},
        overlap="allow_all",
        catchup="all",
        catchup_window=timedelta(hours=1),
    )
    eventually(lambda: runs_of(client, sid), timeout=60, what="the first run")

    # When its payload and job type change seven times, each just before, at, or just
    # after a fire (the planner dispatches each slot half a second ahead)
    updates: list[cronwave.Schedule] = []
    for version, offset in enumerate((-0.6, -0.3, -0.05, 0.0, 0.02, 0.1, 0.45), start=1):
        next_fire = datetime.now(UTC).replace(microsecond=0) + 2 * SECOND
        wait_until(next_fire + timedelta(seconds=offset))
        job = "cronwave.sleep" if version % 2 else "cronwave.noop"
        updates.append(
            client.update_schedule(sid, job_type=job, payload={"v": version, "seconds": 0})
        )
    last = updates[-1]
    assert last.updated_at is not None
    runs = settled(client, sid, last.updated_at + 3 * SECOND)

    # Then every second from the first fire to the last has exactly one run, once
    every_run_once(runs)
    fire_times = [r.fire_time for r in runs]
    assert fire_times == whole_seconds(fire_times[0], fire_times[-1])
    # and a run carries the version in force when it was recorded: never an older one
    # than the run before it, and the last version once the change has reached the
    # planner (a slot is dispatched at most half a second ahead)
    versions = [r.payload["v"] for r in runs]
    assert versions == sorted(versions)
    after_last = [r for r in runs if r.fire_time >= last.updated_at + 2 * SECOND]
    assert after_last
    assert {(r.job_type, r.payload["v"]) for r in after_last} == {("cronwave.sleep", 7)}
    assert {r.job_type for r in runs if r.payload["v"] % 2 == 0} == {"cronwave.noop"}


def test_a_cron_change_that_makes_a_run_slot_due_again_does_not_run_it_twice(
    shared_suite: SuiteFactory,
) -> None:
    # Given a schedule on even seconds, once its next slot is already dispatched
    suite = shared_suite(env=LEASE_ENV)
    client = client_for(suite)
    sid = fresh("recron")
    client.create_schedule(
        sid,
        cron="*/2 * * * * *",
        job_type="cronwave.noop",
        overlap="allow_all",
        catchup="all",
        catchup_window=timedelta(hours=1),
    )

    def dispatched_ahead() -> Run | None:
        runs, now = runs_of(client, sid), datetime.now(UTC)
        ahead = [r for r in runs if r.fire_time > now]
        ran = [r for r in runs if r.fire_time <= now and r.terminal]
        return ahead[0] if ahead and ran else None

    ahead = eventually(
        dispatched_ahead, timeout=60, interval=0.01, what="a run recorded ahead, after one ran"
    )

    # When its cron becomes every second -- under which that slot is due again
    updated = client.update_schedule(sid, cron="* * * * * *")
    assert updated.updated_at is not None and updated.updated_at < ahead.fire_time
    runs = settled(client, sid, ahead.fire_time + 4 * SECOND)

    # Then that slot ran once, and every second after it has its one run
    every_run_once(runs)
    assert [r.fire_time for r in runs].count(ahead.fire_time) == 1
    again = [e.kind for e in client.run_events(ahead.run_id)]
    assert again.count("claimed") == 1 and again.count("succeeded") == 1
    before = [r.fire_time for r in runs if r.fire_time < ahead.fire_time]
    assert before and all(t.second % 2 == 0 for t in before)
    after = [r.fire_time for r in runs if r.fire_time >= ahead.fire_time]
    assert after == whole_seconds(ahead.fire_time, after[-1]) and len(after) >= 5
    # and no slot between the two calendars was counted as missed
    assert [r for r in runs if r.state == "MISSED"] == []


def test_a_schedule_with_a_run_in_flight_is_deleted_only_by_force(
    shared_suite: SuiteFactory,
) -> None:
    # Given a schedule whose triggered run is sleeping on a worker
    suite = shared_suite(env=LEASE_ENV)
    client = client_for(suite)
    sid = fresh("busy")
    client.create_schedule(
        sid, cron="0 2 * * *", job_type="cronwave.sleep", payload={"seconds": 120}
    )
    run = client.trigger(sid)
    eventually(lambda: client.get_run(run.run_id).state == "RUNNING", timeout=60, what="running")

    # When it is deleted without force
    with pytest.raises(cronwave.FailedPrecondition) as refused:
        client.delete_schedule(sid)

    # Then the refusal names the run, and the schedule and its run go on
    assert f"{run.run_id} (RUNNING)" in refused.value.message
    assert "force=True" in refused.value.message  # the SDK's words, not the CLI's
    assert not client.get_schedule(sid).deleted
    assert client.get_run(run.run_id).state == "RUNNING"

    # When it is deleted with force
    deleted = client.delete_schedule(sid, force=True)

    # Then the run is cancelled (its attempt is refused at its next heartbeat) and
    # the schedule is gone
    assert deleted.deleted
    cancelled = client.get_run(run.run_id)
    assert (cancelled.state, cancelled.error) == ("CANCELLED", "schedule deleted")
    with pytest.raises(cronwave.NotFound):
        client.get_schedule(sid)
    assert client.get_run(run.run_id).state == "CANCELLED"
    assert client.get_run(run.run_id).attempt == 1
