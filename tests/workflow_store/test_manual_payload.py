"""A manual run may carry its own payload (TriggerRun's ``payload_json``, relayed as
RecordRunRequest's): that run gets it, the schedule keeps its own, the audit trail
says so by size, and a slot (any other trigger) or a payload that is no JSON object is
refused naming the field, nothing recorded."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import grpc
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import dt_to_ts
from cronwave_core.security.identity import ON_BEHALF_OF
from tests.harness.store import MANUAL_BY, StoreProcess, create_schedule, rpc_error
from tests.helpers import get_one, record_one

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def manual(schedule_id: str, payload_json: str) -> api.RecordRunRequest:
    return api.RecordRunRequest(
        schedule_id=schedule_id,
        fire_time=dt_to_ts(NOW),
        trigger=pb.TRIGGER_KIND_MANUAL,
        payload_json=payload_json,
    )


def test_a_manual_run_carries_its_own_payload_and_the_schedule_keeps_its(
    store: StoreProcess,
) -> None:
    # Given a schedule with a payload
    stub = store.stub()
    schedule = create_schedule(stub)

    # When a manual run is recorded with a payload of its own
    own = '{"customers": 3, "dry_run": true}'
    recorded = record_one(
        stub, manual(schedule.schedule_id, own), metadata=[(ON_BEHALF_OF, MANUAL_BY)]
    )

    # Then the run has it, the schedule still has its own, and the audit says so
    run = get_one(stub, recorded.run.run_id)
    assert json.loads(run.payload_json) == {"customers": 3, "dry_run": True}
    kept = stub.GetSchedule(api.GetScheduleRequest(schedule_id=schedule.schedule_id)).schedule
    assert kept.payload_json == schedule.payload_json
    events = stub.ListAuditEvents(
        api.ListAuditEventsRequest(schedule_id=schedule.schedule_id)
    ).events
    recorded_event = next(e for e in events if e.run_id == run.run_id)
    assert json.loads(recorded_event.changes_json)["payload_json"] == {
        "old_bytes": 0,
        "new_bytes": len(own),
    }


def test_a_slot_or_a_payload_that_is_no_object_is_refused_naming_the_field(
    store: StoreProcess,
) -> None:
    stub = store.stub()
    schedule = create_schedule(stub)
    slot = api.RecordRunRequest(
        schedule_id=schedule.schedule_id,
        fire_time=dt_to_ts(NOW),
        trigger=pb.TRIGGER_KIND_SCHEDULED,
        fencing_token=1,
        payload_json='{"customers": 3}',
    )

    # When a scheduled run brings a payload, and a manual one brings a list
    for request, metadata, rule in (
        (slot, [], "a scheduled run has its schedule's payload"),
        (manual(schedule.schedule_id, "[1, 2]"), [(ON_BEHALF_OF, MANUAL_BY)], "JSON object"),
    ):
        err = rpc_error(stub.RecordRuns, api.RecordRunsRequest(runs=[request]), metadata=metadata)

        # Then each is refused naming the item's field, and nothing is recorded
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err
        assert err.details().startswith("runs[0].payload_json: "), err.details()
        assert rule in err.details(), err.details()
    listed = stub.ListRuns(api.ListRunsRequest(schedule_id=schedule.schedule_id, limit=10))
    assert list(listed.runs) == []
