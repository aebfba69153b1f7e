"""The three processes a run needs from start to finish: workflow-store, dispatcher
and worker, as real processes on free loopback ports, Redis and a fresh database."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc

from cronwave.v1 import common_pb2
from cronwave.v1 import dispatcher_service_pb2 as dispatcher_pb
from cronwave.v1 import dispatcher_service_pb2_grpc as dispatcher_grpc
from cronwave.v1 import worker_service_pb2 as worker_pb
from cronwave.v1 import worker_service_pb2_grpc as worker_grpc
from cronwave.v1 import workflow_store_service_pb2 as store_pb
from cronwave.v1 import workflow_store_service_pb2_grpc as store_grpc
from cronwave_core.convert import dt_to_ts
from cronwave_core.suite import Suite, SuiteConfig
from tests.helpers import eventually, fresh, get_one, issue_tokens, only, stored_spans

# The planner scope's fencing tokens the store issues when no leader-election runs.
TOKENS_ISSUED = 10

TERMINAL = {
    common_pb2.RUN_STATE_SUCCEEDED,
    common_pb2.RUN_STATE_FAILED,
    common_pb2.RUN_STATE_TIMED_OUT,
    common_pb2.RUN_STATE_CANCELLED,
    common_pb2.RUN_STATE_DEAD_LETTERED,
}

SERVICES = ("workflow-store", "dispatcher", "worker")


class Cluster:
    """Clients for the running processes, and the steps tests repeat."""

    def __init__(self, suite: Suite) -> None:
        self.suite = suite
        self._channels = [
            grpc.insecure_channel(suite.store_addr),
            grpc.insecure_channel(suite.dispatcher_addr),
            grpc.insecure_channel(suite.address("worker")),
        ]
        self.store = store_grpc.WorkflowStoreServiceStub(self._channels[0])
        self.dispatcher = dispatcher_grpc.DispatcherServiceStub(self._channels[1])
        self.worker = worker_grpc.WorkerServiceStub(self._channels[2])
        if "leader-election" not in suite.procs:
            # The test plays leader-election: the store issues the tokens it fences with.
            issue_tokens(self.store, TOKENS_ISSUED)

    def close(self) -> None:
        for channel in self._channels:
            channel.close()

    def schedule(self, job_type: str = "cronwave.noop", payload: Any = None) -> str:
        schedule_id = fresh("sched")
        self.store.CreateSchedule(
            store_pb.CreateScheduleRequest(
                schedule=common_pb2.Schedule(
                    schedule_id=schedule_id,
                    spec=common_pb2.ScheduleSpec(cron=["0 2 * * *"], time_zone="UTC"),
                    job_type=job_type,
                    payload_json=json.dumps(payload or {}),
                )
            ),
            timeout=10,
        )
        return schedule_id

    def start(
        self,
        schedule_id: str,
        fire_time: datetime | None = None,
        fencing_token: int = 1,
        **fields: Any,
    ) -> dispatcher_pb.StartRunResponse:
        """One start, as a batch of one; a refusal is raised as its RpcError."""
        reply = self.dispatcher.StartRuns(
            dispatcher_pb.StartRunsRequest(
                starts=[
                    dispatcher_pb.StartRunRequest(
                        schedule_id=schedule_id,
                        fire_time=dt_to_ts(fire_time or datetime.now(UTC)),
                        fencing_token=fencing_token,
                        **fields,
                    )
                ]
            ),
            timeout=10,
        )
        started: dispatcher_pb.StartRunResponse = only(reply.results, "started")
        return started

    def run(self, run_id: str) -> common_pb2.Run:
        run: common_pb2.Run = get_one(self.store, run_id, timeout=10)
        return run

    def finished(self, run_id: str, timeout: float = 30) -> common_pb2.Run:
        def done() -> common_pb2.Run:
            run = self.run(run_id)
            assert run.state in TERMINAL, common_pb2.RunState.Name(run.state)
            return run

        return eventually(done, timeout=timeout, what=f"run {run_id} finished")

    def events(self, run_id: str) -> list[str]:
        response = self.store.ListRunEvents(
            store_pb.ListRunEventsRequest(run_id=run_id), timeout=10
        )
        return [e.kind for e in response.events]

    def events_through(self, run_id: str, kind: str) -> list[str]:
        """The run's history once it contains ``kind``."""

        def check() -> list[str]:
            events = self.events(run_id)
            assert kind in events, f"history so far: {events}"
            return events

        return eventually(check, what=f"event {kind} of run {run_id}")

    def status(self) -> worker_pb.GetWorkerStatusResponse:
        return self.worker.GetWorkerStatus(worker_pb.GetWorkerStatusRequest(), timeout=10)

    def spans(self, service: str) -> list[dict[str, Any]]:
        return stored_spans(self.suite.config.data_dir / "spans", f"{service}-*.jsonl")


@contextmanager
def running_cluster(
    data_dir: Path,
    database_url: str,
    redis_url: str,
    namespace: str,
    env: dict[str, str] | None = None,
    services: Iterable[str] = SERVICES,
) -> Iterator[Cluster]:
    """Start the processes; stop every one of them by pid afterwards, whatever
    happened, and fail if any is left running."""
    suite = Suite(
        SuiteConfig(
            data_dir=data_dir,
            database_url=database_url,
            redis_url=redis_url,
            ports={},
            env={"CRONWAVE_NAMESPACE": namespace, **(env or {})},
            grace=timedelta(seconds=3),
        )
    )
    cluster: Cluster | None = None
    try:
        for name in services:
            suite.start_service(name)
        cluster = Cluster(suite)
        yield cluster
    finally:
        if cluster is not None:
            cluster.close()
        suite.stop()
    leftovers = suite.pids()
    assert not leftovers, f"processes left running: {leftovers}"
