"""Fixtures of the billing tests: databases beside the test's own (same backend, so
PostgreSQL in CI), a payment-gateway process, and a billing suite of real processes."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import _pg_admin_url
from tests.harness.gateway import BillingSuite, GatewayProcess
from tests.harness.processes import ProcessTable

NewDatabase = Callable[[str], str]


@pytest.fixture
def new_database(database_url: str, tmp_path: Path) -> Iterator[NewDatabase]:
    """``new_database(name)``: a fresh empty database of ``database_url``'s backend
    (a SQLite file, or a PostgreSQL database dropped when the test ends)."""
    created: list[str] = []
    admin = _pg_admin_url() if not database_url.startswith("sqlite") else None
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT") if admin else None

    def make(name: str) -> str:
        if engine is None or admin is None:
            return f"sqlite:///{tmp_path / (name + '.db')}"
        db = f"cw_test_{name}_{uuid.uuid4().hex[:8]}"
        with engine.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{db}"'))
        created.append(db)
        return admin.set(database=db).render_as_string(hide_password=False)

    yield make
    if engine is not None:
        with engine.connect() as conn:
            for db in created:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        engine.dispose()


StartGateway = Callable[..., GatewayProcess]


@pytest.fixture
def start_gateway(tmp_path: Path, new_database: NewDatabase) -> Iterator[StartGateway]:
    """``start_gateway(name="gateway", test_hooks=False)``: a payment-gateway process
    on a free port with a fresh database of its own; every one is stopped when the test
    ends, and none may be left."""
    table = ProcessTable("start_gateway's payment-gateway processes")
    started: list[GatewayProcess] = []

    def start(name: str = "gateway", test_hooks: bool = False) -> GatewayProcess:
        proc = GatewayProcess(
            tmp_path / name,
            new_database(name.replace("-", "_")),
            test_hooks=test_hooks,
            table=table,
        )
        started.append(proc)
        return proc.start()

    yield start
    table.close(proc.stop for proc in started)


@pytest.fixture
def gateway(start_gateway: StartGateway) -> GatewayProcess:
    """A payment-gateway process started for tests: its drills can be armed
    (``SetFaults``)."""
    return start_gateway(test_hooks=True)


@pytest.fixture
def billing_suite(
    tmp_path: Path,
    database_url: str,
    redis_url: str,
    namespace: str,
    new_database: NewDatabase,
) -> Iterator[Callable[..., BillingSuite]]:
    """``billing_suite(test_hooks=False, **env)``: workflow-store, payment-gateway and
    dispatcher (with its sweeper), no worker yet; every process is stopped when the test
    ends, and none (job processes included) may be left. ``test_hooks``: started for
    drills (``SetFaults``, the crash drill)."""
    table = ProcessTable("billing_suite's processes")
    started: list[BillingSuite] = []

    def make(test_hooks: bool = False, **env: str) -> BillingSuite:
        suite = BillingSuite(
            tmp_path / f"suite{len(started)}",
            database_url=database_url,
            redis_url=redis_url,
            namespace=namespace,
            billing_url=new_database("billing"),
            gateway_url=new_database("gateway"),
            env=env,
            test_hooks=test_hooks,
            table=table,
        )
        started.append(suite)
        return suite.start()

    yield make
    table.close(suite.stop for suite in started)
