"""The engine, its migrations, and the two kinds of transaction the store uses.

SQLite runs in WAL mode with a busy timeout; SQLAlchemy (not the sqlite3 module)
emits BEGIN, so a write transaction can start with ``BEGIN IMMEDIATE`` and take the
database's write lock before its first read: two writers never interleave, which is
what a row lock (``SELECT ... FOR UPDATE``) gives on PostgreSQL.
"""

from __future__ import annotations

import re
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from opentelemetry import trace
from opentelemetry.instrumentation import _semconv as semconv
from opentelemetry.instrumentation.sqlalchemy import __version__ as _instrumentation_version
from opentelemetry.instrumentation.sqlalchemy import engine as stock
from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.trace import SpanKind, Status, StatusCode, TracerProvider
from sqlalchemy.engine.base import OptionEngine
from sqlalchemy.orm import Session, sessionmaker

from cronwave_core.errors import ConfigurationError, Unavailable
from cronwave_core.settings_pools import PoolSettings
from cronwave_core.telemetry import sql
from cronwave_core.telemetry.setup import (
    Resolver,
    connecting,
    is_address,
    resolve,
    system_resolver,
)

if TYPE_CHECKING:
    from alembic.config import Config

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


def create_engine(
    url: str,
    *,
    instrument: bool = True,
    tracer_provider: TracerProvider | None = None,
    pools: PoolSettings | None = None,
    resolver: Resolver = system_resolver,
) -> sa.Engine:
    """An engine for ``url`` (SQLite file or PostgreSQL), traced when ``instrument``
    (by ``tracer_provider``, else the global one), its pool bounded as ``pools`` says
    (default: the defaults of ``CRONWAVE_DATABASE_POOL_*``): a transaction that finds
    every connection taken waits ``database_pool_timeout`` for one, then fails
    ``Unavailable`` (``Database``), that call alone. A PostgreSQL connection is opened
    in a ``connect`` span, its host name looked up by ``resolver`` in a ``dns`` span
    (``cronwave_core.telemetry.setup``), traced or not by ``instrument``."""
    pools = pools if pools is not None else PoolSettings()
    bounds: dict[str, Any] = {
        "pool_size": pools.database_pool_size,
        "max_overflow": pools.database_pool_overflow,
        "pool_timeout": pools.database_pool_timeout.total_seconds(),
    }
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(
            parsed,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_S},
            **bounds,
        )
        _sqlite_events(engine)
    else:
        engine = sa.create_engine(parsed, connect_args=_session_free(pools), **bounds)
        _ping_when_idle(engine)
        _connect_in_spans(engine, resolver)
    if instrument:
        _trace_engine(engine, tracer_provider)
    return engine


#: A pooled connection idle at least this long is pinged before it is handed out.
PING_IDLE_AFTER_S = 1.0


def _ping_when_idle(engine: sa.Engine) -> None:
    """Ping a connection at checkout only when it sat in the pool ``PING_IDLE_AFTER_S``
    or longer; a dead one is replaced before the transaction starts, as with
    ``pool_pre_ping``. A connection back within that time goes out unpinged: under
    load, a ping per checkout was a round trip per transaction (a twentieth of the
    store's CPU at 250 runs/s). A connection that died in that second (PostgreSQL
    restarted, its link cut) fails its transaction instead: the pool is invalidated,
    and that call alone answers ``Unavailable`` (nothing written, retry), as any
    transaction cut mid-way does."""

    @sa.event.listens_for(engine, "checkin")
    def checked_in(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @sa.event.listens_for(engine, "checkout")
    def checked_out(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < PING_IDLE_AFTER_S:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as exc:  # the pool connects anew
            raise sa.exc.DisconnectionError("the pooled connection is gone") from exc


def _session_free(pools: PoolSettings) -> dict[str, Any]:
    """psycopg's connection options for a pooler in transaction mode
    (``CRONWAVE_DATABASE_POOLER=transaction``), where each transaction may run on
    another server connection than the one before. Of what a PostgreSQL session keeps,
    the store relies on nothing else: its one advisory lock is a transaction's
    (``pg_advisory_xact_lock``, migrations), it sets no session variable, uses no
    LISTEN/NOTIFY, no temporary table and no cursor held past a commit. psycopg
    prepares a statement it ran five times on a connection (``prepare_threshold``); the
    next transaction using it on another server connection would find it missing, or
    a name taken, so then nothing is prepared."""
    if pools.database_pooler == "transaction":
        return {"prepare_threshold": None}
    return {}


# SQL spans. They are the ones OpenTelemetry's SQLAlchemy instrumentation makes (same
# kinds and attributes: a CLIENT span per statement with its text, and a ``connect``
# span for a connection checkout), but named by operation and table, never by the
# database's file (``cronwave_core.telemetry.sql``), with the statement's text cut to
# a length; made for this engine only and at a
# fraction of the cost: the attributes of a statement are worked out once per
# distinct statement text (the compiled cache hands back the same few dozen strings)
# instead of once per execution, and given to the span when it starts; and a checkout
# is a span only when it waited.

_MAX_STATEMENTS = 4096  # distinct statement texts remembered per engine
#: A checkout that took this long or longer is a ``connect`` span (database time of
#: the caller's hop): it waited for the pool, or for a new connection.
SLOW_CHECKOUT_NS = 1_000_000
_tracers: weakref.WeakKeyDictionary[sa.Engine, _SqlSpans] = weakref.WeakKeyDictionary()


class _SqlSpans:
    """The SQL spans of one engine (see above)."""

    def __init__(self, engine: sa.Engine, tracer_provider: TracerProvider | None) -> None:
        semconv._OpenTelemetrySemanticConventionStability._initialize()
        stability = semconv._OpenTelemetrySemanticConventionStability
        self._db_mode = stability._get_opentelemetry_stability_opt_in_mode(
            semconv._OpenTelemetryStabilitySignalType.DATABASE
        )
        self._http_mode = stability._get_opentelemetry_stability_opt_in_mode(
            semconv._OpenTelemetryStabilitySignalType.HTTP
        )
        self._tracer = trace.get_tracer(
            "opentelemetry.instrumentation.sqlalchemy",
            _instrumentation_version,
            tracer_provider,
            schema_url=semconv._get_schema_url_for_signal_types(
                [
                    semconv._OpenTelemetryStabilitySignalType.DATABASE,
                    semconv._OpenTelemetryStabilitySignalType.HTTP,
                ]
            ),
        )
        self._vendor = stock._normalize_vendor(engine.name)
        connect: dict[str, Any] = stock._get_attributes_from_url(
            engine.url, self._db_mode, self._http_mode
        )[0]
        semconv._set_db_system(connect, self._vendor, self._db_mode)
        self._connect_attrs = connect
        # What a statement's span says besides its text, known at the first statement
        # (PostgreSQL without a host in the URL is asked through the cursor).
        self._connection_attrs: dict[str, Any] | None = None
        self._statements: dict[str, tuple[str, dict[str, Any]]] = {}

    def connect(self, engine: sa.Engine) -> sa.Connection:
        """A checkout; a ``connect`` span when it waited (``SLOW_CHECKOUT_NS`` or
        more: a pool with no free connection, a connection being opened), drawn once
        it is over, as the worker draws its queue time. A checkout that takes
        microseconds is not worth a span each time."""
        started = time.time_ns()
        try:
            connection = sa.Engine.connect(engine)
        except Exception as exc:
            self._draw_connect(started, exc)
            raise
        if time.time_ns() - started >= SLOW_CHECKOUT_NS:
            self._draw_connect(started)
        return connection

    def _draw_connect(self, started: int, exc: Exception | None = None) -> None:
        span = self._tracer.start_span(
            "connect", kind=SpanKind.CLIENT, attributes=self._connect_attrs, start_time=started
        )
        if exc is not None:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        span.end()

    def before_execute(
        self, conn: sa.Connection, cursor: Any, statement: str, _p: Any, context: Any, _m: bool
    ) -> None:
        if not is_instrumentation_enabled():
            return
        named = self._statements.get(statement)
        if named is None:
            named = self._named(conn, cursor, statement)
        name, attrs = named
        context._cronwave_span = self._tracer.start_span(
            name, kind=SpanKind.CLIENT, attributes=attrs
        )

    def _named(
        self, conn: sa.Connection, cursor: Any, statement: str
    ) -> tuple[str, dict[str, Any]]:
        if self._connection_attrs is None:
            attrs, found = stock._get_attributes_from_url(
                conn.engine.url, self._db_mode, self._http_mode
            )
            if not found:
                attrs = stock._get_attributes_from_cursor_or_conn(
                    self._vendor, conn, cursor, attrs, self._db_mode, self._http_mode
                )
            self._connection_attrs = attrs
        name = sql.span_name(statement)
        span_attrs = dict(self._connection_attrs)
        semconv._set_db_statement(span_attrs, sql.statement_text(statement), self._db_mode)
        semconv._set_db_system(span_attrs, self._vendor, self._db_mode)
        semconv._set_db_operation(span_attrs, name.split(" ", 1)[0], self._db_mode)
        named = (name, span_attrs)
        if len(self._statements) < _MAX_STATEMENTS:
            self._statements[statement] = named
        return named


def _after_execute(_c: Any, _cur: Any, _s: Any, _p: Any, context: Any, _m: bool) -> None:
    span = getattr(context, "_cronwave_span", None)
    if span is not None:
        context._cronwave_span = None
        span.end()


def _on_error(exception_context: sa.engine.ExceptionContext) -> None:
    context: Any = exception_context.execution_context  # carries our span (see above)
    span = getattr(context, "_cronwave_span", None)
    if context is None or span is None:
        return
    context._cronwave_span = None
    if span.is_recording():
        span.set_status(Status(StatusCode.ERROR, str(exception_context.original_exception)))
    span.end()


class _TracedOptionEngine(OptionEngine):
    """``engine.execution_options(...)`` of a traced engine: checkouts traced too."""

    def connect(self) -> sa.Connection:
        return _tracers[self._proxied].connect(self)


class _TracedEngine(sa.Engine):
    """An engine whose connection checkouts are ``connect`` spans."""

    _option_cls = _TracedOptionEngine

    def connect(self) -> sa.Connection:
        return _tracers[self].connect(self)


def _trace_engine(engine: sa.Engine, tracer_provider: TracerProvider | None) -> None:
    spans = _SqlSpans(engine, tracer_provider)
    _tracers[engine] = spans
    sa.event.listen(engine, "before_cursor_execute", spans.before_execute)
    sa.event.listen(engine, "after_cursor_execute", _after_execute)
    sa.event.listen(engine, "handle_error", _on_error)
    engine.__class__ = _TracedEngine


def _connect_in_spans(engine: sa.Engine, resolver: Resolver) -> None:
    """Open each new PostgreSQL connection in a ``connect`` span, its host name looked
    up by ``resolver`` in a ``dns`` span first. psycopg would look the name up itself
    and try each address in turn; given the addresses (``hostaddr``, the name kept in
    ``host`` for TLS and the server's view), it tries the same attempts, and the
    look-up is measured once."""

    @sa.event.listens_for(engine, "do_connect")
    def do_connect(dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        host = str(cparams.get("host") or "")
        port = int(cparams.get("port") or 5432)
        with connecting("postgresql", f"{host or 'local'}:{port}"):
            if _needs_lookup(host, cparams):
                try:
                    answers = resolve(host, port, resolver, "postgresql")
                except OSError as exc:  # as psycopg says it, so SQLAlchemy wraps it
                    dbapi = dialect.loaded_dbapi
                    raise dbapi.OperationalError(f"failed to resolve host {host!r}: {exc}") from exc
                addresses = [str(a[4][0]) for a in answers]
                cparams["host"] = ",".join([host] * len(addresses))
                cparams["hostaddr"] = ",".join(addresses)
            return dialect.connect(*cargs, **cparams)


def _needs_lookup(host: str, cparams: dict[str, Any]) -> bool:
    """One host name (not an address, a socket directory or a list), not resolved
    already by a ``hostaddr``."""
    return bool(
        host
        and "hostaddr" not in cparams
        and "," not in host
        and not host.startswith("/")
        and not is_address(host)
    )


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
    process at a time. A database already there is left alone without loading Alembic
    (a tenth of the store's start-up CPU)."""
    if _revision(engine) == newest_revision():
        return
    from alembic import command

    writer = engine.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"})
    with writer.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK})
        command.upgrade(alembic_config(conn), "head")


_REVISION = re.compile(r"^revision(?:: str)? = [\"']([^\"']+)[\"']", re.MULTILINE)
_DOWN_REVISION = re.compile(r"^down_revision(?:: [^=]+)? = [\"']([^\"']+)[\"']", re.MULTILINE)


def newest_revision() -> str:
    """The revision no migration revises: Alembic's head, read from the migration
    files' ``revision`` and ``down_revision`` lines (one line of history, no
    branches; a test holds it to Alembic's own answer)."""
    revisions: set[str] = set()
    revised: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        text = path.read_text()
        revisions.update(_REVISION.findall(text))
        revised.update(_DOWN_REVISION.findall(text))
    heads = revisions - revised
    if len(heads) != 1:
        raise RuntimeError(f"the migrations have {len(heads)} heads: {sorted(heads)}")
    return heads.pop()


def _revision(engine: sa.Engine) -> str | None:
    """The database's migration revision; None before its first migration."""
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


def alembic_config(connection: sa.Connection | None = None) -> Config:
    """Alembic's configuration, built in code: no alembic.ini at run time."""
    from alembic.config import Config

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
        with _unreachable_is_unavailable(), self._reads.begin() as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        with _unreachable_is_unavailable(), self._writes.begin() as session:
            yield session

    def dispose(self) -> None:
        self.engine.dispose()


class Conflicted(Unavailable):
    """PostgreSQL rolled the transaction back for a concurrent one (a deadlock it broke,
    a serialization failure): nothing was written, and the same work may simply run
    again (``Transactions.rounds`` does, before answering ``Unavailable``)."""


#: SQLSTATEs of a transaction rolled back for another: serialization_failure,
#: deadlock_detected.
_CONFLICTS = frozenset({"40001", "40P01"})


@contextmanager
def _unreachable_is_unavailable() -> Iterator[None]:
    """A database that cannot be reached (connection refused, reset or timed out, the
    pool exhausted past ``CRONWAVE_DATABASE_POOL_TIMEOUT``, SQLite's file locked past
    its busy timeout) is ``Unavailable``, and a transaction rolled back for a concurrent
    one is ``Conflicted`` (an ``Unavailable``):
    a caller may retry, and the transaction wrote nothing. The driver's text, which
    names the statement, goes to the log only (``bootstrap`` logs the cause). Other
    database errors (a statement the database refused) stay what they are."""
    try:
        yield
    except sa.exc.DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) in _CONFLICTS:
            raise Conflicted(
                "the workflow-store's write met a concurrent one and was rolled back; "
                "nothing was written, retry"
            ) from exc
        if not _unreachable(exc):
            raise
        raise Unavailable(
            "the workflow-store's database did not answer; nothing was written, retry"
        ) from exc
    except sa.exc.TimeoutError as exc:  # no connection free in the pool in time
        raise Unavailable(
            "the workflow-store is busy: every database connection stayed in use past "
            "its pool timeout; nothing was written, retry"
        ) from exc


# SQLite's OperationalError also covers a malformed statement; these mean "not now".
_SQLITE_UNREACHABLE = ("database is locked", "unable to open database", "disk i/o error")


def _unreachable(exc: sa.exc.DBAPIError) -> bool:
    if exc.connection_invalidated or isinstance(exc, sa.exc.InterfaceError):
        return True
    if not isinstance(exc, sa.exc.OperationalError):
        return False
    if type(exc.orig).__module__.startswith("sqlite3"):
        return any(text in str(exc.orig).lower() for text in _SQLITE_UNREACHABLE)
    return True  # psycopg: OperationalError is the connection's (a bad statement is not)
