"""UpdateSchedule, CreateSchedule's if_absent and DeleteSchedule's force over real gRPC:
only the masked fields change, all or nothing, and a delete never strands a run."""

from __future__ import annotations

import grpc
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api
from google.protobuf.field_mask_pb2 import FieldMask

from tests.harness.store import (
    create_schedule,
    record_run,
    register_job_type,
    rpc_error,
    schedule_msg,
)
from tests.helpers import fresh


def update(stub, schedule: pb.Schedule, *paths: str) -> api.UpdateScheduleResponse:
    return stub.UpdateSchedule(
        api.UpdateScheduleRequest(schedule=schedule, update_mask=FieldMask(paths=list(paths)))
    )


def get(stub, sid: str) -> pb.Schedule:
    return stub.GetSchedule(api.GetScheduleRequest(schedule_id=sid)).schedule


def test_an_update_changes_only_the_fields_it_names(stub):
    # Given a schedule at 02:00 Berlin time with a payload
    created = create_schedule(stub)
    sid = created.schedule_id

    # When its payload, then its zone alone, then its overlap policy alone change
    payload = update(
        stub, pb.Schedule(schedule_id=sid, payload_json='{"customers": 7}'), "payload_json"
    )
    zone = update(
        stub,
        pb.Schedule(schedule_id=sid, spec=pb.ScheduleSpec(time_zone="America/New_York")),
        "spec.time_zone",
    )
    overlap = update(
        stub,
        pb.Schedule(schedule_id=sid, policy=pb.SchedulePolicy(overlap=pb.OVERLAP_POLICY_ALLOW_ALL)),
        "policy.overlap",
    )

    # Then each keeps every other field, and each change has a newer revision
    assert payload.changed and zone.changed and overlap.changed
    now = get(stub, sid)
    assert now.payload_json == '{"customers": 7}'
    assert list(now.spec.cron) == list(created.spec.cron) == ["0 2 * * *"]
    assert now.spec.time_zone == "America/New_York"
    assert now.policy.overlap == pb.OVERLAP_POLICY_ALLOW_ALL
    assert now.job_type == created.job_type and now.created_at == created.created_at
    assert created.revision < payload.schedule.revision < zone.schedule.revision
    assert zone.schedule.revision < overlap.schedule.revision == now.revision


def test_an_update_to_the_values_it_has_writes_nothing(stub):
    created = create_schedule(stub)
    same = update(stub, created, "spec", "policy", "job_type", "payload_json")
    assert not same.changed
    assert get(stub, created.schedule_id) == created


def test_a_job_type_change_needs_a_registered_job_type(stub):
    created = create_schedule(stub)
    other = register_job_type(stub)
    changed = update(stub, pb.Schedule(schedule_id=created.schedule_id, job_type=other), "job_type")
    assert changed.schedule.job_type == other

    err = rpc_error(
        update, stub, pb.Schedule(schedule_id=created.schedule_id, job_type="no.such"), "job_type"
    )
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith("job_type: unknown job type 'no.such'")
    assert get(stub, created.schedule_id).job_type == other


def test_a_bad_update_is_refused_whole_and_changes_nothing(stub):
    # Given a schedule
    created = create_schedule(stub)
    sid = created.schedule_id
    bad_cron = pb.Schedule(
        schedule_id=sid, spec=pb.ScheduleSpec(cron=["61 * * * *"]), payload_json='{"a": 1}'
    )

    # When an update brings a bad cron along with a good payload, a bad zone, a bad
    # payload, or a mask it cannot follow
    refusals = [
        (rpc_error(update, stub, bad_cron, "spec.cron", "payload_json"), "spec.cron[0]: "),
        (
            rpc_error(
                update,
                stub,
                pb.Schedule(schedule_id=sid, spec=pb.ScheduleSpec(time_zone="Mars/Olympus")),
                "spec.time_zone",
            ),
            "spec.time_zone: ",
        ),
        (
            rpc_error(
                update, stub, pb.Schedule(schedule_id=sid, payload_json="[1]"), "payload_json"
            ),
            "payload_json: ",
        ),
        (rpc_error(update, stub, pb.Schedule(schedule_id=sid)), "update_mask: required"),
        (
            rpc_error(update, stub, pb.Schedule(schedule_id=sid), "schedule_id"),
            "update_mask.paths[0]: 'schedule_id' names the schedule and cannot be changed",
        ),
        (
            rpc_error(update, stub, pb.Schedule(schedule_id=sid), "payload_json", "spec.crons"),
            "update_mask.paths[1]: unknown path 'spec.crons'",
        ),
        (
            rpc_error(update, stub, pb.Schedule(schedule_id=sid), "spec", "spec.cron"),
            "update_mask.paths[1]: 'spec.cron' is named twice",
        ),
        (
            rpc_error(update, stub, pb.Schedule(schedule_id=sid), "revision"),
            "update_mask.paths[0]: 'revision' is kept by the store",
        ),
    ]

    # Then each is INVALID_ARGUMENT naming the field, and the schedule is as it was
    for err, prefix in refusals:
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
        assert err.details().startswith(prefix), (prefix, err.details())
    assert get(stub, sid) == created


def test_an_unknown_or_deleted_schedule_cannot_be_updated(stub):
    created = create_schedule(stub)
    stub.DeleteSchedule(api.DeleteScheduleRequest(schedule_id=created.schedule_id))
    for sid in (created.schedule_id, fresh("never")):
        err = rpc_error(
            update, stub, pb.Schedule(schedule_id=sid, payload_json="{}"), "payload_json"
        )
        assert err.code() == grpc.StatusCode.NOT_FOUND
        assert err.details() == f"schedule_id: no schedule '{sid}'"
    err = rpc_error(update, stub, pb.Schedule(schedule_id="Bad Id"), "payload_json")
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith("schedule.schedule_id: ")


def test_create_if_absent_returns_the_existing_schedule_unchanged(stub):
    # Given a schedule
    job = register_job_type(stub)
    sid = fresh("absent")
    first = stub.CreateSchedule(api.CreateScheduleRequest(schedule=schedule_msg(sid, job)))

    # When it is created again with if_absent, with another body, and without
    other = schedule_msg(sid, job, cron=["*/5 * * * *"])
    again = stub.CreateSchedule(api.CreateScheduleRequest(schedule=other, if_absent=True))
    strict = rpc_error(stub.CreateSchedule, api.CreateScheduleRequest(schedule=other))

    # Then if_absent returns it as it was; a plain create stays strict
    assert first.created and not again.created
    assert again.schedule == first.schedule == get(stub, sid)
    assert strict.code() == grpc.StatusCode.ALREADY_EXISTS
    # if_absent still validates the request
    bad = schedule_msg(sid, job, cron=["not a cron"])
    err = rpc_error(stub.CreateSchedule, api.CreateScheduleRequest(schedule=bad, if_absent=True))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_managed_by_is_kept_and_can_be_changed(stub):
    job = register_job_type(stub)
    msg = schedule_msg(fresh("managed"), job)
    msg.managed_by = "apply:billing"
    created = stub.CreateSchedule(api.CreateScheduleRequest(schedule=msg)).schedule
    assert created.managed_by == "apply:billing"
    released = update(stub, pb.Schedule(schedule_id=created.schedule_id), "managed_by")
    assert released.schedule.managed_by == ""


def test_a_delete_with_a_run_in_flight_is_refused_unless_forced(stub):
    # Given a schedule with a PENDING run
    created = create_schedule(stub)
    sid = created.schedule_id
    run = record_run(stub, sid).run

    # When it is deleted without force
    err = rpc_error(stub.DeleteSchedule, api.DeleteScheduleRequest(schedule_id=sid))

    # Then the delete is refused naming the run, and nothing changed
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert err.details().startswith(
        f"schedule_id: schedule '{sid}' has 1 run(s) in flight: {run.run_id} (PENDING); "
    )
    assert "delete it with force" in err.details()
    assert "--force" not in err.details() and "force=True" not in err.details()  # no surface's
    assert get(stub, sid) == created

    # When it is deleted with force
    forced = stub.DeleteSchedule(api.DeleteScheduleRequest(schedule_id=sid, force=True))

    # Then the run is cancelled and the schedule deleted
    assert forced.schedule.deleted
    assert [r.run_id for r in forced.cancelled] == [run.run_id]
    now = stub.GetRuns(api.GetRunsRequest(runs=[api.GetRunRequest(run_id=run.run_id)])).runs[0]
    assert now.state == pb.RUN_STATE_CANCELLED and now.error == "schedule deleted"
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events
    assert events[-1].kind == "cancelled"
