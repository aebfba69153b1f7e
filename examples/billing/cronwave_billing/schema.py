"""The billing job's own database: customers, invoices and the charges it recorded.

The database itself makes every step safe to repeat: ``UNIQUE(customer_id, period)``
refuses a second invoice for a customer and period, ``UNIQUE(invoice_id)`` a second
recorded charge for an invoice, and every insert skips what already exists
(``ON CONFLICT DO NOTHING``). The scheduler's tables live elsewhere; only this job
touches these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from cronwave_core.errors import ConfigurationError

URL_VAR = "CRONWAVE_BILLING_DATABASE_URL"

metadata = sa.MetaData()

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

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
    sa.Column("id", _ID, primary_key=True, autoincrement=True),
    sa.Column("customer_id", sa.Integer, sa.ForeignKey("customers.id"), nullable=False),
    sa.Column("period", sa.String(32), nullable=False),
    sa.Column("amount_cents", sa.Integer, nullable=False),
    sa.Column("currency", sa.String(3), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.UniqueConstraint("customer_id", "period", name="uq_invoices_customer_period"),
    # The charge phase walks one period's invoices in id order.
    sa.Index("ix_invoices_period_id", "period", "id"),
)

charges = sa.Table(
    "charges",
    metadata,
    sa.Column("id", _ID, primary_key=True, autoincrement=True),
    sa.Column("invoice_id", sa.BigInteger, sa.ForeignKey("invoices.id"), nullable=False),
    sa.Column("gateway_charge_id", sa.String(40), nullable=False),
    sa.Column("idempotency_key", sa.String(255), nullable=False),
    sa.Column("amount_cents", sa.Integer, nullable=False),
    sa.Column("currency", sa.String(3), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
    sa.UniqueConstraint("invoice_id", name="uq_charges_invoice"),
    sa.UniqueConstraint("gateway_charge_id", name="uq_charges_gateway_charge"),
)


def monthly_cents(customer_id: int) -> int:
    """The seeded price of a customer's plan: deterministic, so reruns agree (the seed
    SQL computes the same)."""
    return 1_000 + (customer_id % 7) * 250


def insert(engine: sa.Engine | sa.Connection, table: sa.Table) -> Any:
    """An INSERT of ``engine``'s dialect, which can skip rows a unique constraint holds."""
    return (postgresql if engine.dialect.name == "postgresql" else sqlite).insert(table)


def create_billing_engine(url: str) -> sa.Engine:
    """An engine for the billing database (SQLite file or PostgreSQL), its tables
    created when missing. A database with an older layout of these tables stops the
    job with what to do, rather than failing half-way."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise ConfigurationError(f"{URL_VAR}: not a database URL: {url!r}") from exc
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        # Several worker threads (and processes) write the file: wait for the lock.
        engine = sa.create_engine(parsed, connect_args={"timeout": 30})

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            # Survives a killed process, which is what the job must survive.
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

    elif backend == "postgresql":
        engine = sa.create_engine(parsed, pool_pre_ping=True)
    else:
        raise ConfigurationError(
            f"{URL_VAR}: dialect {parsed.drivername!r} is not supported; "
            "use sqlite:///path or postgresql+psycopg://..."
        )
    try:
        _check_layout(engine, url)
        try:
            metadata.create_all(engine)
        except sa.exc.DBAPIError:
            # Another process created the tables between our check and our CREATE.
            metadata.create_all(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine


def _check_layout(engine: sa.Engine, url: str) -> None:
    inspector = sa.inspect(engine)
    for table in metadata.sorted_tables:
        if not inspector.has_table(table.name):
            continue
        have = {c["name"] for c in inspector.get_columns(table.name)}
        missing = sorted(set(table.columns.keys()) - have)
        if missing:
            raise ConfigurationError(
                f"{URL_VAR}: table {table.name!r} in {url} has an older layout (no "
                f"{', '.join(missing)}); point {URL_VAR} at a new database, or delete "
                "this one if it only holds demo data"
            )


def seed_statement(engine: sa.Engine, low: int, high: int) -> sa.TextClause:
    """Creates customers ``low..high`` inside the database (no rows travel), skipping
    ids that exist."""
    if engine.dialect.name == "postgresql":
        sql = (
            "INSERT INTO customers (id, name, monthly_cents) "
            "SELECT n, 'customer-' || lpad(n::text, 7, '0'), 1000 + (n % 7) * 250 "
            "FROM generate_series(CAST(:low AS integer), CAST(:high AS integer)) AS n "
            "ON CONFLICT (id) DO NOTHING"
        )
    else:
        # "WHERE true": SQLite's rule for an upsert after INSERT ... SELECT.
        sql = (
            "INSERT INTO customers (id, name, monthly_cents) "
            "WITH RECURSIVE seq(n) AS (SELECT :low UNION ALL SELECT n + 1 FROM seq "
            "WHERE n < :high) "
            "SELECT n, printf('customer-%07d', n), 1000 + (n % 7) * 250 FROM seq WHERE true "
            "ON CONFLICT (id) DO NOTHING"
        )
    return sa.text(sql).bindparams(low=low, high=high)
