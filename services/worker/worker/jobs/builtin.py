"""The job types every worker ships with: for smoke tests, demos and failure drills."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from cronwave import JobContext, JobType, RetryPolicy
from cronwave_core.errors import InvalidArgument

# Sleep in short slices: a time limit is delivered between Python instructions,
# so one long C-level sleep could not be interrupted.
_SLICE_SECONDS = 0.05
_MAX_SLEEP_SECONDS = 24 * 3600


class RequestedFailure(Exception):
    """Raised by ``cronwave.fail`` on purpose, with the payload's message."""


def noop(ctx: JobContext) -> Mapping[str, Any]:
    """Does nothing and succeeds: the cheapest possible run, for latency figures."""
    return {}


def sleep(ctx: JobContext) -> Mapping[str, Any]:
    """Sleeps ``payload["seconds"]`` (a number, default 1) and reports it; its
    progress is the whole seconds slept so far."""
    seconds = ctx.payload.get("seconds", 1)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise InvalidArgument("payload.seconds", f"must be a number, got {seconds!r}")
    if not 0 <= seconds <= _MAX_SLEEP_SECONDS:
        raise InvalidArgument("payload.seconds", f"must be in [0, {_MAX_SLEEP_SECONDS}]")
    began = time.monotonic()
    deadline = began + float(seconds)
    total = math.ceil(seconds)
    slept = -1
    while (left := deadline - time.monotonic()) > 0:
        if (now := int(time.monotonic() - began)) != slept:
            slept = now
            ctx.progress(slept, total, "seconds slept")
        time.sleep(min(left, _SLICE_SECONDS))
    ctx.progress(total, total, "seconds slept")
    return {"slept": seconds}


def fail(ctx: JobContext) -> Mapping[str, Any]:
    """Always fails with ``payload["message"]`` (default "requested failure")."""
    message = ctx.payload.get("message", "requested failure")
    raise RequestedFailure(str(message))


def builtin_job_types(queue: str = "default") -> list[JobType]:
    """``cronwave.noop``, ``cronwave.sleep`` and ``cronwave.fail`` on ``queue``, plus
    ``cronwave.noop.critical`` on the critical pool and ``cronwave.sleep.bulk`` on the
    bulk pool. ``cronwave.fail``'s error is non-retryable: its run ends FAILED at once."""
    return [
        JobType("cronwave.noop", noop, duration_limit=timedelta(minutes=1), queue=queue),
        JobType(
            "cronwave.sleep",
            sleep,
            duration_limit=timedelta(hours=25),
            heartbeat_timeout=timedelta(seconds=15),
            queue=queue,
        ),
        JobType(
            "cronwave.fail",
            fail,
            duration_limit=timedelta(minutes=1),
            queue=queue,
            retry=RetryPolicy(non_retryable_errors=("RequestedFailure",)),
        ),
        JobType(
            "cronwave.noop.critical", noop, duration_limit=timedelta(minutes=1), queue="critical"
        ),
        JobType(
            "cronwave.sleep.bulk",
            sleep,
            duration_limit=timedelta(hours=25),
            heartbeat_timeout=timedelta(seconds=15),
            queue="bulk",
        ),
    ]
