"""The dispatcher against real store, worker and Redis processes: a start becomes one
recorded, queued, executed run; a repeated start changes nothing; the store's refusals
reach the caller unchanged."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
import redis
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import dispatcher_service_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from cronwave_bench.faults import TcpProxy
from cronwave_core.convert import dt_to_ts, ts_to_dt
from tests.harness.cluster import Cluster, running_cluster
from tests.helpers import eventually, record_one

pytestmark = pytest.mark.slow


def in_order(events: list[str], *kinds: str) -> bool:
    positions = [events.index(kind) for kind in kinds]
    return positions == sorted(positions)


def test_start_run_reaches_succeeded_with_its_history(cluster: Cluster) -> None:
    # Given a schedule of the no-op job
    schedule_id = cluster.schedule("cronwave.noop")
    fire_time = datetime(2024, 6, 1, 2, 0, 0, 250, tzinfo=UTC)
    # When its run is started
    started = cluster.start(schedule_id, fire_time)
    # Then the run is new, recorded for that fire time, and queued
    assert started.created
    assert started.run.schedule_id == schedule_id
    assert ts_to_dt(started.run.fire_time) == fire_time
    assert started.run.trace_id  # the dispatcher's trace, recorded with the run
    # and it reaches SUCCEEDED with its history recorded
    run = cluster.finished(started.run.run_id)
    assert run.state == common_pb2.RUN_STATE_SUCCEEDED
    assert run.result_json == "{}"
    events = cluster.events_through(run.run_id, "succeeded")
    # "started" marks the first statement of the job body (the lateness figure)
    assert sorted(events) == sorted(["recorded", "enqueued", "claimed", "started", "succeeded"])
    assert events[0] == "recorded" and events[-1] == "succeeded"
    assert in_order(events, "recorded", "enqueued")
    assert in_order(events, "recorded", "claimed", "succeeded")


@pytest.mark.both_backends  # a guarantee: exactly once, fencing
def test_duplicate_start_returns_the_run_and_runs_the_job_once(
    cluster: Cluster, redis_url: str, namespace: str
) -> None:
    # Given a run that was started and has finished
    schedule_id = cluster.schedule("cronwave.noop")
    fire_time = datetime(2024, 6, 1, 2, 0, tzinfo=UTC)
    first = cluster.start(schedule_id, fire_time)
    cluster.finished(first.run.run_id)
    # When the same fire is started again (a planner retrying, or two planners)
    again = cluster.start(schedule_id, fire_time)
    # Then the existing run comes back, not created
    assert not again.created
    assert again.run.run_id == first.run.run_id
    assert again.run.state == common_pb2.RUN_STATE_SUCCEEDED
    # and nothing was queued for it: the queue is empty and the job ran once
    client = redis.Redis.from_url(redis_url)
    try:
        # the worker acks just after the run is completed
        eventually(
            lambda: client.hlen(f"{namespace}:default.msgs") == 0,
            timeout=10,
            what="the message acked",
        )
        assert client.llen(f"{namespace}:default") == 0
    finally:
        client.close()
    events = cluster.events(first.run.run_id)
    assert events.count("enqueued") == 1
    assert events.count("claimed") == 1
    assert cluster.status().runs_started == 1


def test_failing_job_ends_failed_with_its_error(shared_cluster: Cluster) -> None:
    schedule_id = shared_cluster.schedule("cronwave.fail", {"message": "card declined"})
    started = shared_cluster.start(schedule_id)
    run = shared_cluster.finished(started.run.run_id)
    assert run.state == common_pb2.RUN_STATE_FAILED
    assert run.error == "RequestedFailure: card declined"
    events = shared_cluster.events_through(run.run_id, "failed")
    assert events[-1] == "failed"


def test_two_quick_triggers_are_two_runs(shared_cluster: Cluster) -> None:
    # Given a schedule
    schedule_id = shared_cluster.schedule("cronwave.noop")
    # When it is triggered twice in a row
    first = shared_cluster.dispatcher.TriggerRun(
        pb.TriggerRunRequest(schedule_id=schedule_id), timeout=10
    )
    second = shared_cluster.dispatcher.TriggerRun(
        pb.TriggerRunRequest(schedule_id=schedule_id), timeout=10
    )
    # Then there are two manual runs, at distinct fire times, and both run
    assert first.created and second.created
    assert first.run.run_id != second.run.run_id
    assert ts_to_dt(first.run.fire_time) < ts_to_dt(second.run.fire_time)
    assert first.run.trigger == second.run.trigger == common_pb2.TRIGGER_KIND_MANUAL
    now = datetime.now(UTC)
    assert now - timedelta(seconds=30) < ts_to_dt(first.run.fire_time) <= now
    for started in (first, second):
        assert shared_cluster.finished(started.run.run_id).state == common_pb2.RUN_STATE_SUCCEEDED


def test_a_trigger_answers_with_its_run_whole(shared_cluster: Cluster) -> None:
    # Given a schedule with a payload
    schedule_id = shared_cluster.schedule("cronwave.noop", {"customer": "c-1"})
    # When it is triggered
    reply = shared_cluster.dispatcher.TriggerRun(
        pb.TriggerRunRequest(schedule_id=schedule_id), timeout=10
    )
    # Then the answer is the new run with its payload, and the run runs
    assert reply.created
    assert json.loads(reply.run.payload_json) == {"customer": "c-1"}
    assert shared_cluster.finished(reply.run.run_id).state == common_pb2.RUN_STATE_SUCCEEDED


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        ({"fire_time": dt_to_ts(datetime(2024, 1, 1, tzinfo=UTC))}, "schedule_id"),
        ({"schedule_id": "nightly"}, "fire_time"),
    ],
)
def test_missing_fields_are_refused_by_name(
    shared_cluster: Cluster, request_fields: dict[str, object], field: str
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        shared_cluster.dispatcher.StartRuns(
            pb.StartRunsRequest(starts=[pb.StartRunRequest(**request_fields)]),  # type: ignore[arg-type]
            timeout=10,
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (caught.value.details() or "").startswith(f"starts[0].{field}:")


def test_unknown_schedule_is_not_found_as_the_store_said(shared_cluster: Cluster) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        shared_cluster.start("no-such-schedule")
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert "no-such-schedule" in (caught.value.details() or "")


@pytest.mark.both_backends  # a guarantee: exactly once, fencing
def test_stale_fencing_token_stays_failed_precondition(
    cluster: Cluster, redis_url: str, namespace: str
) -> None:
    # Given a schedule fired by the leader holding token 5
    schedule_id = cluster.schedule("cronwave.noop")
    leader = cluster.start(schedule_id, datetime(2024, 6, 1, 2, tzinfo=UTC), fencing_token=5)
    cluster.finished(leader.run.run_id)
    # When a deposed planner with token 3 fires the next slot
    with pytest.raises(grpc.RpcError) as caught:
        cluster.start(schedule_id, datetime(2024, 6, 2, 2, tzinfo=UTC), fencing_token=3)
    # Then it is refused with the store's code and message, and nothing is queued
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert (caught.value.details() or "").startswith("fencing_token: 3 is older than 5")
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.llen(f"{namespace}:default") == 0
    finally:
        client.close()


def _start_item(schedule_id: str, fire_time: datetime, token: int = 0) -> pb.StartRunRequest:
    return pb.StartRunRequest(
        schedule_id=schedule_id, fire_time=dt_to_ts(fire_time), fencing_token=token
    )


def test_start_runs_answers_each_start_on_its_own(cluster: Cluster) -> None:
    # Given a schedule whose 02:00 run was started by the leader holding token 5
    schedule_id = cluster.schedule("cronwave.noop")
    day = datetime(2024, 6, 1, 2, tzinfo=UTC)
    first = cluster.start(schedule_id, day, fencing_token=5)

    # When one batch holds new starts, the same start again, an unknown schedule and a
    # start from a deposed planner (token 3)
    answer = cluster.dispatcher.StartRuns(
        pb.StartRunsRequest(
            starts=[
                _start_item(schedule_id, day + timedelta(hours=1), 5),
                _start_item(schedule_id, day, 5),
                _start_item("no-such-schedule", day, 5),
                _start_item(schedule_id, day + timedelta(hours=2), 3),
                _start_item(schedule_id, day + timedelta(hours=3), 5),
            ]
        ),
        timeout=20,
    )

    # Then each start gets its own answer, in order
    new, again, unknown, stale, other = answer.results
    assert new.started.created and other.started.created
    assert not again.started.created and again.started.run.run_id == first.run.run_id
    assert unknown.error.code == grpc.StatusCode.NOT_FOUND.value[0]
    assert "no-such-schedule" in unknown.error.message
    assert stale.error.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert stale.error.message.startswith("fencing_token: 3 is older than 5")
    # and the new runs are queued and run, with the history a single start writes
    for result in (new, other):
        run = cluster.finished(result.started.run.run_id)
        assert run.state == common_pb2.RUN_STATE_SUCCEEDED
        events = cluster.events_through(run.run_id, "succeeded")
        assert in_order(events, "recorded", "enqueued", "claimed", "started", "succeeded")
    # and the deposed planner's slot has no run
    runs = cluster.store.ListRuns(store_pb.ListRunsRequest(schedule_id=schedule_id), timeout=10)
    fire_times = {ts_to_dt(r.fire_time) for r in runs.runs}
    assert fire_times == {day, day + timedelta(hours=1), day + timedelta(hours=3)}


def test_a_malformed_start_refuses_the_whole_batch_by_name(shared_cluster: Cluster) -> None:
    schedule_id = shared_cluster.schedule("cronwave.noop")
    day = datetime(2024, 6, 1, 2, tzinfo=UTC)
    with pytest.raises(grpc.RpcError) as caught:
        shared_cluster.dispatcher.StartRuns(
            pb.StartRunsRequest(
                starts=[_start_item(schedule_id, day), pb.StartRunRequest(schedule_id="x")]
            ),
            timeout=10,
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == "starts[1].fire_time: required"
    # nothing was written: not even the well-formed start
    runs = shared_cluster.store.ListRuns(
        store_pb.ListRunsRequest(schedule_id=schedule_id), timeout=10
    )
    assert list(runs.runs) == []


def test_a_batch_whose_broker_is_away_is_recorded_and_answered_unavailable(
    tmp_path: Path, database_url: str, redis_url: str, namespace: str
) -> None:
    # Given a cluster that reaches Redis through a proxy
    target = redis_url.removeprefix("redis://").split("/", 1)[0]
    proxy = TcpProxy(target)
    try:
        proxied = f"redis://{proxy.address}/{redis_url.rsplit('/', 1)[-1]}"
        with running_cluster(tmp_path / "cluster", database_url, proxied, namespace) as cluster:
            schedule_id = cluster.schedule("cronwave.noop")
            day = datetime(2024, 6, 1, 2, tzinfo=UTC)
            # When Redis is cut off and a batch of two starts comes in
            proxy.close()
            answer = cluster.dispatcher.StartRuns(
                pb.StartRunsRequest(
                    starts=[
                        _start_item(schedule_id, day, 1),
                        _start_item(schedule_id, day + timedelta(hours=1), 1),
                    ]
                ),
                timeout=30,
            )
            # Then each start is answered UNAVAILABLE, naming its run and the broker
            for result in answer.results:
                assert result.error.code == grpc.StatusCode.UNAVAILABLE.value[0]
                assert "could not be queued" in result.error.message
                assert "CRONWAVE_REDIS_URL" in result.error.message
            # and each run is recorded, with the failed enqueue in its history, for the
            # sweeper to send once it is overdue
            runs = cluster.store.ListRuns(
                store_pb.ListRunsRequest(schedule_id=schedule_id), timeout=10
            ).runs
            assert {ts_to_dt(r.fire_time) for r in runs} == {day, day + timedelta(hours=1)}
            for run in runs:
                assert run.state == common_pb2.RUN_STATE_PENDING
                events = cluster.events(run.run_id)
                assert in_order(events, "recorded", "enqueued", "enqueue_failed"), events
    finally:
        proxy.close()


@pytest.mark.both_backends  # a guarantee: no run lost with a dispatcher that died
def test_a_start_recorded_but_never_queued_is_queued_when_it_comes_again(
    tmp_path, database_url: str, redis_url: str, namespace: str
) -> None:
    # Given a run the store recorded for a start whose dispatcher died before sending
    # its message (the sweeper would only re-send it after ten minutes here)
    env = {"CRONWAVE_SWEEP_PENDING_AFTER": "600"}
    with running_cluster(tmp_path / "c", database_url, redis_url, namespace, env) as cluster:
        schedule_id = cluster.schedule("cronwave.noop")
        day = datetime(2024, 6, 1, 2, tzinfo=UTC)
        recorded = record_one(
            cluster.store,
            store_pb.RecordRunRequest(
                schedule_id=schedule_id,
                fire_time=dt_to_ts(day),
                trigger=common_pb2.TRIGGER_KIND_SCHEDULED,
                fencing_token=5,
                enqueue=True,
            ),
            timeout=10,
        ).run

        # When the planner, which never got an answer, starts the slot again
        again = cluster.dispatcher.StartRuns(
            pb.StartRunsRequest(starts=[_start_item(schedule_id, day, 5)]), timeout=20
        ).results[0]

        # Then it is the same run, and this time its message is sent: it runs, once
        assert not again.started.created and again.started.run.run_id == recorded.run_id
        run = cluster.finished(recorded.run_id)
        assert run.state == common_pb2.RUN_STATE_SUCCEEDED and run.attempt == 1
        # And a start of it once more, answered from the cache, changes nothing
        third = cluster.dispatcher.StartRuns(
            pb.StartRunsRequest(starts=[_start_item(schedule_id, day, 5)]), timeout=20
        ).results[0]
        assert third.started.run.run_id == recorded.run_id
        assert cluster.run(recorded.run_id).attempt == 1
