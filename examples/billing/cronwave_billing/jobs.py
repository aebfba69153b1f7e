"""The module a worker loads (entry point ``billing`` in the group ``cronwave.jobs``):
``billing.nightly``, configured from the environment when the worker starts."""

from __future__ import annotations

from cronwave import JobType
from cronwave_billing.config import BillingSettings
from cronwave_billing.job import billing_job_type
from cronwave_core.settings import WorkerSettings


def job_types(settings: WorkerSettings) -> list[JobType]:
    """``billing.nightly``, with its databases, gateway and heartbeat timeout from the
    ``CRONWAVE_BILLING_*`` / ``CRONWAVE_GATEWAY_*`` variables. A factory, not a
    decorated module attribute: the job type's heartbeat timeout is a setting, read
    when the worker starts, not when the module is imported."""
    return [billing_job_type(BillingSettings.from_env())]
