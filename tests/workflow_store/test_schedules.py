"""Schedules and job types over real gRPC: CRUD, validation, soft delete, revisions."""

from __future__ import annotations

from datetime import timedelta

import grpc
import pytest
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import td_to_duration
from tests.harness.store import register_job_type, rpc_error, schedule_msg
from tests.helpers import fresh


def test_schedule_lifecycle(stub):
    # Given a registered job type and a new schedule
    job = register_job_type(stub)
    sid = fresh("nightly")
    created = stub.CreateSchedule(
        api.CreateScheduleRequest(schedule=schedule_msg(sid, job))
    ).schedule
    assert created.schedule_id == sid
    assert list(created.spec.cron) == ["0 2 * * *"]
    assert created.spec.time_zone == "Europe/Berlin"
    assert created.job_type == job
    assert created.payload_json == '{"customers": 100000}'
    assert created.revision > 0 and not created.paused and not created.deleted
    assert created.created_at.seconds > 0

    # When it is read, listed, paused, resumed and deleted
    got = stub.GetSchedule(api.GetScheduleRequest(schedule_id=sid)).schedule
    listed = stub.ListSchedules(api.ListSchedulesRequest())
    paused = stub.PauseSchedule(api.PauseScheduleRequest(schedule_id=sid, note="audit")).schedule
    resumed = stub.ResumeSchedule(
        api.ResumeScheduleRequest(schedule_id=sid, note="audit done")
    ).schedule
    deleted = stub.DeleteSchedule(api.DeleteScheduleRequest(schedule_id=sid)).schedule

    # Then every change is visible and bumps the revision
    assert got == created
    assert [s.schedule_id for s in listed.schedules] == [sid]
    assert listed.revision == created.revision
    assert paused.paused and paused.pause_note == "audit"
    assert not resumed.paused and resumed.pause_note == "audit done"
    assert deleted.deleted
    assert created.revision < paused.revision < resumed.revision < deleted.revision
    # A deleted schedule is gone for readers and writers, but watchers can list it
    for call, req in [
        (stub.GetSchedule, api.GetScheduleRequest(schedule_id=sid)),
        (stub.PauseSchedule, api.PauseScheduleRequest(schedule_id=sid)),
        (stub.ResumeSchedule, api.ResumeScheduleRequest(schedule_id=sid)),
        (stub.DeleteSchedule, api.DeleteScheduleRequest(schedule_id=sid)),
    ]:
        err = rpc_error(call, req)
        assert err.code() == grpc.StatusCode.NOT_FOUND, call
        assert sid in err.details()
    assert stub.ListSchedules(api.ListSchedulesRequest()).schedules == []
    with_deleted = stub.ListSchedules(api.ListSchedulesRequest(include_deleted=True))
    assert [(s.schedule_id, s.deleted) for s in with_deleted.schedules] == [(sid, True)]
    assert with_deleted.revision == deleted.revision

    # And the id can be used again
    again = stub.CreateSchedule(api.CreateScheduleRequest(schedule=schedule_msg(sid, job)))
    assert not again.schedule.deleted and again.schedule.revision > deleted.revision


def test_existing_schedule_is_not_replaced(stub):
    job = register_job_type(stub)
    sid = fresh("dup")
    first = stub.CreateSchedule(api.CreateScheduleRequest(schedule=schedule_msg(sid, job)))

    err = rpc_error(
        stub.CreateSchedule,
        api.CreateScheduleRequest(schedule=schedule_msg(sid, job, cron=["*/5 * * * *"])),
    )

    assert err.code() == grpc.StatusCode.ALREADY_EXISTS
    assert "schedule_id" in err.details()
    got = stub.GetSchedule(api.GetScheduleRequest(schedule_id=sid)).schedule
    assert got == first.schedule


def test_unknown_schedule_is_not_found(stub):
    err = rpc_error(stub.GetSchedule, api.GetScheduleRequest(schedule_id="no-such-schedule"))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert "no-such-schedule" in err.details()


def _set(name, value):
    def change(msg):
        if name.startswith("spec."):
            spec_field = getattr(msg.spec, name.removeprefix("spec."))
            if isinstance(value, list):
                del spec_field[:]
                spec_field.extend(value)
            else:
                setattr(msg.spec, name.removeprefix("spec."), value)
        else:
            setattr(msg, name, value)

    return change


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (_set("spec.cron", ["61 * * * *"]), "spec.cron[0]"),
        (_set("spec.cron", ["0 2 * * *", "not cron"]), "spec.cron[1]"),
        (_set("spec.time_zone", "Mars/Olympus_Mons"), "spec.time_zone"),
        (_set("spec.cron", []), "spec.cron"),
        (_set("spec.exclude_dates", ["2030-13-45"]), "spec.exclude_dates[0]"),
        (_set("schedule_id", "Bad Id!"), "schedule_id"),
        (_set("schedule_id", ""), "schedule_id"),
        (_set("schedule_id", "x" * 64), "schedule_id"),
        (_set("job_type", "no-such-job"), "job_type"),
        (_set("job_type", ""), "job_type"),
        (_set("payload_json", "[1, 2]"), "payload_json"),
        (_set("payload_json", "{not json"), "payload_json"),
    ],
)
def test_invalid_schedule_is_refused_and_nothing_is_stored(stub, change, field):
    # Given a store with one job type and no schedules
    job = register_job_type(stub)
    before = stub.ListSchedules(api.ListSchedulesRequest(include_deleted=True))
    msg = schedule_msg(fresh("bad"), job)
    change(msg)

    # When the schedule is created
    err = rpc_error(stub.CreateSchedule, api.CreateScheduleRequest(schedule=msg))

    # Then INVALID_ARGUMENT names the field, and nothing changed
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith(f"{field}: "), err.details()
    after = stub.ListSchedules(api.ListSchedulesRequest(include_deleted=True))
    assert after.schedules == before.schedules
    assert list(after.schedules) == []
    assert after.revision == before.revision


def test_unknown_job_type_message_lists_the_registered_ones(stub):
    a = register_job_type(stub, "alpha-" + fresh("j"))
    b = register_job_type(stub, "beta-" + fresh("j"))

    err = rpc_error(
        stub.CreateSchedule, api.CreateScheduleRequest(schedule=schedule_msg(fresh("s"), "nope"))
    )

    assert err.details().startswith(f"job_type: unknown job type 'nope'; registered: {a}, {b}; ")
    # and it says how a job type gets registered
    assert "@cronwave.job" in err.details() and "--jobs MODULE" in err.details()
    assert "`cronwave.jobs`" in err.details()


def test_job_type_registration(stub):
    # Given a job type registered with only its name and time limit
    name = fresh("billing")
    first = stub.RegisterJobType(
        api.RegisterJobTypeRequest(
            job_type=pb.JobType(name=name, duration_limit=td_to_duration(timedelta(hours=1)))
        )
    ).job_type
    # Then the defaults are filled in
    assert first.queue == "default"
    assert first.heartbeat_timeout.ToTimedelta() == timedelta(seconds=10)

    # When an admin (the harness calls RegisterJobType as the local administrator)
    # registers it again with more settings, it is replaced
    second = stub.RegisterJobType(
        api.RegisterJobTypeRequest(
            job_type=pb.JobType(
                name=name,
                duration_limit=td_to_duration(timedelta(hours=2)),
                heartbeat_timeout=td_to_duration(timedelta(seconds=3)),
                queue="billing",
                priority=7,
                financial=True,
                retry=pb.RetryPolicy(
                    initial_interval=td_to_duration(timedelta(seconds=1)),
                    backoff_coefficient=2.0,
                    maximum_interval=td_to_duration(timedelta(minutes=1)),
                    maximum_attempts=5,
                    non_retryable_errors=["CardDeclined"],
                ),
            )
        )
    ).job_type
    listed = [j for j in stub.ListJobTypes(api.ListJobTypesRequest()).job_types if j.name == name]
    assert listed == [second]
    assert second.duration_limit.ToTimedelta() == timedelta(hours=2)
    assert second.queue == "billing" and second.priority == 7 and second.financial
    assert second.retry.maximum_attempts == 5
    assert list(second.retry.non_retryable_errors) == ["CardDeclined"]
    assert second.retry.backoff_coefficient == 2.0


@pytest.mark.parametrize(
    ("job_type", "field"),
    [
        (pb.JobType(name="no-limit"), "job_type.duration_limit"),
        (
            pb.JobType(name="neg", duration_limit=td_to_duration(timedelta(seconds=-1))),
            "job_type.duration_limit",
        ),
        (pb.JobType(duration_limit=td_to_duration(timedelta(seconds=1))), "job_type.name"),
        (
            pb.JobType(name="Bad Name", duration_limit=td_to_duration(timedelta(seconds=1))),
            "job_type.name",
        ),
    ],
)
def test_invalid_job_type_is_refused(stub, job_type, field):
    err = rpc_error(stub.RegisterJobType, api.RegisterJobTypeRequest(job_type=job_type))

    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith(f"{field}: "), err.details()
    assert stub.ListJobTypes(api.ListJobTypesRequest()).job_types == []


def test_schedule_id_with_trailing_newline_is_refused(stub):
    job = register_job_type(stub)
    err = rpc_error(
        stub.CreateSchedule, api.CreateScheduleRequest(schedule=schedule_msg("ok-id\n", job))
    )
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith("schedule_id: ")
