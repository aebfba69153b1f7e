"""``billing.nightly``: bills every customer once per period, charging each invoice
through the payment gateway exactly once.

Delivery is at least once and a worker can die anywhere, so the job is built to be
repeated: it works in atomic phases between gateway calls, each ending in a recovery
point that its checkpoint names.

1. seed: the demo's customers, once (created inside the database, in bulk).
2. invoices: one per customer and period, ``INSERT ... SELECT ... ON CONFLICT DO
   NOTHING`` over ranges of customer ids, one transaction per range; the checkpoint
   names the last range committed.
3. charges: each invoice charged once through the gateway, in batches, with a key
   derived from the invoice, and recorded (``UNIQUE(invoice_id)``); the checkpoint
   names the last invoice recorded (see ``billing_charges``).

A crash between the gateway's charge and its record leaves an invoice without a
recorded charge: the resumed attempt asks again with the same key and the gateway
answers with the first charge instead of charging twice. A crash anywhere else loses
at most uncommitted work, which is redone. The checkpoint goes to cronwave after every
batch (well under a second apart), so a resumed attempt skips what is finished. A
worker that stops gracefully stops the attempt at its next checkpoint (the charge
phase first records the batch in flight) and hands the run back with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from cronwave import JobContext, JobType
from cronwave_billing.config import BillingSettings
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import Hop, Kind

NAME = "billing.nightly"
DURATION_LIMIT = timedelta(minutes=30)


class BillingJob:
    """The ``billing.nightly`` job function. It holds settings only: each attempt
    opens its own database engine and gateway channel and closes them at its end, so
    the function is safe to hand to another thread or process."""

    def __init__(self, config: BillingSettings) -> None:
        self.config = config

    def __call__(self, ctx: JobContext) -> Mapping[str, Any]:
        """Bill ``payload["customers"]`` customers (seeded once) for the run's period;
        returns the period's totals and what this attempt did."""
        # Imported here: SQLAlchemy and the gateway's client are loaded by the first
        # attempt, not by every worker and job process that only registers the type
        # (a span of its own: the first attempt's body spends a while on it).
        with hop_span("billing.load", Hop.EXECUTE, Kind.APP):
            from cronwave_billing.attempt import run_attempt

        return run_attempt(ctx, self.config)


def billing_job_type(config: BillingSettings, queue: str = "default") -> JobType:
    """``billing.nightly`` as ``config`` says: a financial job type (its effects move
    money) whose heartbeat timeout is short, so a crashed worker's run is taken over,
    and resumed from its checkpoint, within seconds."""
    return JobType(
        NAME,
        BillingJob(config),
        duration_limit=DURATION_LIMIT,
        heartbeat_timeout=config.heartbeat_timeout,
        queue=queue,
        financial=True,
    )
