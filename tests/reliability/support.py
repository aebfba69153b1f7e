"""What the reliability tests read from a run's events. The rigs of real processes they
drive are ``tests.harness.cluster``'s ``Rig`` and ``make_rig``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from cronwave_core.settings import WorkerSettings
from tests.reliability.jobs import job_types
from worker.jobs.wire import job_type_to_proto


def events_of(events: list[common_pb2.RunEvent], kind: str) -> list[common_pb2.RunEvent]:
    return [e for e in events if e.kind == kind]


def lifecycle(events: list[common_pb2.RunEvent]) -> list[str]:
    """The kinds of a run's events that change or route it (without "started", the
    body's start, which other parts of cronwave record)."""
    return [e.kind for e in events if e.kind != "started"]


def at(event: common_pb2.RunEvent) -> datetime:
    return event.at.ToDatetime(tzinfo=UTC)


def register_drill(store: Any, name: str) -> None:
    """Register the drill job type ``name`` (``tests.reliability.jobs``) before any
    worker of its queue runs, as such a worker will register it: a worker's
    certificate may not change a registered job type, so a definition of our own would
    stop that worker's start."""
    [job] = [j for j in job_types(WorkerSettings.from_env({})) if j.name == name]
    request = store_pb.RegisterJobTypeRequest(job_type=job_type_to_proto(job))
    store.RegisterJobType(request, timeout=10)
