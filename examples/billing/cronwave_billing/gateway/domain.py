"""What the gateway charges, and the rules a charge request must follow.

No SQL and no gRPC here: the ledger stores these, the servicer converts them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from cronwave_core.errors import InvalidArgument
from cronwave_core.fields import identifier, shown

MAX_KEY_LENGTH = 255
MAX_ID_LENGTH = 64
MAX_AMOUNT_CENTS = 10**12
MAX_ITEMS = 5_000

SUCCEEDED = "succeeded"

_CURRENCY = re.compile(r"[a-z]{3}")


class IdempotencyKeyReused(InvalidArgument):
    """A key came back with other parameters than its first use; nothing is charged
    (Stripe answers such a request with an ``idempotency_error``)."""

    def __init__(self, field: str, key: str, differs: Sequence[str]) -> None:
        super().__init__(
            field,
            f"key {shown(key)} was first used with other parameters ({', '.join(differs)} "
            "differ); a key can only be reused with the parameters of its first use. "
            "Use another key if you meant to make a different charge",
        )
        self.key = key
        self.differs = tuple(differs)


@dataclass(frozen=True, slots=True)
class ChargeItem:
    """One charge a caller asks for."""

    idempotency_key: str
    customer_id: str
    invoice_id: str
    amount_cents: int
    currency: str

    def validate(self, prefix: str) -> ChargeItem:
        """``self`` if every field keeps its rule, else ``InvalidArgument`` naming the
        field under ``prefix`` (e.g. ``items[3].currency``)."""
        if not self.idempotency_key or len(self.idempotency_key) > MAX_KEY_LENGTH:
            raise InvalidArgument(
                f"{prefix}.idempotency_key", f"required, at most {MAX_KEY_LENGTH} characters"
            )
        identifier(self.idempotency_key, f"{prefix}.idempotency_key", limit=MAX_KEY_LENGTH)
        for name in ("customer_id", "invoice_id"):
            value = getattr(self, name)
            if not value or len(value) > MAX_ID_LENGTH:
                raise InvalidArgument(
                    f"{prefix}.{name}", f"required, at most {MAX_ID_LENGTH} characters"
                )
            identifier(value, f"{prefix}.{name}", limit=MAX_ID_LENGTH)
        if not 0 < self.amount_cents <= MAX_AMOUNT_CENTS:
            raise InvalidArgument(
                f"{prefix}.amount_cents",
                f"must be in [1, {MAX_AMOUNT_CENTS}], got {self.amount_cents}",
            )
        if not _CURRENCY.fullmatch(self.currency):
            raise InvalidArgument(
                f"{prefix}.currency",
                f"an ISO 4217 code in lowercase such as 'eur', got {shown(self.currency)}",
            )
        return self

    def differences(self, other: ChargeItem | Charge) -> list[str]:
        """The parameters in which ``other`` differs from this request."""
        return [
            name
            for name in ("customer_id", "invoice_id", "amount_cents", "currency")
            if getattr(self, name) != getattr(other, name)
        ]


@dataclass(frozen=True, slots=True)
class Charge:
    """A charge the gateway made: exactly one per idempotency key."""

    charge_id: str
    idempotency_key: str
    customer_id: str
    invoice_id: str
    amount_cents: int
    currency: str
    status: str
    created_at: datetime
    seq: int


@dataclass(frozen=True, slots=True)
class ChargeResult:
    """The answer to one item: the key's charge, and whether it existed before."""

    charge: Charge
    replayed: bool


@dataclass(frozen=True)
class ChargeCounts:
    charges: int
    invoices: int
    invoices_charged_twice: int
    amount_cents: int


def validate_items(items: Sequence[ChargeItem]) -> list[ChargeItem]:
    """The items of one call, checked; a key repeated inside the call must repeat its
    parameters too."""
    if not 1 <= len(items) <= MAX_ITEMS:
        raise InvalidArgument("items", f"between 1 and {MAX_ITEMS} charges, got {len(items)}")
    first: dict[str, ChargeItem] = {}
    for index, item in enumerate(items):
        item.validate(f"items[{index}]")
        seen = first.setdefault(item.idempotency_key, item)
        differs = seen.differences(item) if seen is not item else []
        if differs:
            raise IdempotencyKeyReused(
                f"items[{index}].idempotency_key", item.idempotency_key, differs
            )
    return list(items)
