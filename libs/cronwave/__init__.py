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
"""

from cronwave._client import Client
from cronwave._enums import TERMINAL_STATES
from cronwave._errors import WaitTimeout
from cronwave._models import Lease, PlannerStatus, Run, RunEvent, Schedule
from cronwave_core.domain.spec import Catchup, DstGap, DstRepeat, Interval, Overlap, Policy, Spec
from cronwave_core.errors import (
    AlreadyExists,
    ConfigurationError,
    CronwaveError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    RunNotFound,
    ScheduleExists,
    ScheduleNotFound,
    StaleAttempt,
    StaleFencingToken,
    Unavailable,
)

__all__ = [
    "TERMINAL_STATES",
    "AlreadyExists",
    "Catchup",
    "Client",
    "ConfigurationError",
    "CronwaveError",
    "DstGap",
    "DstRepeat",
    "FailedPrecondition",
    "Interval",
    "InvalidArgument",
    "Lease",
    "NotFound",
    "Overlap",
    "PlannerStatus",
    "Policy",
    "Run",
    "RunEvent",
    "RunNotFound",
    "Schedule",
    "ScheduleExists",
    "ScheduleNotFound",
    "Spec",
    "StaleAttempt",
    "StaleFencingToken",
    "Unavailable",
    "WaitTimeout",
]
