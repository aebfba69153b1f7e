"""Job types a worker runs: the registry, the built-in jobs, and where the others are
found (``worker.jobs.discovery``). The job author's types (``JobType``,
``JobContext``, ``RetryPolicy``...) are the SDK's (``cronwave``)."""

from __future__ import annotations

from cronwave_core.settings import WorkerSettings
from worker.jobs.builtin import RequestedFailure, builtin_job_types
from worker.jobs.discovery import ENTRY_POINT_GROUP, JOB_MODULES_VAR, discover
from worker.jobs.registry import Registry

__all__ = [
    "ENTRY_POINT_GROUP",
    "JOB_MODULES_VAR",
    "Registry",
    "RequestedFailure",
    "builtin_job_types",
    "default_registry",
    "discover",
]


def default_registry(settings: WorkerSettings) -> Registry:
    """The job types whose queue this worker consumes (``CRONWAVE_WORKER_QUEUES``): a
    worker registers, and runs, only the job types of the pools it serves."""
    return Registry(discover(settings)).serving(settings.queues)
