"""Job types a worker runs: the definition, the registry and the built-in jobs."""

from __future__ import annotations

from cronwave_core.settings import Settings
from worker.jobs.billing import billing_job_type
from worker.jobs.builtin import RequestedFailure, builtin_job_types
from worker.jobs.context import AttemptSuperseded, Checkpoint, JobContext
from worker.jobs.registry import JobFn, JobType, Registry

__all__ = [
    "AttemptSuperseded",
    "Checkpoint",
    "JobContext",
    "JobFn",
    "JobType",
    "Registry",
    "RequestedFailure",
    "default_registry",
]


def default_registry(settings: Settings) -> Registry:
    """Every built-in job type, on the first queue this worker consumes."""
    queue = settings.worker_queues[0]
    return Registry(
        [*builtin_job_types(queue), billing_job_type(settings.billing_database_url, queue)]
    )
