"""The gateway's own database: one row per charge, one charge per idempotency key.

The key is a UNIQUE column and every insert is ``INSERT ... ON CONFLICT DO NOTHING``,
so two calls with the same key — one after the other, or at the same moment from two
callers — make one charge; each call then reads the key's row back and answers with
it. A call is one transaction: either all its new charges are committed or none.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from cronwave_billing.bulk import any_of, insert_skipping_conflicts
from cronwave_billing.gateway.domain import (
    SUCCEEDED,
    Charge,
    ChargeCounts,
    ChargeItem,
    ChargeResult,
    IdempotencyKeyReused,
    validate_items,
)
from cronwave_core.errors import ConfigurationError

metadata = sa.MetaData()

# BIGINT on PostgreSQL; SQLite only makes INTEGER PRIMARY KEY the rowid.
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

charges = sa.Table(
    "gateway_charges",
    metadata,
    sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
    sa.Column("charge_id", sa.String(40), nullable=False, unique=True),
    sa.Column("idempotency_key", sa.String(255), nullable=False),
    sa.Column("customer_id", sa.String(64), nullable=False),
    sa.Column("invoice_id", sa.String(64), nullable=False, index=True),
    sa.Column("amount_cents", sa.BigInteger, nullable=False),
    sa.Column("currency", sa.String(3), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.UniqueConstraint("idempotency_key", name="uq_gateway_charges_key"),
)


def utc_now() -> datetime:
    return datetime.now(UTC)


def charge_ids() -> Iterator[str]:
    """Fresh charge ids for one call: a random prefix per call, then a counter (one
    random draw per call, not per charge)."""
    prefix = "ch_" + secrets.token_hex(8)
    return (f"{prefix}{n:06x}" for n in itertools.count())


def create_gateway_engine(url: str) -> sa.Engine:
    """An engine for the gateway's database (SQLite file or PostgreSQL), its table
    created if missing."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise ConfigurationError(
            f"CRONWAVE_GATEWAY_DATABASE_URL: not a database URL: {url!r}"
        ) from exc
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(
            parsed, connect_args={"check_same_thread": False, "timeout": 30}, pool_size=8
        )

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            # WAL with NORMAL survives a killed process (the case the drills test);
            # only a power cut may lose the newest transactions.
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

    elif backend == "postgresql":
        engine = sa.create_engine(parsed, pool_size=8, max_overflow=8, pool_pre_ping=True)
    else:
        raise ConfigurationError(
            "CRONWAVE_GATEWAY_DATABASE_URL: the gateway supports sqlite:///<file> and "
            f"postgresql+psycopg://..., got {parsed.drivername!r}"
        )
    try:
        metadata.create_all(engine)
    except sa.exc.DBAPIError:
        # Another gateway created the table between the check and the CREATE.
        metadata.create_all(engine)
    return engine


def _aware(value: datetime) -> datetime:
    # SQLite hands back what it stored, without the zone; we only ever store UTC.
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _charge(row: Any) -> Charge:
    return Charge(
        charge_id=row.charge_id,
        idempotency_key=row.idempotency_key,
        customer_id=row.customer_id,
        invoice_id=row.invoice_id,
        amount_cents=row.amount_cents,
        currency=row.currency,
        status=row.status,
        created_at=_aware(row.created_at),
        seq=row.seq,
    )


class Ledger:
    """Charges over one engine."""

    def __init__(
        self,
        engine: sa.Engine,
        clock: Callable[[], datetime] = utc_now,
        new_ids: Callable[[], Iterator[str]] = charge_ids,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.new_ids = new_ids

    def charge_many(self, items: Sequence[ChargeItem]) -> list[ChargeResult]:
        """Charge each item once per key, in one transaction. Answers one result per
        item in order; ``replayed`` is true for a key charged before this call. A key
        reused with other parameters raises ``IdempotencyKeyReused`` and nothing of
        the call is written."""
        items = validate_items(items)
        now = self.clock()
        ids = self.new_ids()
        fresh: dict[str, str] = {}  # key -> the charge id this call would create
        rows = []
        for item in items:
            if item.idempotency_key in fresh:
                continue
            charge_id = fresh[item.idempotency_key] = next(ids)
            rows.append(
                {
                    "charge_id": charge_id,
                    "idempotency_key": item.idempotency_key,
                    "customer_id": item.customer_id,
                    "invoice_id": item.invoice_id,
                    "amount_cents": item.amount_cents,
                    "currency": item.currency,
                    "status": SUCCEEDED,
                    "created_at": now,
                }
            )
        with self.engine.begin() as conn:
            insert_skipping_conflicts(conn, charges, rows, ["idempotency_key"])
            found = conn.execute(
                sa.select(charges).where(
                    any_of(charges.c.idempotency_key, list(fresh), self.engine.dialect.name)
                )
            ).all()
            by_key = {row.idempotency_key: _charge(row) for row in found}
            results = []
            for index, item in enumerate(items):
                charge = by_key[item.idempotency_key]
                # A charge this call created holds this call's parameters; only a key
                # used before must be compared with its first use.
                replayed = charge.charge_id != fresh[item.idempotency_key]
                differs = item.differences(charge) if replayed else []
                if differs:
                    # Raised inside the transaction: this call's new charges roll back.
                    raise IdempotencyKeyReused(
                        f"items[{index}].idempotency_key", item.idempotency_key, differs
                    )
                results.append(ChargeResult(charge, replayed))
        return results

    def list_charges(self, after_seq: int, limit: int) -> list[Charge]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(charges)
                .where(charges.c.seq > after_seq)
                .order_by(charges.c.seq)
                .limit(limit)
            ).all()
        return [_charge(row) for row in rows]

    def counts(self) -> ChargeCounts:
        per_invoice = (
            sa.select(charges.c.invoice_id, sa.func.count().label("n"))
            .group_by(charges.c.invoice_id)
            .subquery()
        )
        with self.engine.connect() as conn:
            total, amount = conn.execute(
                sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(charges.c.amount_cents), 0))
            ).one()
            invoices, twice = conn.execute(
                sa.select(
                    sa.func.count(),
                    sa.func.coalesce(sa.func.sum(sa.case((per_invoice.c.n > 1, 1), else_=0)), 0),
                ).select_from(per_invoice)
            ).one()
        return ChargeCounts(
            charges=int(total),
            invoices=int(invoices),
            invoices_charged_twice=int(twice),
            amount_cents=int(amount),
        )

    def dispose(self) -> None:
        self.engine.dispose()
