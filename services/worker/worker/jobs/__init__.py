"""Job types a worker runs: the definition, the registry and the built-in jobs."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from cronwave_core.errors import ConfigurationError
from cronwave_core.settings import WorkerSettings
from worker.jobs.billing import billing_job_type
from worker.jobs.billing_config import BillingSettings
from worker.jobs.builtin import RequestedFailure, builtin_job_types
from worker.jobs.context import AttemptSuperseded, Checkpoint, JobContext, WorkerStopping
from worker.jobs.registry import JobFn, JobType, Registry
from worker.jobs.retry import NO_RETRY, RetryPolicy

__all__ = [
    "NO_RETRY",
    "AttemptSuperseded",
    "Checkpoint",
    "JobContext",
    "JobFn",
    "JobType",
    "Registry",
    "RequestedFailure",
    "RetryPolicy",
    "WorkerStopping",
    "all_job_types",
    "default_registry",
]

#: ``WorkerSettings.job_modules``: importable modules, each with
#: ``job_types(settings)`` (given the ``WorkerSettings``) returning more ``JobType``s:
#: how a deployment adds its own jobs to the built-in ones.
JOB_MODULES_VAR = "CRONWAVE_JOB_MODULES"


def all_job_types(settings: WorkerSettings, billing: BillingSettings) -> list[JobType]:
    """The built-in job types, each on its own queue, and those of the job modules."""
    types = [*builtin_job_types(), billing_job_type(billing)]
    for module_name in settings.job_modules:
        types.extend(_module_job_types(module_name, settings))
    return types


def default_registry(settings: WorkerSettings, billing: BillingSettings) -> Registry:
    """The job types whose queue this worker consumes (``CRONWAVE_WORKER_QUEUES``): a
    worker registers, and runs, only the job types of the pools it serves."""
    return Registry(all_job_types(settings, billing)).serving(settings.queues)


def _module_job_types(module_name: str, settings: WorkerSettings) -> Iterable[JobType]:
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(
            f"{JOB_MODULES_VAR}: cannot import {module_name!r}: {exc}; is it on PYTHONPATH?"
        ) from exc
    factory = getattr(module, "job_types", None)
    if not callable(factory):
        raise ConfigurationError(
            f"{JOB_MODULES_VAR}: module {module_name!r} has no job_types(settings) function"
        )
    types = list(factory(settings))
    if not all(isinstance(t, JobType) for t in types):
        raise ConfigurationError(
            f"{JOB_MODULES_VAR}: {module_name}.job_types(settings) must return JobType values"
        )
    return types
