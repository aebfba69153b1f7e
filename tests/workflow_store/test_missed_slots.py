"""RecordMissedSlots as a stolen planner certificate would call it, over real gRPC: with
the current fencing token it may record a slot MISSED only when the slot is one of
its schedule's calendar, due, and has no run; so no one can skip the next fire
times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as api_grpc

from cronwave_core.convert import dt_to_ts
from tests.harness.store import (
    PAST_FIRE,
    create_schedule,
    record_missed,
    record_run,
    rpc_error,
)
from tests.harness.tls import caller_for

TOKEN = 3  # issued by the harness's store, as a lease grant would have
EVERY_MINUTE = {"cron": ["* * * * *"], "time_zone": "UTC"}


def missed(schedule_id: str, fire_times: list[datetime], reason: str = "overlap_skip"):
    return api.RecordMissedSlotsRequest(
        slots=[
            api.MissedSlot(schedule_id=schedule_id, fire_time=dt_to_ts(at), reason=reason)
            for at in fire_times
        ],
        fencing_token=TOKEN,
    )


def rows(stub: api_grpc.WorkflowStoreServiceStub, schedule_id: str) -> list[pb.Run]:
    return list(stub.ListRuns(api.ListRunsRequest(schedule_id=schedule_id, limit=100)).runs)


def test_the_next_fire_times_cannot_be_recorded_missed(stub) -> None:
    # Given a schedule every minute (the harness calls RecordMissedSlots as a planner)
    assert caller_for("/cronwave.v1.WorkflowStoreService/RecordMissedSlots") == "cron-planner"
    sid = create_schedule(stub, **EVERY_MINUTE).schedule_id
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    next_fifteen = [minute + timedelta(minutes=i) for i in range(2, 17)]

    # When its next 15 fire times are recorded MISSED with the current token
    err = rpc_error(stub.RecordMissedSlots, missed(sid, next_fifteen))

    # Then the call is refused, naming the first slot, and nothing is written
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert err.details().startswith("slots[0].fire_time: ")
    assert "is not due yet" in err.details()
    assert rows(stub, sid) == []
    # and the first of them is started as a run when its time comes
    assert record_run(stub, sid, next_fifteen[0], token=TOKEN).created


def test_an_instant_that_is_no_fire_time_is_refused_naming_it(stub) -> None:
    # Given a schedule at 02:00 in Berlin, and one of its past fire times
    sid = create_schedule(stub).schedule_id
    odd = PAST_FIRE + timedelta(minutes=17)

    # When a batch records that fire time and an instant the calendar does not have
    err = rpc_error(stub.RecordMissedSlots, missed(sid, [PAST_FIRE, odd]))

    # Then the batch is refused, naming the instant, and nothing is written
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith("slots[1].fire_time: 2026-01-01T01:17:00+00:00 is no fire ")
    assert f"of schedule '{sid}'" in err.details()
    assert rows(stub, sid) == []


def test_a_slot_with_a_run_keeps_its_run(stub) -> None:
    # Given a past slot that has a run
    sid = create_schedule(stub).schedule_id
    ran = record_run(stub, sid, PAST_FIRE, token=TOKEN).run

    # When it is recorded MISSED
    written, row = record_missed(stub, sid, PAST_FIRE, token=TOKEN)

    # Then nothing is written: the run stays as it was
    assert written == 0
    assert row is not None and row.run_id == ran.run_id and row.state == pb.RUN_STATE_PENDING


def test_what_a_planner_records_is_still_accepted(stub) -> None:
    # Given a schedule at 02:00 in Berlin, and one every day at 02:30 in New York that
    # skips the slot a DST gap leaves out (2026-03-08)
    berlin = create_schedule(stub).schedule_id
    new_york = create_schedule(
        stub, cron=["30 2 * * *"], time_zone="America/New_York", dst_gap=pb.DST_GAP_POLICY_SKIP
    ).schedule_id
    skipped = datetime(2026, 3, 8, 7, 30, 0, 1, tzinfo=UTC)  # its nominal instant + 1 us

    # When a planner records a due fire time, the skipped slot, a placeholder that then
    # takes its final reason, and its summary of the slots outside the catch-up window
    # (an instant between fire times by design)
    day_after = PAST_FIRE + timedelta(days=1)
    results = [
        record_missed(stub, berlin, PAST_FIRE, reason="catchup_skip", token=TOKEN),
        record_missed(stub, new_york, skipped, reason="dst_gap_skip", token=TOKEN),
        record_missed(stub, berlin, day_after, reason="pending:catchup", token=TOKEN),
        record_missed(stub, berlin, day_after, reason="paused", token=TOKEN),
        record_missed(
            stub,
            berlin,
            PAST_FIRE - timedelta(microseconds=1),
            reason="outside_catchup_window: summary of every slot after ... through ...",
            token=TOKEN,
        ),
    ]

    # Then each is written
    assert [written for written, _ in results] == [1, 1, 1, 1, 1]
    assert all(row is not None and row.state == pb.RUN_STATE_MISSED for _, row in results)
    assert results[3][1] is not None and results[3][1].error == "paused"


def test_a_placeholder_may_stand_for_a_fire_time_within_a_minute_and_its_start_takes_it(
    stub,
) -> None:
    # Given a schedule every minute, its next fire time (less than a minute away) and
    # the one two minutes after it
    sid = create_schedule(stub, **EVERY_MINUTE).schedule_id
    next_fire = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    later = next_fire + timedelta(minutes=2)

    # When a planner records a placeholder for each (a fire decided ahead, put off)
    written, row = record_missed(stub, sid, next_fire, reason="pending:retry", token=TOKEN)
    err = rpc_error(stub.RecordMissedSlots, missed(sid, [later], reason="pending:retry"))

    # Then the next fire time's stands in the store; the other is refused, naming it
    assert written == 1 and row is not None and row.state == pb.RUN_STATE_MISSED
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert err.details().startswith("slots[0].fire_time: ")
    assert "too far ahead for a placeholder" in err.details()
    assert [r.fire_time.ToDatetime(UTC) for r in rows(stub, sid)] == [next_fire]
    # and starting the slot turns its placeholder into the run
    started = record_run(stub, sid, next_fire, token=TOKEN).run
    assert started.run_id == row.run_id and started.state == pb.RUN_STATE_PENDING
