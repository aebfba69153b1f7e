"""A rig of real processes for the reliability tests: workflow-store, dispatcher (with
its sweeper) and worker processes per pool, on a fresh database and Redis namespace,
with the drill job types of ``tests.reliability.jobs`` loaded by every worker."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dramatiq

from cronwave.v1 import common_pb2
from cronwave.v1 import workflow_store_service_pb2 as store_pb
from cronwave_core.queueing import make_broker
from cronwave_core.settings import RedisSettings
from cronwave_core.suite import Suite, SuiteConfig
from tests.dispatcher.cluster import Cluster
from tests.helpers import eventually

REPO = Path(__file__).resolve().parents[2]


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
    """Clients for the processes, and the steps the tests repeat."""

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


def events_of(events: list[common_pb2.RunEvent], kind: str) -> list[common_pb2.RunEvent]:
    return [e for e in events if e.kind == kind]


def lifecycle(events: list[common_pb2.RunEvent]) -> list[str]:
    """The kinds of a run's events that change or route it (without "started", the
    body's start, which other parts of cronwave record)."""
    return [e.kind for e in events if e.kind != "started"]


def at(event: common_pb2.RunEvent) -> datetime:
    return event.at.ToDatetime(tzinfo=UTC)


def job_processes(namespace: str) -> list[int]:
    """Pids of job processes started for ``namespace`` that are still alive."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
            status = (entry / "status").read_text()
        except OSError:
            continue
        if b"worker.job_runner" not in cmdline:
            continue
        if f"CRONWAVE_NAMESPACE={namespace}".encode() not in environ.split(b"\0"):
            continue
        if "State:\tZ" in status:
            continue
        found.append(int(entry.name))
    return found


def stop_rig(suite: Suite) -> None:
    # A group that was SIGSTOPped must be able to act on SIGTERM.
    for proc in suite.procs.values():
        if proc.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGCONT)
    suite.stop()


def new_suite(
    data_dir: Path,
    database_url: str,
    redis_url: str,
    namespace: str,
    pools: Mapping[str, int],
    env: Mapping[str, str] | None = None,
) -> Suite:
    return Suite(
        SuiteConfig(
            data_dir=data_dir,
            database_url=database_url,
            redis_url=redis_url,
            ports={},
            env=rig_env(namespace, env),
            grace=timedelta(seconds=2),
            worker_pools=dict(pools),
        )
    )
