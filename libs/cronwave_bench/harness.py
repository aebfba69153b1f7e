"""Where a benchmark runs: the backend it was given, a private suite per scenario, and
the client that drives it.

The backend is PostgreSQL and Redis when ``CRONWAVE_DATABASE_URL`` /
``CRONWAVE_REDIS_URL`` name them, else the embedded defaults: a SQLite file and a
redis-server started for the suite. Every suite runs on free ports under a fresh
namespace (its Redis keys, queues and lease), so benchmarks never see each other's
messages, nor those of a ``cronwave up`` on the same Redis.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

import sqlalchemy as sa

from cronwave import Client
from cronwave_core.redaction import redact_url
from cronwave_core.settings import PlannerSettings, TlsSettings, check_env
from cronwave_core.suite import Suite, SuiteConfig

#: Variables a suite sets for its processes itself; every other CRONWAVE_* variable of
#: the bench's environment reaches the suite's processes unchanged.
_SUITE_OWNED = frozenset(
    {
        "CRONWAVE_DATA_DIR",
        "CRONWAVE_DATABASE_URL",
        "CRONWAVE_REDIS_URL",
        "CRONWAVE_STORE_ADDR",
        "CRONWAVE_LEADER_ADDR",
        "CRONWAVE_DISPATCHER_ADDR",
        "CRONWAVE_PLANNER_ADDR",
        "CRONWAVE_WORKER_ADDR",
        "CRONWAVE_NAMESPACE",
        "CRONWAVE_TRACING",
    }
)

Say = Callable[[str], None]


def _quiet(_line: str) -> None:
    return None


def mask(url: str) -> str:
    """``url`` as it may be shown: without its password (``cronwave_core.redaction``)."""
    return redact_url(url)


@dataclass(frozen=True)
class Backend:
    """The database and Redis every suite of one bench uses (``None``: embedded)."""

    database_url: str | None = None
    redis_url: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Backend:
        env = os.environ if env is None else env
        check_env(env)  # a malformed variable stops here, named
        return cls(
            database_url=env.get("CRONWAVE_DATABASE_URL") or None,
            redis_url=env.get("CRONWAVE_REDIS_URL") or None,
        )

    @property
    def database(self) -> str:
        """``postgresql`` or ``sqlite``: the store's database engine."""
        if self.database_url is None or self.database_url.startswith("sqlite"):
            return "sqlite"
        return self.database_url.split(":", 1)[0].split("+", 1)[0]

    def describe(self) -> str:
        database = (
            f"PostgreSQL {mask(self.database_url)}"
            if self.database == "postgresql" and self.database_url
            else (
                f"SQLite {self.database_url}"
                if self.database_url
                else "SQLite (embedded default, a file per suite)"
            )
        )
        redis = (
            f"Redis {mask(self.redis_url)}"
            if self.redis_url
            else "Redis (embedded redis-server per suite)"
        )
        return f"{database}; {redis}"


#: The worker of the scenarios that measure the run pipeline (burst, throughput): job
#: bodies in threads (a job process per ``cronwave.noop`` body would measure process
#: hand-overs, not the pipeline), and enough consumer threads that the claims of many
#: runs due together go to the store together.
PIPELINE_ENV = {"CRONWAVE_JOB_ISOLATION": "thread", "CRONWAVE_WORKER_THREADS": "128"}


@dataclass(frozen=True)
class SuiteOptions:
    """How one scenario's suite differs from the defaults."""

    tracing: bool = True
    workers: int = 1
    planners: int = 1
    env: Mapping[str, str] | None = None
    #: On PostgreSQL, a database created for this suite and dropped after it, so no
    #: scenario sees another's schedules or runs (e.g. a sweeper re-sending runs an
    #: earlier suite left pending). SQLite suites always have a file of their own.
    own_database: bool = False
    #: Also run the web console (its address: ``Suite.console_url``).
    console: bool = False


def passthrough_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The bench's own ``CRONWAVE_*`` settings that its suites inherit (e.g.
    ``CRONWAVE_DISPATCH_LEAD``, ``CRONWAVE_WORKER_THREADS``)."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if k.startswith("CRONWAVE_") and k not in _SUITE_OWNED}


def suite_config(backend: Backend, data_dir: Path, options: SuiteOptions) -> SuiteConfig:
    """A suite on free ports, under a fresh namespace, with the bench's settings."""
    env = passthrough_env()
    env["CRONWAVE_NAMESPACE"] = f"bench{uuid.uuid4().hex[:12]}"
    env["CRONWAVE_TRACING"] = "on" if options.tracing else "off"
    env.update(options.env or {})
    return SuiteConfig(
        data_dir=data_dir,
        database_url=backend.database_url,
        redis_url=backend.redis_url,
        ports={},
        planners=options.planners,
        workers=options.workers,
        env=env,
        grace=timedelta(seconds=3),
        # Mutual TLS, as a fresh `cronwave up`, unless the bench runs with
        # CRONWAVE_INSECURE=1 (a row measured so says it).
        insecure=TlsSettings.from_env().insecure,
        console=options.console,
    )


def client_for(suite: Suite, timeout: timedelta = timedelta(seconds=30)) -> Client:
    """A client of ``suite``'s services whose every call has ``timeout``."""
    return Client(
        store_addr=suite.store_addr,
        dispatcher_addr=suite.dispatcher_addr,
        planner_addr=suite.planner_addr,
        leader_addr=suite.leader_addr,
        timeout=timeout,
        tls=suite.tls(),
    )


@contextmanager
def bench_suite(
    backend: Backend, data_dir: Path, options: SuiteOptions = SuiteOptions()
) -> Iterator[tuple[Suite, Client]]:
    """A suite of real processes for one scenario, and a client for it; everything it
    started is stopped when the block ends, whatever ends it."""
    with ExitStack() as stack:
        if options.own_database:
            backend = stack.enter_context(own_database(backend, data_dir.name))
        suite = Suite(suite_config(backend, data_dir, options))
        stack.callback(suite.stop)
        suite.start()
        with client_for(suite) as client:
            yield suite, client


def shared_database(suite: Suite, backend: Backend) -> bool:
    """True when ``suite`` uses the configured database itself (no database of its
    own could be made): a scenario then deletes the schedules it created."""
    url = suite.config.database_url
    return url is not None and url == backend.database_url


@contextmanager
def own_database(backend: Backend, label: str) -> Iterator[Backend]:
    """``backend`` with a fresh PostgreSQL database of its own (created next to the
    configured one, dropped afterwards); ``backend`` itself for SQLite, or where the
    configured user may not create databases."""
    if backend.database != "postgresql" or not backend.database_url:
        yield backend
        return
    url = sa.make_url(backend.database_url)
    safe = re.sub(r"[^a-z0-9_]", "_", label.lower())[:20]
    name = f"{(url.database or 'cronwave')[:24]}_{safe}_{uuid.uuid4().hex[:8]}"
    # Databases are made from the server's maintenance database, so the configured
    # one need not exist.
    engine = sa.create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except sa.exc.SQLAlchemyError:
        engine.dispose()
        yield backend
        return
    try:
        fresh = url.set(database=name).render_as_string(hide_password=False)
        yield replace(backend, database_url=fresh)
    finally:
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


def wait_leading(client: Client, timeout: timedelta = timedelta(seconds=30)) -> None:
    """Block until the suite's planner leads and has loaded the schedules, so the
    first fire a scenario plans is not spent on an election."""
    deadline = time.monotonic() + timeout.total_seconds()
    while time.monotonic() < deadline:
        if client.planner_status().leader:
            return
        time.sleep(0.05)
    raise TimeoutError(f"no planner led within {timeout.total_seconds():.0f}s")


def dispatch_lead(environ: Mapping[str, str] | None = None) -> timedelta:
    """How far ahead of a fire time the planner dispatches its run (the planner's
    ``CRONWAVE_DISPATCH_LEAD``, read the way the planner reads it)."""
    return PlannerSettings.from_env(environ).dispatch_lead
