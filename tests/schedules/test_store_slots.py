"""The store's planner-facing RPCs over real gRPC and a real database: newest fire
times in bulk (paged, one GROUP BY per page), MISSED rows in batches, and placeholders
that a start turns into the run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import dt_to_ts, ts_to_dt
from cronwave_core.settings import TEST_HOOKS
from tests.harness.planner import SIMULATED_CALENDAR
from tests.harness.store import (
    StartStore,
    StoreProcess,
    create_schedule,
    record_missed,
    record_run,
    register_job_type,
    rpc_error,
)
from tests.helpers import get_one

pytestmark = pytest.mark.slow

T = datetime(2030, 1, 1, 2, 0, tzinfo=UTC)
#: Every minute in New York, skipping the wall-clock times a DST gap leaves out: T and
#: the minutes after it are fire times, ``SKIPPED`` a slot the DST policy skipped (the
#: store records only a slot of the schedule's calendar MISSED).
EVERY_MINUTE = {
    "cron": ["* * * * *"],
    "time_zone": "America/New_York",
    "dst_gap": pb.DST_GAP_POLICY_SKIP,
}
SKIPPED = datetime(2030, 3, 10, 7, 30, 0, 1, tzinfo=UTC)


@pytest.fixture
def store(start_store: StartStore) -> StoreProcess:
    """A store that accepts MISSED slots in 2030, as the tests' clocked planners need
    (newest fire times count only those after the schedule's creation)."""
    return start_store(env={TEST_HOOKS: "1", **SIMULATED_CALENDAR})


def slot(
    schedule_id: str, minutes: int, reason: str, trigger: pb.TriggerKind = pb.TRIGGER_KIND_SCHEDULED
):
    return api.MissedSlot(
        schedule_id=schedule_id,
        fire_time=dt_to_ts(T + timedelta(minutes=minutes)),
        reason=reason,
        trigger=trigger,
    )


def batch(stub, slots, token: int = 5) -> api.RecordMissedSlotsResponse:
    return stub.RecordMissedSlots(
        api.RecordMissedSlotsRequest(slots=slots, fencing_token=token), timeout=10
    )


def test_latest_fire_times_in_pages_with_counts(store: StoreProcess) -> None:
    # Given four schedules: runs and MISSED rows for three, a backfill and a manual
    # run that do not count, and a DST-skipped slot that moves the mark but is no fire
    stub = store.stub()
    job = register_job_type(stub)
    ids = sorted(create_schedule(stub, job, **EVERY_MINUTE).schedule_id for _ in range(4))
    a, b, c, d = ids
    record_run(stub, a, T, token=5)
    record_run(stub, a, T + timedelta(minutes=1), token=5)
    batch(stub, [slot(a, 2, "outside_catchup_window"), slot(b, 1, "catchup_skip")])
    record_run(stub, b, T + timedelta(hours=1), token=5, trigger=pb.TRIGGER_KIND_BACKFILL)
    record_run(stub, c, T, token=5, trigger=pb.TRIGGER_KIND_CATCHUP)
    skipped = SKIPPED
    record_missed(stub, c, skipped, reason="dst_gap_skip", token=5)

    # When they are read two per page
    first = stub.LatestFireTimes(api.LatestFireTimesRequest(limit=2), timeout=10).entries
    rest = stub.LatestFireTimes(
        api.LatestFireTimesRequest(limit=2, after_schedule_id=first[-1].schedule_id), timeout=10
    ).entries

    # Then each schedule with runs appears once, by id, with its newest and its count
    got = {e.schedule_id: (ts_to_dt(e.fire_time), e.fires) for e in [*first, *rest]}
    assert [e.schedule_id for e in [*first, *rest]] == [a, b, c]
    assert got == {
        a: (T + timedelta(minutes=2), 3),
        b: (T + timedelta(minutes=1), 1),
        c: (skipped, 1),
    }
    assert d not in got
    only = stub.LatestFireTimes(api.LatestFireTimesRequest(schedule_ids=[b, d]), timeout=10)
    assert [e.schedule_id for e in only.entries] == [b]

    # And asked for by id, two per page, the same figures (PostgreSQL plans this per id)
    asked = api.LatestFireTimesRequest(schedule_ids=[d, c, b, a], limit=2)
    page = stub.LatestFireTimes(asked, timeout=10).entries
    asked.after_schedule_id = page[-1].schedule_id
    pages = [*page, *stub.LatestFireTimes(asked, timeout=10).entries]
    assert [e.schedule_id for e in pages] == [a, b, c]
    assert {e.schedule_id: (ts_to_dt(e.fire_time), e.fires) for e in pages} == got


def test_latest_fire_times_up_to_a_bound_leave_out_what_lies_past_it(
    store: StoreProcess,
) -> None:
    # Given a schedule with runs at T, T+1 min and a day ahead (a planner's clock that
    # ran ahead recorded the last)
    stub = store.stub()
    sid = create_schedule(stub, **EVERY_MINUTE).schedule_id
    ahead = T + timedelta(days=1)
    for fire in (T, T + timedelta(minutes=1), ahead):
        record_run(stub, sid, fire, token=5)

    def latest(until: datetime | None, **asked: object) -> list[tuple[str, datetime, int]]:
        request = api.LatestFireTimesRequest(
            until=None if until is None else dt_to_ts(until), **asked
        )
        entries = stub.LatestFireTimes(request, timeout=10).entries
        return [(e.schedule_id, ts_to_dt(e.fire_time), e.fires) for e in entries]

    # Then, asked by id (PostgreSQL plans this per id) and for every schedule, a bound
    # counts the fire times at or before it alone, and no bound counts them all
    for asked in ({"schedule_ids": [sid]}, {}):
        assert latest(None, **asked) == [(sid, ahead, 3)], asked
        assert latest(T + timedelta(minutes=30), **asked) == [(sid, T + timedelta(minutes=1), 2)]
        assert latest(T + timedelta(minutes=1), **asked) == [(sid, T + timedelta(minutes=1), 2)]
        assert latest(T - timedelta(microseconds=1), **asked) == [], asked


def test_a_missed_batch_is_fenced_and_leaves_existing_runs_alone(store: StoreProcess) -> None:
    stub = store.stub()
    sid = create_schedule(stub, **EVERY_MINUTE).schedule_id
    ran = record_run(stub, sid, T, token=5).run

    # A batch writes new rows, skips unknown schedules, leaves a run alone
    reply = batch(
        stub, [slot(sid, 0, "overlap_skip"), slot(sid, 1, "catchup_cap"), slot("nope", 1, "x")]
    )
    assert (reply.recorded, list(reply.unknown_schedules)) == (1, ["nope"])
    assert get_one(stub, ran.run_id, timeout=10).state == (pb.RUN_STATE_PENDING)

    # A stale token writes nothing
    err = rpc_error(batch, stub, [slot(sid, 9, "catchup_cap")], token=4)
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert err.details().startswith("fencing_token: ")
    runs = stub.ListRuns(api.ListRunsRequest(schedule_id=sid), timeout=10).runs
    assert sorted(ts_to_dt(r.fire_time) for r in runs) == [T, T + timedelta(minutes=1)]

    # A malformed slot is named
    err = rpc_error(batch, stub, [api.MissedSlot(schedule_id=sid, reason="x")])
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith("slots[0].fire_time: ")


def test_a_placeholder_becomes_the_run_or_takes_its_final_reason(store: StoreProcess) -> None:
    # Given placeholders for a paced catch-up run, a buffered fire and a backfill
    stub = store.stub()
    sid = create_schedule(stub, **EVERY_MINUTE).schedule_id
    batch(
        stub,
        [
            slot(sid, 0, "pending:catchup", pb.TRIGGER_KIND_CATCHUP),
            slot(sid, 1, "pending:overlap_buffer", pb.TRIGGER_KIND_SCHEDULED),
            slot(sid, 2, "pending:backfill", pb.TRIGGER_KIND_BACKFILL),
            slot(sid, 3, "outside_catchup_window"),
        ],
    )
    pending = stub.ListPendingFires(api.ListPendingFiresRequest(), timeout=10).runs
    assert [r.error for r in pending] == [
        "pending:catchup",
        "pending:overlap_buffer",
        "pending:backfill",
    ]

    # When the catch-up run starts, the buffered fire is skipped after all, and the
    # backfill and the MISSED slot are started by a backfill
    started = record_run(stub, sid, T, token=6, trigger=pb.TRIGGER_KIND_CATCHUP)
    _, skipped = record_missed(stub, sid, T + timedelta(minutes=1), reason="overlap_skip", token=6)
    backfilled = record_run(
        stub, sid, T + timedelta(minutes=2), token=6, trigger=pb.TRIGGER_KIND_BACKFILL
    )
    rerun = record_run(
        stub, sid, T + timedelta(minutes=3), token=6, trigger=pb.TRIGGER_KIND_BACKFILL
    )
    again = record_run(
        stub, sid, T + timedelta(minutes=3), token=6, trigger=pb.TRIGGER_KIND_BACKFILL
    )

    # Then each placeholder turned into what was decided, keeping its run id
    ids = {r.run_id for r in pending}
    assert started.created and started.run.state == pb.RUN_STATE_PENDING
    assert started.run.trigger == pb.TRIGGER_KIND_CATCHUP and started.run.run_id in ids
    assert skipped is not None and skipped.run_id in ids
    assert skipped.state == pb.RUN_STATE_MISSED and skipped.error == "overlap_skip"
    assert backfilled.created and backfilled.run.run_id in ids
    assert rerun.created and rerun.run.state == pb.RUN_STATE_PENDING
    assert not again.created  # a second start of the same slot is the same run
    assert list(stub.ListPendingFires(api.ListPendingFiresRequest(), timeout=10).runs) == []
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=rerun.run.run_id), timeout=10)
    assert [e.kind for e in events.events] == ["missed", "recorded", "enqueued"]
    assert "was MISSED: outside_catchup_window" in events.events[1].detail


def test_list_schedules_pages_by_id(store: StoreProcess) -> None:
    stub = store.stub()
    job = register_job_type(stub)
    ids = sorted(create_schedule(stub, job).schedule_id for _ in range(5))

    pages, after = [], ""
    while True:
        reply = stub.ListSchedules(
            api.ListSchedulesRequest(limit=2, after_schedule_id=after), timeout=10
        )
        pages.append([s.schedule_id for s in reply.schedules])
        if len(reply.schedules) < 2:
            break
        after = reply.schedules[-1].schedule_id

    assert pages == [ids[0:2], ids[2:4], ids[4:]]


def test_one_batch_of_starts_revives_its_placeholders_together(store: StoreProcess) -> None:
    # Given three paced catch-up placeholders of a schedule
    stub = store.stub()
    sid = create_schedule(stub, **EVERY_MINUTE).schedule_id
    batch(stub, [slot(sid, i, "pending:catchup", pb.TRIGGER_KIND_CATCHUP) for i in range(3)])
    pending = {r.fire_time.ToDatetime(UTC): r.run_id for r in stub.ListPendingFires(
        api.ListPendingFiresRequest(), timeout=10).runs}  # fmt: skip
    assert len(pending) == 3

    # When one RecordRuns starts all three, the first twice, and a slot with no row
    def start(minutes: int) -> api.RecordRunRequest:
        return api.RecordRunRequest(
            schedule_id=sid,
            fire_time=dt_to_ts(T + timedelta(minutes=minutes)),
            trigger=pb.TRIGGER_KIND_CATCHUP,
            fencing_token=6,
            enqueue=True,
        )

    reply = stub.RecordRuns(
        api.RecordRunsRequest(runs=[start(0), start(1), start(0), start(2), start(4)]),
        timeout=10,
    )

    # Then each placeholder became its run once, keeping its id; the repeated start
    # is answered with that run, not created again; the new slot got a new run
    results = [r.recorded for r in reply.results]
    assert [r.created for r in results] == [True, True, False, True, True]
    for i, minutes in enumerate((0, 1, 0, 2)):
        assert results[i].run.run_id == pending[T + timedelta(minutes=minutes)]
        assert results[i].run.state == pb.RUN_STATE_PENDING
        assert results[i].run.trigger == pb.TRIGGER_KIND_CATCHUP
    assert results[4].run.run_id not in pending.values()
    assert list(stub.ListPendingFires(api.ListPendingFiresRequest(), timeout=10).runs) == []
    for run_id in pending.values():
        events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run_id), timeout=10).events
        assert [e.kind for e in events] == ["missed", "recorded", "enqueued"]
        assert "was MISSED: pending:catchup" in events[1].detail
