"""Clusters: the three processes a run needs from start to finish (workflow-store,
dispatcher and worker) as real processes on free loopback ports, Redis and a fresh
database; and the reliability tests' rigs of them (workers per pool, the drill job types
of ``tests.reliability.jobs``). Every process, job processes included, is recorded in a
``ProcessTable`` and none may outlive the fixture that started it."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dramatiq
import pytest
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import dispatcher_service_pb2 as dispatcher_pb
from cronwave_proto.v1 import dispatcher_service_pb2_grpc as dispatcher_grpc
from cronwave_proto.v1 import worker_service_pb2 as worker_pb
from cronwave_proto.v1 import worker_service_pb2_grpc as worker_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave_core.convert import dt_to_ts
from cronwave_core.queueing import make_broker
from cronwave_core.settings import RedisSettings
from cronwave_core.suite import Suite, SuiteConfig
from tests.harness.processes import ProcessTable, group_stopped, job_processes
from tests.harness.suites import TrackedSuite
from tests.harness.tls import hop_channel
from tests.helpers import (
    REPO,
    eventually,
    fresh,
    fresh_namespace,
    get_one,
    issue_tokens,
    only,
    stored_spans,
)

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
            hop_channel(suite, "workflow-store"),
            hop_channel(suite, "dispatcher"),
            hop_channel(suite, "worker"),
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
    happened, and fail if any (or any process they started) is left running."""
    table = ProcessTable("the cluster's processes")
    suite = TrackedSuite(
        SuiteConfig(
            data_dir=data_dir,
            database_url=database_url,
            redis_url=redis_url,
            ports={},
            env={"CRONWAVE_NAMESPACE": namespace, **(env or {})},
            grace=timedelta(seconds=3),
        ),
        table,
    )
    cluster: Cluster | None = None
    try:
        for name in services:
            suite.start_service(name)
        cluster = Cluster(suite)
        yield cluster
    finally:
        table.close([cluster.close if cluster is not None else lambda: None, suite.stop])


@pytest.fixture
def cluster(tmp_path: Path, database_url: str, redis_url: str, namespace: str) -> Iterator[Cluster]:
    """workflow-store, dispatcher and worker processes for one test."""
    with running_cluster(tmp_path / "cluster", database_url, redis_url, namespace) as running:
        yield running


@pytest.fixture(scope="module")
def shared_cluster(
    tmp_path_factory: pytest.TempPathFactory, module_database_url: str, redis_url: str
) -> Iterator[Cluster]:
    """The same processes, shared by a module's tests that fence with token 1 at most
    and change only what they made (their own schedules); stopped when it ends."""
    data_dir = tmp_path_factory.mktemp("cluster")
    namespace = fresh_namespace()
    with running_cluster(data_dir, module_database_url, redis_url, namespace) as running:
        yield running


# -- rigs ------------------------------------------------------------------------------


def rig_env(namespace: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))
    return {
        "CRONWAVE_NAMESPACE": namespace,
        "CRONWAVE_JOB_MODULES": "tests.reliability.jobs",
        "PYTHONPATH": pythonpath,
        "CRONWAVE_SWEEP_INTERVAL": "0.2",
        "CRONWAVE_SWEEP_PENDING_AFTER": "2",
        "CRONWAVE_JOB_KILL_GRACE": "0.5",
        **(extra or {}),
    }


class Rig(Cluster):
    """A cluster with workers per pool, and the steps the reliability tests repeat."""

    def __init__(self, suite: Suite, namespace: str) -> None:
        super().__init__(suite)
        self.namespace = namespace

    def run_events(self, run_id: str) -> list[common_pb2.RunEvent]:
        return list(
            self.store.ListRunEvents(
                store_pb.ListRunEventsRequest(run_id=run_id), timeout=10
            ).events
        )

    def dead_letters(self, include_replayed: bool = False) -> list[store_pb.DeadLetter]:
        return list(
            self.store.ListDeadLetters(
                store_pb.ListDeadLettersRequest(limit=500, include_replayed=include_replayed),
                timeout=10,
            ).dead_letters
        )

    def state(self, run_id: str) -> str:
        return common_pb2.RunState.Name(self.run(run_id).state).removeprefix("RUN_STATE_")

    def wait_state(self, run_id: str, state: str, timeout: float = 30) -> common_pb2.Run:
        def check() -> common_pb2.Run:
            run = self.run(run_id)
            now = common_pb2.RunState.Name(run.state).removeprefix("RUN_STATE_")
            assert now == state, f"run {run_id} is {now}, waiting for {state}"
            return run

        return eventually(check, timeout=timeout, what=f"run {run_id} {state}")

    def log(self, proc_name: str) -> str:
        return self.suite.procs[proc_name].log_path.read_text(errors="replace")

    def broker(self) -> Any:
        settings = RedisSettings.from_env(
            {"CRONWAVE_REDIS_URL": self.suite.redis_url, "CRONWAVE_NAMESPACE": self.namespace}
        )
        return make_broker(settings)

    def enqueue_raw(self, queue: str, actor_name: str, args: Any, kwargs: Any) -> None:
        """Put a message on ``queue`` through the broker, whatever it contains."""
        broker = self.broker()
        try:
            broker.enqueue(
                dramatiq.Message(
                    queue_name=queue,
                    actor_name=actor_name,
                    args=tuple(args),
                    kwargs=kwargs,
                    options={},
                )
            )
        finally:
            broker.close()

    def signal_group(self, proc_name: str, sig: int) -> None:
        """Signal a worker and its job processes (its process group), as a paused VM
        or container would pause them all."""
        os.killpg(self.suite.procs[proc_name].pid, sig)

    def group_stopped(self, proc_name: str) -> bool:
        """Whether every thread of a worker and of its job processes is stopped."""
        return group_stopped(self.suite.procs[proc_name].pid)


def new_suite(
    data_dir: Path,
    database_url: str,
    redis_url: str,
    namespace: str,
    pools: Mapping[str, int],
    table: ProcessTable,
    env: Mapping[str, str] | None = None,
) -> TrackedSuite:
    return TrackedSuite(
        SuiteConfig(
            data_dir=data_dir,
            database_url=database_url,
            redis_url=redis_url,
            ports={},
            env=rig_env(namespace, env),
            grace=timedelta(seconds=2),
            worker_pools=dict(pools),
        ),
        table,
    )


def stop_rig(suite: TrackedSuite) -> None:
    suite.resume_all()  # a group that was SIGSTOPped must be able to act on SIGTERM
    suite.stop()


MakeRig = Callable[..., Rig]


@pytest.fixture
def make_rig(
    tmp_path: Path, database_url: str, redis_url: str, namespace: str
) -> Iterator[MakeRig]:
    """``make_rig(pools={"default": 2}, env={...})``: start the processes; every one
    is stopped by pid at the end, and no process of theirs (a job process included)
    may outlive them."""
    table = ProcessTable("make_rig's processes")
    suites: list[TrackedSuite] = []
    rigs: list[Rig] = []

    def make(pools: Mapping[str, int] | None = None, env: Mapping[str, str] | None = None) -> Rig:
        suite = new_suite(
            tmp_path / f"rig{len(suites)}",
            database_url,
            redis_url,
            namespace,
            pools or {"default": 1},
            table,
            env,
        )
        suites.append(suite)
        suite.start_service("workflow-store")
        suite.start_service("dispatcher")
        suite.start_workers()
        rig = Rig(suite, namespace)
        rigs.append(rig)
        return rig

    yield make
    _close_rigs(table, rigs, suites, namespace)


def _close_rigs(
    table: ProcessTable, rigs: list[Rig], suites: list[TrackedSuite], namespace: str
) -> None:
    table.close(
        [
            *(rig.close for rig in rigs),
            *(lambda suite=suite: stop_rig(suite) for suite in suites),
            # and by namespace: no job process of the test's at all
            lambda: eventually(
                lambda: not job_processes(namespace),
                timeout=10,
                what="job processes gone with workers",
            ),
        ]
    )


@pytest.fixture(scope="module")
def shared_rig(
    tmp_path_factory: pytest.TempPathFactory, module_database_url: str, redis_url: str
) -> Iterator[MakeRig]:
    """``make_rig`` for a module whose tests each leave the rig as they found it (every
    run of theirs ended, its job processes back to what they were): the module's first
    call starts the rig, and every later call with the same settings gets it (of one
    pytest worker); stopped, and its job processes gone, when the module ends."""
    table = ProcessTable("shared_rig's processes")
    namespace = fresh_namespace()
    suites: list[TrackedSuite] = []
    rigs: dict[str, Rig] = {}  # the settings' repr -> the rig, at most one

    def make(pools: Mapping[str, int] | None = None, env: Mapping[str, str] | None = None) -> Rig:
        pools = dict(pools or {"default": 1})
        settings = repr((sorted(pools.items()), sorted((env or {}).items())))
        if not rigs:
            suite = new_suite(
                tmp_path_factory.mktemp("shared-rig"),
                module_database_url,
                redis_url,
                namespace,
                pools,
                table,
                env,
            )
            suites.append(suite)
            suite.start_service("workflow-store")
            suite.start_service("dispatcher")
            suite.start_workers()
            rigs[settings] = Rig(suite, namespace)
        if settings not in rigs:
            raise AssertionError(f"shared_rig already serves {next(iter(rigs))}")
        return rigs[settings]

    yield make
    _close_rigs(table, list(rigs.values()), suites, namespace)
