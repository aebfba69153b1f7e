"""The caches on a run's path answer where their spans say they did, and never decide
what the store decides: a duplicate start is answered without the store, a new one
always goes to it."""

from __future__ import annotations

import signal
from datetime import UTC, datetime, timedelta

import pytest
import redis
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import dispatcher_service_pb2 as dispatcher_pb
from cronwave_proto.v1 import dispatcher_service_pb2_grpc as dispatcher_grpc

from cronwave_core.caching import METADATA_KEY, RUN_STATUS_TTL, RunStatusCache
from cronwave_core.convert import dt_to_ts
from cronwave_core.suite import Suite
from cronwave_core.telemetry.vocabulary import ATTR_CACHE_HIT, ATTR_CACHE_NAME, ATTR_SCHEDULE_ID
from cronwave_waterfall import build_runs, compare_scenarios
from tests.harness.clients import client_for
from tests.harness.leases import leading_token
from tests.harness.tls import hop_channel
from tests.helpers import eventually, fresh, new_traceparent, only
from tests.tracing.support import spans_of, traced_suite

pytestmark = pytest.mark.slow

FIRE = datetime(2024, 6, 1, 2, 0, tzinfo=UTC)


def _start(suite: Suite, schedule_id: str, timeout: float = 10) -> dispatcher_pb.StartRunResponse:
    # the token a start on the leader's behalf carries (the store accepts only tokens
    # it issued)
    token = leading_token(suite)
    with hop_channel(suite, "dispatcher") as channel:
        reply = dispatcher_grpc.DispatcherServiceStub(channel).StartRuns(
            dispatcher_pb.StartRunsRequest(
                starts=[
                    dispatcher_pb.StartRunRequest(
                        schedule_id=schedule_id,
                        fire_time=dt_to_ts(FIRE),
                        fencing_token=token,
                        trigger=common_pb2.TRIGGER_KIND_SCHEDULED,
                        # as a planner's fire: the run's own trace, the batch's copied in
                        traceparent=new_traceparent(),
                    )
                ]
            ),
            timeout=timeout,
        )
    started: dispatcher_pb.StartRunResponse = only(reply.results, "started")
    return started


def _with_store_frozen(suite: Suite, schedule_id: str) -> dispatcher_pb.StartRunResponse:
    suite.signal("workflow-store", signal.SIGSTOP)
    try:
        return _start(suite, schedule_id, timeout=5)
    finally:
        suite.signal("workflow-store", signal.SIGCONT)


def _hits(spans: list, cache: str, schedule_id: str) -> list[str]:
    found = [
        s
        for s in spans
        if s.attributes.get(ATTR_CACHE_NAME) == cache
        and s.attributes.get(ATTR_SCHEDULE_ID) == schedule_id
        and ATTR_CACHE_HIT in s.attributes
    ]
    return [str(s.attributes[ATTR_CACHE_HIT]) for s in sorted(found, key=lambda s: s.start_ns)]


def test_a_duplicate_start_is_answered_from_the_cache_without_the_store(
    make_suite, namespace
) -> None:
    # Given a scheduled fire that was started and has succeeded
    suite = traced_suite(make_suite)
    sid = fresh("dedup")
    with client_for(suite) as client:
        client.create_schedule(sid, cron="0 2 * * *", job_type="cronwave.noop")
        first = _start(suite, sid)
        assert first.created
        assert client.wait_run(first.run.run_id, timeout=timedelta(seconds=60)).state == "SUCCEEDED"
    cache = redis.Redis.from_url(suite.redis_url)
    status = RunStatusCache(cache, namespace)
    eventually(lambda: status.get_many([first.run.run_id]), what="the run's end in the cache")
    # (kept as long as the start in the dedup cache, the one reader, not a day)
    ttl_ms = cache.pttl(f"{namespace}:cache:run-status:{first.run.run_id}")
    assert 0 < ttl_ms <= RUN_STATUS_TTL.total_seconds() * 1000

    # When the same fire is started again while the store cannot answer at all
    again = _with_store_frozen(suite, sid)
    # Then the dispatcher answered from its process: the same run, as it ended
    assert not again.created
    assert again.run.run_id == first.run.run_id
    assert again.run.state == common_pb2.RUN_STATE_SUCCEEDED

    # And after the dispatcher restarts (its process cache is gone), Redis answers
    suite.restart("dispatcher")
    third = _with_store_frozen(suite, sid)
    assert (third.created, third.run.run_id) == (False, first.run.run_id)

    # The spans say where each look-up was answered
    spans = spans_of(suite)
    assert _hits(spans, "dedup", sid) == ["miss", "local", "redis"]
    # and only the first start reached the store
    recorded = [
        s
        for s in spans
        if s.name == "workflow-store RecordRuns" and s.attributes.get(ATTR_SCHEDULE_ID) == sid
    ]
    assert len(recorded) == 1


def test_route_look_ups_take_the_path_the_caller_asks_for(make_suite) -> None:
    # Given a schedule whose route no cache holds yet
    suite = traced_suite(make_suite)
    sid = fresh("route")
    controls = ["", "", "no-local", "no-cache", ""]
    with client_for(suite) as client:
        client.create_schedule(sid, cron="0 2 * * *", job_type="cronwave.noop")
        # When it is triggered five times, steering the route look-up of some
        with hop_channel(suite, "dispatcher") as channel:
            stub = dispatcher_grpc.DispatcherServiceStub(channel)
            run_ids = []
            for control in controls:
                reply = stub.TriggerRun(
                    dispatcher_pb.TriggerRunRequest(schedule_id=sid),
                    metadata=((METADATA_KEY, control),) if control else None,
                    timeout=10,
                )
                run_ids.append(reply.run.run_id)
                client.wait_run(reply.run.run_id, timeout=timedelta(seconds=60))
    spans = spans_of(suite)
    # Then the first look-up went to the store, the next was answered in the process,
    # "no-local" by Redis, "no-cache" by the store again (which refilled the process)
    assert _hits(spans, "route", sid) == ["miss", "local", "redis", "miss", "local"]
    # and each run's scenario is the path its look-up took
    runs = {r.run_id: r for r in build_runs(spans)}
    assert [runs[r].scenario for r in run_ids] == ["miss", "local", "redis", "miss", "local"]
    side_by_side = compare_scenarios([runs[r] for r in run_ids])
    assert [(w.scenario, w.runs) for w in side_by_side] == [("local", 2), ("redis", 1), ("miss", 2)]

    # and no run paid a read of its own for the route: a start that missed went to
    # the store's RecordRuns unrouted, the store routed it, and its answer refilled
    # the caches (which is why the look-up after each miss is answered locally)
    def asked_store(run_id: str) -> bool:
        names = {s.name for s in runs[run_id].spans}
        return "/cronwave.v1.WorkflowStoreService/GetSchedule" in names

    assert [asked_store(r) for r in run_ids] == [False] * len(run_ids)
