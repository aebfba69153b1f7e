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

# The SDK is loaded on first use: the services import the generated modules of
# ``cronwave.v1``, which would otherwise load the whole client with them.
import typing as _typing

if _typing.TYPE_CHECKING:
    from cronwave._client import Client
    from cronwave._enums import TERMINAL_STATES
    from cronwave._errors import WaitTimeout
    from cronwave._models import Lease, PlannerStatus, Run, RunEvent, Schedule
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
    from cronwave_core.spec import Catchup, DstGap, DstRepeat, Interval, Overlap, Policy, Spec

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


_HOMES = {
    "Client": "cronwave._client",
    "TERMINAL_STATES": "cronwave._enums",
    "WaitTimeout": "cronwave._errors",
    **dict.fromkeys(
        ("Catchup", "DstGap", "DstRepeat", "Interval", "Overlap", "Policy", "Spec"),
        "cronwave_core.spec",
    ),
    **dict.fromkeys(("Lease", "PlannerStatus", "Run", "RunEvent", "Schedule"), "cronwave._models"),
}


def __getattr__(name: str) -> _typing.Any:
    """``cronwave.Client`` and the rest of ``__all__``, imported when first asked for."""
    import importlib

    if name not in __all__:
        raise AttributeError(f"module 'cronwave' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES.get(name, "cronwave_core.errors")), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
