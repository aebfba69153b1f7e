"""RecordRuns as a stolen dispatcher certificate would call it, over real gRPC: a paused
schedule's fires are refused, and a manual run is recorded only on behalf of a
person (whom the dispatcher relays), audited as theirs."""

from __future__ import annotations

import grpc
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import dt_to_ts
from cronwave_core.security.identity import ON_BEHALF_OF
from tests.harness.store import FIRE, create_schedule, record_run, rpc_error
from tests.harness.tls import caller_for

PLANNED = (pb.TRIGGER_KIND_SCHEDULED, pb.TRIGGER_KIND_CATCHUP, pb.TRIGGER_KIND_BACKFILL)


def record(schedule_id: str, trigger: pb.TriggerKind, token: int = 1) -> api.RecordRunRequest:
    return api.RecordRunRequest(
        schedule_id=schedule_id, fire_time=dt_to_ts(FIRE), trigger=trigger, fencing_token=token
    )


def test_a_paused_schedules_fires_are_refused(stub) -> None:
    # Given a paused schedule (the harness calls RecordRuns as the dispatcher)
    assert caller_for("/cronwave.v1.WorkflowStoreService/RecordRuns") == "dispatcher"
    sid = create_schedule(stub).schedule_id
    stub.PauseSchedule(api.PauseScheduleRequest(schedule_id=sid, note="migration"))

    # When a scheduled, a catch-up and a backfill fire of it are recorded, with the
    # current fencing token
    reply = stub.RecordRuns(api.RecordRunsRequest(runs=[record(sid, t) for t in PLANNED]))

    # Then each is refused, naming the schedule, and nothing is written
    for result in reply.results:
        assert result.HasField("error"), result
        assert result.error.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
        assert result.error.message.startswith(f"schedule_id: schedule '{sid}' is paused")
    assert list(stub.ListRuns(api.ListRunsRequest(schedule_id=sid)).runs) == []
    # and a person may still trigger it, and it fires again once resumed
    assert record_run(stub, sid, FIRE, token=0, trigger=pb.TRIGGER_KIND_MANUAL).created
    stub.ResumeSchedule(api.ResumeScheduleRequest(schedule_id=sid))
    assert record_run(stub, sid, FIRE.replace(year=2031), token=1).created


def test_a_manual_run_is_recorded_only_on_behalf_of_a_person(stub) -> None:
    # Given a schedule
    sid = create_schedule(stub).schedule_id
    manual = api.RecordRunsRequest(runs=[record(sid, pb.TRIGGER_KIND_MANUAL, token=0)])

    # When the dispatcher's certificate records a manual run on nobody's behalf
    err = rpc_error(stub.RecordRuns, manual)

    # Then it is refused, naming the trigger, and nothing is written
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    assert err.details() == (
        "runs[0].trigger: a MANUAL run is recorded only on behalf of an authenticated "
        "person (an operator's TriggerRun, relayed by the dispatcher), and service "
        "dispatcher relays nobody"
    )
    assert list(stub.ListRuns(api.ListRunsRequest(schedule_id=sid)).runs) == []

    # When it relays a person's trigger
    reply = stub.RecordRuns(manual, metadata=[(ON_BEHALF_OF, "user:otto")])

    # Then the run is recorded, and audited as the person's
    [result] = reply.results
    assert result.recorded.created and result.recorded.run.trigger == pb.TRIGGER_KIND_MANUAL
    events = stub.ListAuditEvents(api.ListAuditEventsRequest(schedule_id=sid)).events
    assert (events[0].rpc, events[0].actor) == ("RecordRuns", "user:otto via service:dispatcher")
