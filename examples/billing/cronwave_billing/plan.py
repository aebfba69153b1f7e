"""What one billing run is asked to do (its payload) and how far it got (its
checkpoint). No SQL, no gRPC: the job reads these to decide what is left."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwave_core.errors import InvalidArgument

DEFAULT_CUSTOMERS = 100
MAX_CUSTOMERS = 10_000_000
DEFAULT_INVOICE_BATCH = 10_000
MAX_INVOICE_BATCH = 100_000
DEFAULT_CHARGE_BATCH = 1_000
MAX_CHARGE_BATCH = 5_000  # the gateway's ChargeMany bound
DEFAULT_GATEWAY_TIMEOUT = timedelta(seconds=10)
MAX_GATEWAY_TIMEOUT = timedelta(minutes=2)
DEFAULT_GATEWAY_ATTEMPTS = 6
MAX_GATEWAY_ATTEMPTS = 100

INVOICES = "invoices"
CHARGES = "charges"
DONE = "done"
PHASES = (INVOICES, CHARGES, DONE)

_CURRENCY = re.compile(r"[a-z]{3}")


def _whole(payload: Mapping[str, Any], name: str, default: int, maximum: int) -> int:
    value = payload.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise InvalidArgument(f"payload.{name}", f"must be a whole number in [1, {maximum}]")
    return value


@dataclass(frozen=True)
class BillingPlan:
    """A run's payload, checked. ``period`` is the payload's, else the UTC date of
    the nominal fire time: a nightly run bills the day it was scheduled for, however
    late it starts or how often it is resumed."""

    customers: int
    period: str
    currency: str
    invoice_batch: int
    charge_batch: int
    gateway_timeout: timedelta
    gateway_attempts: int

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any], fire_time: datetime) -> BillingPlan:
        period = payload.get("period")
        if period is None:
            period = fire_time.astimezone(UTC).date().isoformat()
        elif not isinstance(period, str) or not period.strip() or len(period) > 32:
            raise InvalidArgument(
                "payload.period", "must be a non-empty string of at most 32 chars"
            )
        currency = payload.get("currency", "eur")
        if not isinstance(currency, str) or not _CURRENCY.fullmatch(currency):
            raise InvalidArgument("payload.currency", "an ISO 4217 code in lowercase such as 'eur'")
        timeout = payload.get("gateway_timeout", DEFAULT_GATEWAY_TIMEOUT.total_seconds())
        limit = MAX_GATEWAY_TIMEOUT.total_seconds()
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise InvalidArgument("payload.gateway_timeout", "must be a number of seconds")
        if not 0 < timeout <= limit:
            raise InvalidArgument("payload.gateway_timeout", f"must be in (0, {limit:.0f}] seconds")
        return cls(
            customers=_whole(payload, "customers", DEFAULT_CUSTOMERS, MAX_CUSTOMERS),
            period=period,
            currency=currency,
            invoice_batch=_whole(
                payload, "invoice_batch", DEFAULT_INVOICE_BATCH, MAX_INVOICE_BATCH
            ),
            charge_batch=_whole(payload, "charge_batch", DEFAULT_CHARGE_BATCH, MAX_CHARGE_BATCH),
            gateway_timeout=timedelta(seconds=float(timeout)),
            gateway_attempts=_whole(
                payload, "gateway_attempts", DEFAULT_GATEWAY_ATTEMPTS, MAX_GATEWAY_ATTEMPTS
            ),
        )


@dataclass(frozen=True)
class Progress:
    """The checkpoint: the phase, the last id whose work is committed in it, and
    counts for a progress bar. Everything at or before ``last_customer_id`` (invoice
    phase) or ``last_invoice_id`` (charge phase) is done; work after it may be done
    too, which the database's constraints and the gateway's keys make harmless."""

    period: str
    phase: str = INVOICES
    last_customer_id: int = 0
    last_invoice_id: int = 0
    customers: int = 0
    invoices: int = 0
    charged: int = 0

    def to_checkpoint(self) -> dict[str, Any]:
        return {
            "period": self.period,
            "phase": self.phase,
            "last_customer_id": self.last_customer_id,
            "last_invoice_id": self.last_invoice_id,
            "customers": self.customers,
            "invoices": self.invoices,
            "charged": self.charged,
        }

    @classmethod
    def resume(cls, checkpoint: Mapping[str, Any], period: str) -> Progress:
        """Where a previous attempt of this period stopped; a checkpoint of another
        period or one this version cannot read starts from the beginning (repeating
        work is safe, skipping it is not)."""
        if checkpoint.get("period") != period or checkpoint.get("phase") not in PHASES:
            return cls(period)
        numbers = {}
        for name in ("last_customer_id", "last_invoice_id", "customers", "invoices", "charged"):
            value = checkpoint.get(name, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                return cls(period)
            numbers[name] = value
        return cls(period, phase=checkpoint["phase"], **numbers)
