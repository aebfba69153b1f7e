"""Redis (persistence off) killed under steady load and restarted empty: the runs whose
messages went down with it run again at once, exactly once each, and no later slot is
recorded MISSED for overlapping a run that was merely lost in the queue."""

from __future__ import annotations

import math
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
import redis
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import worker_service_pb2 as worker_pb
from cronwave_proto.v1 import worker_service_pb2_grpc as worker_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave_bench.audit import audit
from cronwave_bench.failover import NOOP
from cronwave_bench.faults import OwnRedis
from cronwave_core.convert import ts_to_dt
from cronwave_core.domain.calendar import fire_times
from cronwave_core.domain.spec import Spec
from cronwave_core.suite import Suite
from tests.harness.suites import SuiteFactory
from tests.harness.tls import hop_channel
from tests.helpers import eventually

pytestmark = pytest.mark.slow

SCHEDULES = 30
PERIOD = timedelta(seconds=1)
#: How long Redis stays down: the fault's length, by design.
OUTAGE = 1.0
#: The kill comes this long before a slot is acted on (half a period ahead: the
#: dispatch lead), so that slot's run is recorded while Redis is down.
BEFORE_ACT = 0.05
#: Slots audited after the restart. The sweeper alone would re-send the lost runs only
#: after its 30-second bound, and every one of these slots would be skipped meanwhile.
AFTER = timedelta(seconds=8)
_TERMINAL = {
    common_pb2.RUN_STATE_SUCCEEDED,
    common_pb2.RUN_STATE_FAILED,
    common_pb2.RUN_STATE_TIMED_OUT,
    common_pb2.RUN_STATE_MISSED,
    common_pb2.RUN_STATE_CANCELLED,
    common_pb2.RUN_STATE_DEAD_LETTERED,
}


@pytest.fixture
def redis_url(own_redis: OwnRedis) -> str:
    """Every service of the suite on the Redis this test kills: queue, caches, leases."""
    return own_redis.url


def _spec() -> common_pb2.ScheduleSpec:
    spec = common_pb2.ScheduleSpec()
    spec.intervals.add().every.FromTimedelta(PERIOD)
    return spec


def _create_schedules(store: store_grpc.WorkflowStoreServiceStub) -> dict[str, datetime]:
    """``SCHEDULES`` schedules of the noop job every ``PERIOD``, overlap ``skip``; each
    id with the instant it took effect."""
    eventually(
        lambda: any(
            j.name == NOOP
            for j in store.ListJobTypes(store_pb.ListJobTypesRequest(), timeout=5).job_types
        ),
        timeout=30,
        what=f"job type {NOOP} registered by the worker",
    )
    created: dict[str, datetime] = {}
    for i in range(SCHEDULES):
        schedule = common_pb2.Schedule(
            schedule_id=f"redisloss-{i}-{uuid.uuid4().hex[:8]}",
            spec=_spec(),
            policy=common_pb2.SchedulePolicy(overlap=common_pb2.OVERLAP_POLICY_SKIP),
            job_type=NOOP,
        )
        reply = store.CreateSchedule(store_pb.CreateScheduleRequest(schedule=schedule), timeout=5)
        created[reply.schedule.schedule_id] = ts_to_dt(reply.schedule.updated_at)
    return created


def _runs(store: store_grpc.WorkflowStoreServiceStub, ids: list[str]) -> list[common_pb2.Run]:
    reply = store.ListRuns(store_pb.ListRunsRequest(schedule_ids=ids, limit=100_000), timeout=10)
    return list(reply.runs)


def _planner_log(suite: Suite) -> list[str]:
    return suite.procs["cron-planner"].log_path.read_text(errors="replace").splitlines()


def _loss_decisions(suite: Suite, most: int = 40) -> list[str]:
    """The planner's lines on runs it did not take for lost in the queue
    (``cron_planner.loss_waits``), for a failure's message."""
    return [line for line in _planner_log(suite) if "not lost in the queue" in line][:most]


def _planner_lines(suite: Suite, schedule_id: str, most: int = 40) -> list[str]:
    """The planner's warnings and errors on ``schedule_id`` and its terms, for a
    failure's message."""
    lines = _planner_log(suite)
    wanted = [line for line in lines if schedule_id in line or "term of token" in line]
    return [line for line in wanted if '"level": "INFO"' not in line or "term" in line][-most:]


def _slots(since: datetime, through: datetime) -> list[datetime]:
    out: list[datetime] = []
    for at in fire_times(Spec.from_proto(_spec()), since):
        if at > through:
            return out
        out.append(at)
    return out


#: A key the test writes before the kill: gone after the restart when Redis came back empty.
SENTINEL = "cronwave-test:held-before-the-kill"


def _kill_before_an_act(own_redis: OwnRedis) -> datetime:
    """kill -9 Redis ``BEFORE_ACT`` before the next instant a slot is acted on (half a
    period before its fire time); the instant of the kill."""
    half = PERIOD.total_seconds() / 2
    now = time.time()
    act = math.floor(now) + half
    while act - BEFORE_ACT <= now + 0.1:
        act += PERIOD.total_seconds()
    time.sleep(act - BEFORE_ACT - now)  # the fault's place in the period, by design
    killed_at = datetime.now(UTC)
    own_redis.kill()
    return killed_at


def test_an_empty_redis_restart_skips_no_slot_for_a_run_lost_in_the_queue(
    make_suite: SuiteFactory, own_redis: OwnRedis
) -> None:
    # Given a suite whose every service uses a Redis of the test's own, under a steady
    # load of 1-second noop schedules that skip a slot while a run is in flight
    suite = make_suite()
    channel = hop_channel(suite, "workflow-store")
    store = store_grpc.WorkflowStoreServiceStub(channel)
    created = _create_schedules(store)
    ids = list(created)

    def two_succeeded_each() -> bool:
        newest = max(created.values())
        done = Counter(
            r.schedule_id
            for r in _runs(store, ids)
            if r.state == common_pb2.RUN_STATE_SUCCEEDED and ts_to_dt(r.fire_time) > newest
        )
        return all(done[sid] >= 2 for sid in ids)

    eventually(two_succeeded_each, timeout=30, interval=0.2, what="two runs of each succeeded")

    # When Redis is killed (kill -9) and, a second later, restarted empty on its port
    client = redis.Redis.from_url(own_redis.url)
    client.set(SENTINEL, "held before the kill")
    client.close()
    killed_at = _kill_before_an_act(own_redis)
    time.sleep(OUTAGE)  # the outage's length, by design
    own_redis.start()
    restarted_at = datetime.now(UTC)
    # Every key it held is gone (the services write new ones at once, so a key of
    # theirs would prove nothing: the test's own is checked)
    client = redis.Redis.from_url(own_redis.url)
    assert client.get(SENTINEL) is None
    client.close()

    # Then firing goes on: every schedule's slots through the window are handled
    through = restarted_at + AFTER

    def handled_past() -> bool:
        past = {r.schedule_id for r in _runs(store, ids) if ts_to_dt(r.fire_time) > through}
        return past == set(ids)

    eventually(handled_past, timeout=60, interval=0.2, what="slots past the window handled")
    suite.stop_proc(suite.procs["cron-planner"])

    def all_ended() -> list[common_pb2.Run]:
        runs = _runs(store, ids)
        waiting = [r.run_id for r in runs if r.state not in _TERMINAL]
        assert not waiting, f"{len(waiting)} runs not ended yet"
        return runs

    runs = eventually(all_ended, timeout=60, interval=0.2, what="every run ended")
    worker = worker_grpc.WorkerServiceStub(hop_channel(suite, suite.procs["worker"].address))
    executions = worker.GetWorkerStatus(worker_pb.GetWorkerStatusRequest(), timeout=5).runs_started
    channel.close()

    # And each (schedule, slot) has exactly one run or a MISSED record, and no job body
    # ran twice
    for sid, since in created.items():
        own = [r for r in runs if r.schedule_id == sid]
        slots = _slots(since, through)
        result = audit(own, slots)
        recorded = {ts_to_dt(r.fire_time) for r in own}
        unrecorded = [f"{at:%H:%M:%S.%f}" for at in slots if at not in recorded]
        assert (result.missed, result.duplicate_runs, result.executed_twice) == (0, 0, 0), (
            sid,
            f"created {since:%H:%M:%S.%f}, killed {killed_at:%H:%M:%S.%f}, "
            f"restarted {restarted_at:%H:%M:%S.%f}",
            unrecorded,
            _planner_lines(suite, sid),
        )
    started = [r for r in runs if r.state != common_pb2.RUN_STATE_MISSED]
    assert executions == len(started)

    # And the runs recorded around the outage (their messages lost, or never sent)
    # each ran, once, and succeeded
    lost = [r for r in started if killed_at - PERIOD <= ts_to_dt(r.created_at) <= restarted_at]
    assert lost and all(r.state == common_pb2.RUN_STATE_SUCCEEDED for r in lost)
    assert all(r.attempt == 1 for r in lost)

    # And no slot after the restart was skipped for a run lost in the queue: the run
    # before each slot skipped for overlap (if any was) had been recorded after the
    # restart, its message in the queue as it is now -- really in flight
    after = [r for r in runs if restarted_at < ts_to_dt(r.fire_time) <= through]
    missed_after = Counter(r.error for r in after if r.state == common_pb2.RUN_STATE_MISSED)
    for_lost = []
    for skip in (r for r in after if r.error == "overlap_skip"):
        before = [
            r
            for r in started
            if r.schedule_id == skip.schedule_id
            and ts_to_dt(r.fire_time) < ts_to_dt(skip.fire_time)
        ]
        previous = max(before, key=lambda r: ts_to_dt(r.fire_time))
        if ts_to_dt(previous.created_at) <= restarted_at:
            for_lost.append(f"{skip.schedule_id}@{ts_to_dt(skip.fire_time):%H:%M:%S}")
    first_ok: dict[str, common_pb2.Run] = {}
    for r in sorted(after, key=lambda r: ts_to_dt(r.fire_time)):
        if r.state == common_pb2.RUN_STATE_SUCCEEDED:
            first_ok.setdefault(r.schedule_id, r)
    firsts = first_ok.values()
    resumed = max((ts_to_dt(r.fire_time) for r in firsts), default=through) - restarted_at
    lateness = max(
        ((ts_to_dt(r.started_at) - ts_to_dt(r.fire_time)).total_seconds() for r in firsts),
        default=0.0,
    )
    lost_done = max(ts_to_dt(r.finished_at) for r in lost) - restarted_at
    print(
        f"\nredis restart: {len(lost)} runs around the outage all ended "
        f"{lost_done.total_seconds():.3f}s after it; the first slot after it succeeded on "
        f"{len(first_ok)} of {len(ids)} schedules by +{resumed.total_seconds():.3f}s (fire "
        f"time; started at most {lateness:.3f}s late); MISSED after it: {dict(missed_after)}, "
        f"{len(for_lost)} of them for a run lost in the queue"
    )
    assert not for_lost, (for_lost, _loss_decisions(suite))
    assert set(first_ok) == set(ids)
