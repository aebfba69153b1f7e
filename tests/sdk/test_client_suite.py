"""The SDK against a whole suite of real processes on loopback."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import cronwave
from tests.harness.clients import client_for
from tests.helpers import eventually, fresh

pytestmark = [pytest.mark.slow, pytest.mark.both_backends]

WAIT = timedelta(seconds=60)


def in_order(kinds: list[str], expected: list[str]) -> bool:
    """``expected`` occurs in ``kinds`` as a subsequence (other kinds may sit between)."""
    rest = iter(kinds)
    return all(kind in rest for kind in expected)


def test_a_triggered_run_succeeds_once_with_its_history_in_order(shared_suite):
    suite = shared_suite()
    sid = fresh("sdk")
    with client_for(suite) as client:
        # Given a schedule of the noop job
        schedule = client.create_schedule(
            sid,
            cron="0 2 * * *",
            time_zone="Europe/Berlin",
            job_type="cronwave.noop",
            payload={"note": "sdk test"},
        )
        assert (schedule.schedule_id, schedule.cron, schedule.time_zone) == (
            sid,
            ("0 2 * * *",),
            "Europe/Berlin",
        )
        assert schedule.payload == {"note": "sdk test"} and not schedule.paused
        assert client.get_schedule(sid).schedule_id == sid
        assert sid in [s.schedule_id for s in client.list_schedules()]

        # When it is triggered and waited for
        started = client.trigger(sid)
        run = client.wait_run(started.run_id, timeout=WAIT)

        # Then it succeeded exactly once, and its history says so in order
        assert started.schedule_id == sid and started.trigger == "MANUAL"
        assert run.state == "SUCCEEDED", run.error
        assert run.terminal and run.attempt == 1
        assert run.started_at is not None and run.finished_at is not None
        assert run.lateness is not None and run.duration is not None
        assert run.duration >= timedelta(0)
        events = client.run_events(run.run_id)
        kinds = [e.kind for e in events]
        assert kinds[0] == "recorded" and kinds[-1] == "succeeded", kinds
        assert in_order(kinds, ["recorded", "claimed", "succeeded"]), kinds
        # The dispatcher appends "enqueued" after handing the message to the broker,
        # so a quick worker's "claimed" may precede it; it still lies inside the run.
        assert in_order(kinds, ["recorded", "enqueued", "succeeded"]), kinds
        assert [e.seq for e in events] == sorted({e.seq for e in events})
        assert all(e.at.tzinfo is not None for e in events)
        assert all(e.run_id == run.run_id for e in events)
        assert [r.run_id for r in client.list_runs(sid)] == [run.run_id]
        assert [r.run_id for r in client.list_runs(sid, states=["SUCCEEDED"])] == [run.run_id]
        assert client.list_runs(sid, states=["FAILED"]) == []


def test_bad_schedules_are_refused_naming_the_field_and_nothing_is_written(make_suite):
    suite = make_suite()
    with client_for(suite) as client:
        before = client.list_schedules()
        cases = [
            ({"cron": "every night"}, "spec.cron[0]"),
            ({"cron": "0 2 * * *", "time_zone": "Mars/Olympus_Mons"}, "spec.time_zone"),
            ({"cron": "0 2 * * *", "job_type": "no.such.job"}, "job_type"),
        ]
        for overrides, field in cases:
            sid = fresh("bad")
            kwargs: dict[str, Any] = {"job_type": "cronwave.noop", **overrides}

            with pytest.raises(cronwave.InvalidArgument) as info:
                client.create_schedule(sid, **kwargs)

            assert info.value.field == field, str(info.value)
            assert str(info.value).startswith(f"{field}: ")
            with pytest.raises(cronwave.NotFound, match=sid):
                client.get_schedule(sid)

        assert client.list_schedules() == before
        with pytest.raises(cronwave.NotFound, match="run_id"):
            client.get_run("run_does_not_exist")
        with pytest.raises(cronwave.NotFound, match="schedule_id"):
            client.trigger(fresh("missing"))


def test_duplicate_ids_pause_resume_and_delete(shared_suite):
    suite = shared_suite()
    sid = fresh("life")
    with client_for(suite) as client:
        client.create_schedule(sid, cron="*/5 * * * *", job_type="cronwave.noop", paused=True)
        assert client.get_schedule(sid).paused

        with pytest.raises(cronwave.AlreadyExists, match=sid):
            client.create_schedule(sid, cron="* * * * *", job_type="cronwave.noop")

        resumed = client.resume_schedule(sid)
        paused = client.pause_schedule(sid, note="quarter-end freeze")
        assert not resumed.paused and paused.paused and paused.pause_note == "quarter-end freeze"
        assert paused.revision > resumed.revision

        deleted = client.delete_schedule(sid)
        assert deleted.deleted
        assert sid not in [s.schedule_id for s in client.list_schedules()]
        assert sid in [s.schedule_id for s in client.list_schedules(include_deleted=True)]


def test_a_refusal_relayed_by_another_service_keeps_its_kind(shared_suite):
    suite = shared_suite()
    sid, run_id = fresh("nowhere"), fresh("run_nowhere")
    with client_for(suite) as client:
        # When a trigger (which the dispatcher relays to the store) names no schedule,
        # and a cancel no run
        with pytest.raises(cronwave.ScheduleNotFound) as missing:
            client.trigger(sid)
        with pytest.raises(cronwave.RunNotFound) as gone:
            client.cancel_run(run_id)

    # Then each is raised as the class the store refused it with, with its attributes
    assert missing.value.schedule_id == sid and gone.value.run_id == run_id
    assert "Client.list_schedules()" in missing.value.message  # the SDK's hint


def test_a_spec_and_policy_given_whole_come_back_whole(shared_suite):
    suite = shared_suite()
    spec = cronwave.Spec(cron=("0 2 * * *",), time_zone="Europe/Berlin", max_runs=3)
    policy = cronwave.Policy(overlap=cronwave.Overlap.BUFFER_ALL, catchup=cronwave.Catchup.ALL)
    with client_for(suite) as client:
        created = client.create_schedule(fresh("whole"), spec, policy, job_type="cronwave.noop")

        stored = client.get_schedule(created.schedule_id)
        assert (stored.spec, stored.policy) == (spec, policy)
        assert client.preview(stored.spec, count=2) == client.preview(stored, count=2)


def test_wait_run_gives_up_with_wait_timeout_and_the_run_goes_on(shared_suite):
    suite = shared_suite()
    sid = fresh("slow")
    with client_for(suite) as client:
        client.create_schedule(
            sid, cron="0 2 * * *", job_type="cronwave.sleep", payload={"seconds": 3}
        )
        run = client.trigger(sid)

        with pytest.raises(cronwave.WaitTimeout) as info:
            client.wait_run(run.run_id, timeout=timedelta(milliseconds=300))

        assert info.value.run.run_id == run.run_id and not info.value.run.terminal
        assert str(info.value).startswith("run_id: ")
        # what to do next, in the SDK's words: a call, not a CLI command
        assert f"Client.run_events('{run.run_id}')" in str(info.value)
        assert "cronwave runs" not in str(info.value)
        assert client.wait_run(run.run_id, timeout=WAIT).state == "SUCCEEDED"


def test_leader_planner_status_and_preview(shared_suite):
    suite = shared_suite()
    with client_for(suite) as client:

        def held() -> cronwave.Lease:
            lease = client.leader()
            assert lease.held, lease
            return lease

        lease = eventually(held, what="a planner holds the lease")
        assert lease.scope == "planner"
        assert lease.expires_at is not None and lease.expires_at.tzinfo is not None

        def leading() -> cronwave.PlannerStatus:
            status = client.planner_status()
            assert status.leader, status
            return status

        status = eventually(leading, what="the planner knows it leads")
        assert status.candidate == lease.holder, status
        assert status.fencing_token > 0

        # 2026-03-29 is the spring-forward day in Berlin: 02:00 does not exist.
        after = datetime(2026, 3, 28, 0, 0, tzinfo=UTC)
        shifted = client.preview("0 2 * * *", time_zone="Europe/Berlin", after=after, count=3)
        skipped = client.preview(
            "0 2 * * *", time_zone="Europe/Berlin", dst_gap="skip", after=after, count=2
        )

        assert shifted == [
            datetime(2026, 3, 28, 1, 0, tzinfo=UTC),  # 02:00 CET
            datetime(2026, 3, 29, 1, 0, tzinfo=UTC),  # 03:00 CEST, first instant after the gap
            datetime(2026, 3, 30, 0, 0, tzinfo=UTC),  # 02:00 CEST
        ]
        assert skipped == [shifted[0], shifted[2]]
        with pytest.raises(cronwave.InvalidArgument, match=r"spec\.cron\[0\]"):
            client.preview("0 25 * * *")
