"""The engine, its migrations, and the two kinds of transaction the store uses.

SQLite runs in WAL mode with a busy timeout; SQLAlchemy (not the sqlite3 module)
emits BEGIN, so a write transaction can start with ``BEGIN IMMEDIATE`` and take the
database's write lock before its first read: two writers never interleave, which is
what a row lock (``SELECT ... FOR UPDATE``) gives on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor
from sqlalchemy.orm import Session, sessionmaker

from cronwave_core.errors import ConfigurationError

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_BEGIN_OPTION = "cronwave_sqlite_begin"
# An arbitrary constant: the PostgreSQL advisory lock that serializes migrations of
# store replicas starting together.
_MIGRATION_LOCK = 0x63726F6E77617665
SQLITE_BUSY_TIMEOUT_S = 30.0


def normalize_url(url: str) -> sa.URL:
    """``postgresql://`` and ``postgres://`` mean psycopg 3 here."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise ConfigurationError(f"CRONWAVE_DATABASE_URL: not a database URL: {url!r}") from exc
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise ConfigurationError(
            "CRONWAVE_DATABASE_URL: the store supports sqlite:///<file> and "
            f"postgresql+psycopg://..., got {parsed.drivername!r}"
        )
    return parsed


def create_engine(url: str, *, instrument: bool = True) -> sa.Engine:
    """An engine for ``url`` (SQLite file or PostgreSQL), traced when ``instrument``."""
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(
            parsed,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_S},
            pool_size=8,
            max_overflow=24,
        )
        _sqlite_events(engine)
    else:
        engine = sa.create_engine(parsed, pool_size=8, max_overflow=24, pool_pre_ping=True)
    if instrument:
        # The instrumentation declares support for SQLAlchemy < 2.1 only, but the engine
        # events it hooks are unchanged in 2.1; without the skip it would do nothing.
        SQLAlchemyInstrumentor().instrument(engine=engine, skip_dep_check=True)
    return engine


def _sqlite_events(engine: sa.Engine) -> None:
    @sa.event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take BEGIN away from the sqlite3 module (it would defer it to the first
        # write, after our reads) and emit it ourselves in on_begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    @sa.event.listens_for(engine, "begin")
    def on_begin(conn: sa.Connection) -> None:
        mode = conn.get_execution_options().get(_BEGIN_OPTION, "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


def migrate(engine: sa.Engine) -> None:
    """Bring the database to the newest migration (``alembic upgrade head``), one
    process at a time."""
    writer = engine.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"})
    with writer.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK})
        command.upgrade(alembic_config(conn), "head")


def alembic_config(connection: sa.Connection | None = None) -> Config:
    """Alembic's configuration, built in code: no alembic.ini at run time."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


class Database:
    """Sessions over one engine: ``read()`` for queries, ``write()`` for changes.

    Both commit when the block ends and roll back when it raises; objects stay
    readable after the block (``expire_on_commit=False``).
    """

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        self._reads = sessionmaker(engine, expire_on_commit=False)
        self._writes = sessionmaker(
            engine.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"}), expire_on_commit=False
        )

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._reads.begin() as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        with self._writes.begin() as session:
            yield session

    def dispose(self) -> None:
        self.engine.dispose()
