"""Job types for the tracing tests, loaded by the workers under test through
``CRONWAVE_JOB_MODULES``: bodies that record spans of their own and then fail, or
overrun their duration limit."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from cronwave import NO_RETRY, JobContext, JobType, NonRetryable
from cronwave_core.settings import WorkerSettings
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import Hop, Kind

#: The spans ``traced_failure`` records, the second beneath the first.
CHARGE_SPAN = "drill.charge"
CARD_SPAN = "drill.charge.card"


class CardDeclined(NonRetryable):
    """The traced body's failure: no retry, its run ends FAILED."""


def traced_failure(ctx: JobContext) -> Mapping[str, Any]:
    """Records ``drill.charge`` with ``drill.charge.card`` beneath it, then fails."""
    with (
        hop_span(CHARGE_SPAN, Hop.EXECUTE, Kind.APP, {"drill.items": 3}),
        hop_span(CARD_SPAN, Hop.EXECUTE, Kind.DATABASE),
    ):
        pass
    raise CardDeclined("card declined")


def traced_runaway(ctx: JobContext) -> Mapping[str, Any]:
    """Records ``drill.charge``, then blocks past its duration limit (its job process
    is stopped)."""
    with hop_span(CHARGE_SPAN, Hop.EXECUTE, Kind.APP, {"drill.items": 1}):
        pass
    time.sleep(3600)
    return {}


def job_types(settings: WorkerSettings) -> list[JobType]:
    return [
        JobType(
            "drill.traced_failure",
            traced_failure,
            duration_limit=timedelta(minutes=1),
            retry=NO_RETRY,
        ),
        JobType(
            "drill.traced_runaway",
            traced_runaway,
            duration_limit=timedelta(seconds=1),
            retry=NO_RETRY,
        ),
    ]
