"""The workflow-store behind PgBouncer in transaction mode (Debian's pgbouncer, fewer
server connections than the store opens): with ``CRONWAVE_DATABASE_POOLER=transaction``
it keeps no session state, so its migrations and its runs go through whichever server
connection each transaction gets."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from cronwave_core.settings_pools import PoolSettings
from tests.backends.runs import logged_errors, runs_complete_exactly_once
from tests.conftest import scheduler_database
from tests.harness.backends import PgBouncer
from tests.harness.processes import ProcessTable
from tests.harness.suites import SuiteFactory
from workflow_store.db import create_engine

PG_URL = os.environ.get("CRONWAVE_TEST_DATABASE_URL", "")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not PG_URL, reason="PgBouncer fronts CRONWAVE_TEST_DATABASE_URL"),
]

THREADS = 6
STATEMENTS = 30  # each, the same statement: psycopg would prepare it after five
#: Schedules of the suite's test: enough to overlap transactions on the two server
#: connections.
SCHEDULES = 10


@pytest.fixture
def pgbouncer(tmp_path: Path) -> Iterator[PgBouncer]:
    table = ProcessTable("pgbouncer")
    bouncer = PgBouncer(tmp_path / "pgbouncer", table, PG_URL, server_connections=2)
    try:
        bouncer.start()
        yield bouncer
    finally:
        table.close([bouncer.stop])


@pytest.fixture
def empty_database(tmp_path: Path) -> Iterator[str]:
    """A PostgreSQL database of the test's own, never migrated: its name."""
    with scheduler_database("postgres", tmp_path, migrated=False) as url:
        yield str(sa.make_url(url).database)


@pytest.fixture
def database_url(pgbouncer: PgBouncer, empty_database: str) -> str:
    """The suite's database: the empty one, through PgBouncer."""
    return pgbouncer.url(empty_database)


def test_the_stores_engine_repeats_statements_through_transaction_pooling(
    pgbouncer: PgBouncer,
) -> None:
    # Given the store's engine through PgBouncer in transaction mode, told so
    pools = PoolSettings(database_pooler="transaction")
    engine = create_engine(pgbouncer.url("postgres"), instrument=False, pools=pools)
    errors: list[BaseException] = []

    def work() -> None:
        for i in range(STATEMENTS):
            try:
                with engine.begin() as conn:
                    query = sa.text("SELECT count(*) FROM pg_class WHERE relpages >= :n")
                    conn.execute(query, {"n": i}).scalar()
            except Exception as exc:
                errors.append(exc)

    # When threads run the same statement many times, their transactions spread over
    # PgBouncer's two server connections
    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        engine.dispose()

    # Then none of them fails: nothing was prepared on a server connection
    assert not any(thread.is_alive() for thread in threads)
    assert not errors, [str(e).splitlines()[0] for e in errors[:3]]


def test_a_suite_migrates_and_runs_exactly_once_through_pgbouncer(
    empty_database: str, make_suite: SuiteFactory
) -> None:
    # Given a suite whose store reaches an empty database only through PgBouncer in
    # transaction mode (it migrates it there, under a transaction's advisory lock)
    suite = make_suite(env={"CRONWAVE_DATABASE_POOLER": "transaction"})

    # When schedules fire every second, then their runs complete exactly once
    assert runs_complete_exactly_once(suite, "pgbouncer", schedules=SCHEDULES)
    # And no call of the store failed on the way (a prepared statement missing on the
    # server connection a transaction got is an internal error its caller retries)
    assert not logged_errors(suite, "workflow-store")

    # And the database was migrated through PgBouncer
    url = sa.make_url(PG_URL).set(drivername="postgresql+psycopg", database=empty_database)
    direct = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with direct.connect() as conn:
            assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        direct.dispose()
