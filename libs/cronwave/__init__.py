"""cronwave: exactly-once cron for jobs such as nightly billing.

The client SDK::

    from datetime import timedelta
    import cronwave

    with cronwave.Client() as client:
        client.create_schedule(
            "nightly-billing", cron="0 2 * * *", time_zone="Europe/Berlin",
            job_type="billing.nightly", payload={"customers": 200},
        )
        run = client.trigger("nightly-billing")
        run = client.wait_run(run.run_id, timeout=timedelta(minutes=2))
        print(run.state, run.lateness)

The job author's API (what a worker runs; see docs/jobs.md)::

    @cronwave.job("acme.invoices", duration_limit=timedelta(minutes=30))
    def invoices(ctx: cronwave.JobContext) -> dict:
        ctx.logger.info("invoicing for %s", ctx.fire_time)
        return {"invoices": 0}
"""

import importlib
import typing

from cronwave._checkpoint import Checkpoint
from cronwave._job import JobType, job
from cronwave._job_context import JobContext
from cronwave._job_errors import AttemptSuperseded, NonRetryable, WorkerStopping
from cronwave._retry import NO_RETRY, RetryPolicy
from cronwave_core.domain.progress import Progress
from cronwave_core.errors import (
    AlreadyExists,
    ConfigurationError,
    CronwaveError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    RunNotFound,
    ScheduleExists,
    ScheduleNotFound,
    StaleAttempt,
    StaleFencingToken,
    Unauthenticated,
    Unavailable,
)

if typing.TYPE_CHECKING:
    from cronwave._client import Client
    from cronwave._enums import TERMINAL_STATES
    from cronwave._errors import WaitTimeout
    from cronwave._models import (
        AuditEvent,
        DeadlineBreach,
        DeadlineDelivery,
        Lease,
        PlannerStatus,
        Run,
        RunEvent,
        Schedule,
    )
    from cronwave_core.domain.deadlines import Notifier, NotifyFormat
    from cronwave_core.domain.spec import (
        Catchup,
        DstGap,
        DstRepeat,
        Interval,
        Overlap,
        Policy,
        Spec,
    )

#: The client's side loads on first use: a worker's job process imports the job API
#: (above) and never pays for gRPC channels, protobuf models or calendars.
_LAZY = {
    "Client": "cronwave._client",
    "TERMINAL_STATES": "cronwave._enums",
    "WaitTimeout": "cronwave._errors",
    **dict.fromkeys(
        (
            "AuditEvent",
            "DeadlineBreach",
            "DeadlineDelivery",
            "Lease",
            "PlannerStatus",
            "Run",
            "RunEvent",
            "Schedule",
        ),
        "cronwave._models",
    ),
    **dict.fromkeys(("Notifier", "NotifyFormat"), "cronwave_core.domain.deadlines"),
    **dict.fromkeys(
        ("Catchup", "DstGap", "DstRepeat", "Interval", "Overlap", "Policy", "Spec"),
        "cronwave_core.domain.spec",
    ),
}

__all__ = [
    "NO_RETRY",
    "TERMINAL_STATES",
    "AlreadyExists",
    "AttemptSuperseded",
    "AuditEvent",
    "Catchup",
    "Checkpoint",
    "Client",
    "ConfigurationError",
    "CronwaveError",
    "DeadlineBreach",
    "DeadlineDelivery",
    "DstGap",
    "DstRepeat",
    "FailedPrecondition",
    "Interval",
    "InvalidArgument",
    "JobContext",
    "JobType",
    "Lease",
    "NonRetryable",
    "NotFound",
    "Notifier",
    "NotifyFormat",
    "Overlap",
    "PermissionDenied",
    "PlannerStatus",
    "Policy",
    "Progress",
    "RetryPolicy",
    "Run",
    "RunEvent",
    "RunNotFound",
    "Schedule",
    "ScheduleExists",
    "ScheduleNotFound",
    "Spec",
    "StaleAttempt",
    "StaleFencingToken",
    "Unauthenticated",
    "Unavailable",
    "WaitTimeout",
    "WorkerStopping",
    "job",
]


def __getattr__(name: str) -> typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cronwave' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
