"""The worker as a real process: it registers its job types before it is healthy,
runs claimed runs with their trace, finishes in-flight jobs that end within the grace
period when told to stop, and hands back the runs it holds for their fire time."""

from __future__ import annotations

import signal
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from tests.harness.cluster import Cluster
from tests.helpers import eventually, new_traceparent

pytestmark = pytest.mark.slow

#: The built-ins of the default queue, and the billing example's (installed by make
#: setup, found through its entry point in the group cronwave.jobs).
BUILTIN = ["billing.nightly", "cronwave.fail", "cronwave.noop", "cronwave.sleep"]


def test_job_types_are_registered_once_the_worker_is_healthy(cluster: Cluster) -> None:
    # The cluster waited for the worker's health: registration happened before it.
    job_types = cluster.store.ListJobTypes(store_pb.ListJobTypesRequest(), timeout=10).job_types
    by_name = {t.name: t for t in job_types}
    assert sorted(by_name) == BUILTIN
    assert all(t.queue == "default" for t in job_types)
    assert all(t.duration_limit.ToTimedelta().total_seconds() > 0 for t in job_types)
    assert all(t.heartbeat_timeout.ToTimedelta().total_seconds() > 0 for t in job_types)
    assert by_name["billing.nightly"].financial
    status = cluster.status()
    assert list(status.queues) == ["default"]
    assert sorted(status.job_types) == BUILTIN
    assert status.worker_id
    assert (status.runs_started, status.runs_finished, status.busy) == (0, 0, 0)


def test_run_spans_carry_the_dispatchers_trace_and_the_lateness(cluster: Cluster) -> None:
    schedule_id = cluster.schedule("cronwave.noop")
    fire_time = datetime.now(UTC)
    # A start carries the trace of the fire it stands for, as a planner's does
    fire_trace = new_traceparent()
    started = cluster.start(schedule_id, fire_time, traceparent=fire_trace)
    run = cluster.finished(started.run.run_id)
    assert run.trace_id == fire_trace.split("-")[1]

    def worker_spans() -> dict[str, dict[str, Any]]:
        spans = {
            s["name"]: s
            for s in cluster.spans("worker")
            if s["attributes"].get("cronwave.run_id") == run.run_id
        }
        wanted = ("worker.pickup", "worker.claim", "worker.execute", "worker.complete")
        assert all(name in spans for name in wanted), sorted(spans)
        return spans

    spans = eventually(worker_spans, timeout=20, what="worker spans exported")
    # One trace from the dispatcher through the queue into the worker
    assert {s["trace_id"] for s in spans.values()} == {run.trace_id}
    # each span names its hop and kind and carries the run's attributes
    pickup, execute = spans["worker.pickup"], spans["worker.execute"]
    assert (pickup["attributes"]["cronwave.hop"], pickup["attributes"]["cronwave.kind"]) == (
        "pickup",
        "queue",
    )
    assert (execute["attributes"]["cronwave.hop"], execute["attributes"]["cronwave.kind"]) == (
        "execute",
        "app",
    )
    assert spans["worker.complete"]["attributes"]["cronwave.hop"] == "complete"
    for span in spans.values():
        assert span["attributes"]["cronwave.schedule_id"] == schedule_id
        assert span["attributes"]["cronwave.fire_time"]
    # the pickup span covers the wait in the queue: it starts before it ends
    assert 0 <= pickup["end_ns"] - pickup["start_ns"] < 30e9
    # and the fire lateness is the body's start minus the nominal fire time
    lateness = execute["attributes"]["cronwave.lateness_ms"]
    assert 0 < lateness < 30_000
    # the dispatcher's enqueue span is the parent of the pickup
    dispatch = eventually(
        lambda: [
            s
            for s in cluster.spans("dispatcher")
            if s["name"] == "dispatch.enqueue"
            and s["attributes"].get("cronwave.run_id") == run.run_id
        ],
        timeout=20,
        what="dispatcher spans exported",
    )
    assert pickup["parent_span_id"] == dispatch[0]["span_id"]
    assert dispatch[0]["attributes"]["cronwave.kind"] == "queue"


def test_sigterm_lets_the_running_job_finish(cluster: Cluster) -> None:
    # Given a job that runs for a second
    schedule_id = cluster.schedule("cronwave.sleep", {"seconds": 1})
    run_id = cluster.start(schedule_id).run.run_id
    eventually(
        lambda: cluster.run(run_id).state == common_pb2.RUN_STATE_RUNNING,
        what="run RUNNING",
    )
    assert cluster.status().busy == 1
    # When the worker is asked to stop
    worker = cluster.suite.procs["worker"]
    cluster.suite.signal("worker", signal.SIGTERM)
    # Then it exits only after the job finished and was recorded
    assert worker.popen is not None
    assert worker.popen.wait(timeout=20) == 0
    run = cluster.run(run_id)
    assert run.state == common_pb2.RUN_STATE_SUCCEEDED
    assert run.result_json == '{"slept": 1}'


def test_sigterm_hands_back_a_run_held_for_its_fire_time(cluster: Cluster) -> None:
    # Given a run claimed ahead of its fire time, waiting among the worker's held runs
    schedule_id = cluster.schedule("cronwave.noop")
    fire_time = datetime.now(UTC) + timedelta(seconds=8)
    token = cluster.store.IssueFencingToken(
        store_pb.IssueFencingTokenRequest(fencing_scope="planner"), timeout=10
    ).fencing_token  # as leader-election does for the planner it grants the lease
    run_id = cluster.start(schedule_id, fire_time=fire_time, fencing_token=token).run.run_id
    cluster.events_through(run_id, "claimed")
    worker = cluster.suite.procs["worker"]
    assert worker.popen is not None
    # When the worker is asked to stop
    cluster.suite.signal("worker", signal.SIGTERM)
    # Then it exits 0 at once, the run is back in the store, due, with a message
    assert worker.popen.wait(timeout=20) == 0
    assert cluster.events(run_id)[-1] == "released"
    assert cluster.run(run_id).state == common_pb2.RUN_STATE_PENDING
    # and the next worker takes it from that message and runs it at its fire time
    cluster.suite.restart("worker")
    run = cluster.finished(run_id)
    assert run.state == common_pb2.RUN_STATE_SUCCEEDED
    events = cluster.events(run_id)
    assert events[events.index("released") + 1] == "claimed", events
    assert "requeued" not in events, events
