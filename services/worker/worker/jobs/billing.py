"""``billing.nightly``: bills every customer once per period, over its own database.

The job owns its data (customers, invoices, charges) in the billing database, as a
real billing job would; it never touches the scheduler's database. It is safe to
repeat: the database itself refuses a second invoice for a customer and period
(``UNIQUE(customer_id, period)``) and a second charge for an invoice
(``UNIQUE(invoice_id)``), and inserts skip what already exists, so a retried or
duplicated run of the same period creates nothing new. It commits in batches and
checkpoints the last billed customer, so a retried attempt resumes where the previous
one stopped instead of starting over.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from cronwave_core.errors import ConfigurationError, InvalidArgument
from worker.jobs.context import JobContext
from worker.jobs.registry import JobType

NAME = "billing.nightly"
DEFAULT_CUSTOMERS = 100
MAX_CUSTOMERS = 1_000_000
DEFAULT_BATCH = 500
MAX_BATCH = 5_000  # 5 columns a row stays under SQLite's 32766 bound parameters

metadata = sa.MetaData()

customers = sa.Table(
    "customers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("monthly_cents", sa.Integer, nullable=False),
)

invoices = sa.Table(
    "invoices",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("customer_id", sa.Integer, sa.ForeignKey("customers.id"), nullable=False),
    sa.Column("period", sa.String(32), nullable=False),
    sa.Column("amount_cents", sa.Integer, nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.UniqueConstraint("customer_id", "period", name="uq_invoices_customer_period"),
)

charges = sa.Table(
    "charges",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("invoice_id", sa.Integer, sa.ForeignKey("invoices.id"), nullable=False),
    sa.Column("amount_cents", sa.Integer, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.UniqueConstraint("invoice_id", name="uq_charges_invoice"),
)


def monthly_cents(customer_id: int) -> int:
    """The seeded price of a customer's plan: deterministic, so reruns agree."""
    return 1_000 + (customer_id % 7) * 250


def billing_period(ctx: JobContext) -> str:
    """``payload["period"]`` if given, else the UTC date of the nominal fire time: a
    nightly run bills the day it was scheduled for, however late it starts."""
    period = ctx.payload.get("period")
    if period is None:
        return ctx.fire_time.astimezone(UTC).date().isoformat()
    if not isinstance(period, str) or not period.strip() or len(period) > 32:
        raise InvalidArgument("payload.period", "must be a non-empty string of at most 32 chars")
    return period


def _bounded_int(payload: Mapping[str, Any], name: str, default: int, maximum: int) -> int:
    value = payload.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise InvalidArgument(f"payload.{name}", f"must be a whole number in [1, {maximum}]")
    return value


def _insert(engine: sa.Engine, table: sa.Table) -> Any:
    """An INSERT that can skip rows a unique constraint already holds."""
    if engine.dialect.name == "postgresql":
        return postgresql.insert(table)
    if engine.dialect.name == "sqlite":
        return sqlite.insert(table)
    raise ConfigurationError(
        f"CRONWAVE_BILLING_DATABASE_URL: dialect {engine.dialect.name!r} is not supported; "
        "use sqlite:///path or postgresql+psycopg://..."
    )


def create_billing_engine(url: str) -> sa.Engine:
    """An engine for the billing database, with its tables created."""
    sa_url = sa.make_url(url)
    connect_args: dict[str, Any] = {}
    if sa_url.get_backend_name() == "sqlite":
        if sa_url.database and sa_url.database != ":memory:":
            Path(sa_url.database).parent.mkdir(parents=True, exist_ok=True)
        # Several worker threads (and processes) write the file: wait for the lock.
        connect_args["timeout"] = 30
    engine = sa.create_engine(sa_url, connect_args=connect_args, pool_pre_ping=True)
    if engine.dialect.name == "sqlite":

        @sa.event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

    _insert(engine, customers)  # refuse an unsupported dialect before any DDL
    try:
        metadata.create_all(engine)
    except sa.exc.DBAPIError:
        # Another process created the tables between our check and our CREATE.
        metadata.create_all(engine)
    return engine


class BillingJob:
    """The ``billing.nightly`` job function, bound to one billing database. The engine
    is created on first use, so a worker starts even while that database is down."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self._engine: sa.Engine | None = None
        self._lock = threading.Lock()

    @property
    def engine(self) -> sa.Engine:
        with self._lock:
            if self._engine is None:
                self._engine = create_billing_engine(self.database_url)
            return self._engine

    def dispose(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None

    def __call__(self, ctx: JobContext) -> Mapping[str, Any]:
        """Seed ``payload["customers"]`` customers (once), then give every customer one
        invoice and one charge for the period. Returns what this attempt created."""
        wanted = _bounded_int(ctx.payload, "customers", DEFAULT_CUSTOMERS, MAX_CUSTOMERS)
        batch = _bounded_int(ctx.payload, "batch_size", DEFAULT_BATCH, MAX_BATCH)
        period = billing_period(ctx)
        engine = self.engine
        self._seed(engine, wanted, batch)

        last = 0
        if ctx.checkpoint.get("period") == period:
            resumed = ctx.checkpoint.get("last_customer_id", 0)
            if isinstance(resumed, int) and not isinstance(resumed, bool) and resumed > 0:
                last = resumed
                ctx.logger.info("resuming %s after customer %d", period, last)
        created_invoices = created_charges = 0
        while True:
            with engine.begin() as conn:
                rows = conn.execute(
                    sa.select(customers.c.id, customers.c.monthly_cents)
                    .where(customers.c.id > last)
                    .order_by(customers.c.id)
                    .limit(batch)
                ).all()
                if not rows:
                    break
                invoiced, charged = self._bill_batch(engine, conn, rows, period, ctx.run_id)
            created_invoices += invoiced
            created_charges += charged
            last = rows[-1].id
            ctx.heartbeat({"period": period, "last_customer_id": last})
        with engine.connect() as conn:
            billed = conn.execute(sa.select(sa.func.count()).select_from(customers)).scalar_one()
        return {
            "customers": billed,
            "invoices": created_invoices,
            "charges": created_charges,
            "period": period,
        }

    def _seed(self, engine: sa.Engine, wanted: int, batch: int) -> None:
        with engine.connect() as conn:
            have = conn.execute(sa.select(sa.func.count()).select_from(customers)).scalar_one()
        if have >= wanted:
            return
        for start in range(1, wanted + 1, batch):
            ids = range(start, min(start + batch, wanted + 1))
            stmt = _insert(engine, customers).values(
                [
                    {"id": i, "name": f"customer-{i:07d}", "monthly_cents": monthly_cents(i)}
                    for i in ids
                ]
            )
            with engine.begin() as conn:
                conn.execute(stmt.on_conflict_do_nothing(index_elements=["id"]))

    def _bill_batch(
        self,
        engine: sa.Engine,
        conn: sa.Connection,
        rows: Sequence[Any],
        period: str,
        run_id: str,
    ) -> tuple[int, int]:
        now = datetime.now(UTC)
        first, last = rows[0].id, rows[-1].id
        created = conn.execute(
            _insert(engine, invoices)
            .values(
                [
                    {
                        "customer_id": r.id,
                        "period": period,
                        "amount_cents": r.monthly_cents,
                        "run_id": run_id,
                        "created_at": now,
                    }
                    for r in rows
                ]
            )
            .on_conflict_do_nothing(index_elements=["customer_id", "period"])
            .returning(invoices.c.id)
        ).all()
        # Every invoice of the batch that has no charge yet, whoever created it.
        uncharged = conn.execute(
            sa.select(invoices.c.id, invoices.c.amount_cents)
            .select_from(invoices.outerjoin(charges, charges.c.invoice_id == invoices.c.id))
            .where(
                invoices.c.period == period,
                invoices.c.customer_id.between(first, last),
                charges.c.id.is_(None),
            )
        ).all()
        charged: Sequence[Any] = []
        if uncharged:
            charged = conn.execute(
                _insert(engine, charges)
                .values(
                    [
                        {
                            "invoice_id": inv.id,
                            "amount_cents": inv.amount_cents,
                            "status": "captured",
                            "created_at": now,
                        }
                        for inv in uncharged
                    ]
                )
                .on_conflict_do_nothing(index_elements=["invoice_id"])
                .returning(charges.c.id)
            ).all()
        return len(created), len(charged)


def billing_job_type(database_url: str, queue: str = "default") -> JobType:
    """``billing.nightly`` over the billing database at ``database_url``."""
    return JobType(
        NAME,
        BillingJob(database_url),
        duration_limit=timedelta(minutes=30),
        heartbeat_timeout=timedelta(seconds=30),
        queue=queue,
        financial=True,
    )
