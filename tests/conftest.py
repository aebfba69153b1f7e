"""Fixtures shared by every test: a fresh database (SQLite, and PostgreSQL when
CRONWAVE_TEST_DATABASE_URL is set), Redis (CRONWAVE_TEST_REDIS_URL, or an embedded
redis-server for the session), and whole suites of real processes on loopback.

When CRONWAVE_TEST_DATABASE_URL / CRONWAVE_TEST_REDIS_URL are set (CI sets both), a
server that is down fails the tests; it never skips them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import pytest
import redis
import sqlalchemy as sa

from cronwave_core.suite import Suite, SuiteConfig, find_redis_server, free_port, wait_redis

T = TypeVar("T")

PG_URL = os.environ.get("CRONWAVE_TEST_DATABASE_URL", "")
REDIS_URL = os.environ.get("CRONWAVE_TEST_REDIS_URL", "")

BACKENDS = ["sqlite", "postgres"] if PG_URL else ["sqlite"]


# Test folders whose every database test runs on both backends.
BOTH_BACKEND_FOLDERS = {"workflow_store", "spine", "failover"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "serial: runs alone after the parallel part of the suite (timing truth)"
    )
    config.addinivalue_line(
        "markers",
        "both_backends: run on SQLite and PostgreSQL (when configured); other tests that "
        "need a database run once, on PostgreSQL when configured, else SQLite",
    )


# Tests whose figures a busy machine would distort: they run after the parallel
# part of the suite, alone (see the Makefile's pytest target).
SERIAL_FILES = {"test_truth.py"}


# Files whose tests take minutes each: each starts first on a worker of its own, so
# that the parallel part neither ends with one of them still running alone nor runs
# them one after another on one worker.
LONG_FILES = (
    "test_many_failovers.py",
    "test_fault_matrix.py",
    "test_kill_recovery.py",
    "test_graceful_stop.py",
    "test_runner_smoke.py",
)


def pytest_itemcollected(item: pytest.Item) -> None:
    if Path(str(item.path)).name in SERIAL_FILES:
        item.add_marker(pytest.mark.serial)


@pytest.hookimpl(trylast=True)  # once -m and -k have deselected what they do
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    items[:] = long_tests_first(
        items, lambda item: Path(str(item.path)).name in LONG_FILES, workers
    )


def long_tests_first(items: Sequence[T], is_long: Callable[[T], bool], workers: int) -> list[T]:
    """``items`` reordered so that, of the contiguous shares pytest-xdist's worksteal
    scheduler first hands its ``workers`` (of the tests still unsent, an even share to
    each worker in turn), each begins with a long test, the long ones spread evenly.
    The other tests keep their order."""
    long = [item for item in items if is_long(item)]
    rest = [item for item in items if not is_long(item)]
    if workers <= 1:
        return long + rest
    out: list[T] = []
    for worker in range(workers):
        share = (len(items) - len(out)) // (workers - worker)
        starts = long[worker::workers]
        take = max(share - len(starts), 0)
        out += starts + rest[:take]
        del rest[:take]
    return out + rest


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize the database backend. The exactly-once core (store, spine, failover)
    runs on both; everything else on the production one when it is configured (CI:
    PostgreSQL), else SQLite — which keeps the suite inside its time budget."""
    if "backend" in metafunc.fixturenames:
        folder = Path(str(metafunc.definition.path)).parent.name
        both = (
            folder in BOTH_BACKEND_FOLDERS
            or metafunc.definition.get_closest_marker("both_backends") is not None
        )
        metafunc.parametrize("backend", BACKENDS if both else BACKENDS[-1:])


def _pg_admin_url() -> sa.URL:
    url = sa.make_url(PG_URL)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url


@pytest.fixture
def database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty scheduler database for one test."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'cronwave.db'}"
        return
    admin = _pg_admin_url()
    name = f"cw_test_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:  # a refused connection fails the test: CI wants PG
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Redis for the session: the configured one, or an embedded redis-server."""
    if REDIS_URL:
        client = redis.Redis.from_url(REDIS_URL, socket_timeout=5)
        client.ping()  # down = failure, not a skip
        client.close()
        yield REDIS_URL
        return
    import subprocess

    port = free_port()
    workdir = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [find_redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_redis(port, timedelta(seconds=20))
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def namespace() -> str:
    """A Redis key namespace no other test uses."""
    return f"cwt{uuid.uuid4().hex[:10]}"


SEED_VARIABLE = "CRONWAVE_TEST_SEED"


@pytest.fixture
def drill_seed(request: pytest.FixtureRequest) -> int:
    """The seed of a randomised drill: ``CRONWAVE_TEST_SEED`` when set, else a fresh
    one. It is printed first, and a failing test's report says how to replay it."""
    raw = os.environ.get(SEED_VARIABLE, "")
    seed = int(raw) if raw else int.from_bytes(os.urandom(4), "big")
    request.node.drill_seed = seed  # type: ignore[attr-defined]
    print(f"\n{request.node.nodeid}: seed {seed} ({SEED_VARIABLE}={seed} replays it)")
    return seed


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    seed = getattr(item, "drill_seed", None)
    if seed is not None and report.failed:
        report.sections.append(
            ("replay", f"{SEED_VARIABLE}={seed} .venv/bin/python -m pytest '{item.nodeid}'")
        )


SuiteFactory = Callable[..., Suite]


@pytest.fixture
def make_suite(
    tmp_path: Path, database_url: str, redis_url: str, namespace: str
) -> Iterator[SuiteFactory]:
    """Start whole suites of real processes on free loopback ports; every process
    is stopped by pid when the test ends, whatever happened."""
    started: list[Suite] = []

    def make(**overrides: object) -> Suite:
        env = {"CRONWAVE_NAMESPACE": namespace, **overrides.pop("env", {})}  # type: ignore[dict-item]
        config = SuiteConfig(
            data_dir=Path(overrides.pop("data_dir", tmp_path / f"suite{len(started)}")),  # type: ignore[arg-type]
            database_url=database_url,
            redis_url=redis_url,
            ports={},
            env=env,
            grace=timedelta(seconds=2),
            **overrides,  # type: ignore[arg-type]
        )
        suite = Suite(config)
        started.append(suite)
        return suite.start()

    yield make
    for suite in started:
        suite.stop()
    leftovers = [pid for suite in started for pid in suite.pids()]
    assert not leftovers, f"processes left running: {leftovers}"
