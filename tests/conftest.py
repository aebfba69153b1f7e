"""Fixtures shared by every test: a fresh database (SQLite, and PostgreSQL when
CRONWAVE_TEST_DATABASE_URL is set) and a fresh namespace. The fixtures that start
processes are those of ``tests.harness`` (Redis, store, gateway, suites, clusters and
rigs), registered here for every test; each fails a test that leaves a process behind.

When CRONWAVE_TEST_DATABASE_URL / CRONWAVE_TEST_REDIS_URL are set (CI sets both), a
server that is down fails the tests; it never skips them. With CRONWAVE_CI set (CI),
a skipped or xfailed test fails the run unless tests/skips_allowed.txt lists it
(``tests.skip_guard``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import pytest
import sqlalchemy as sa

from cronwave_core.forked import use_fork_server
from cronwave_core.security.pki import ensure_pki
from cronwave_core.suite import OWN_PORTS_VAR, own_port_range
from tests import skip_guard
from tests.harness.cli import build_commands_once
from tests.helpers import fresh_namespace

T = TypeVar("T")

PG_URL = os.environ.get("CRONWAVE_TEST_DATABASE_URL", "")
pytest_plugins = [
    "tests.harness.redis",
    "tests.harness.store",
    "tests.harness.suites",
    "tests.harness.cluster",
]

BACKENDS = ["sqlite", "postgres"] if PG_URL else ["sqlite"]


# Test folders whose every database test runs on both backends.
BOTH_BACKEND_FOLDERS = {"workflow_store", "spine", "failover"}


def _own_ports_of_this_process() -> None:
    """Each pytest-xdist process picks its ports (``free_port``, and so every suite it
    starts) from a slice of the own range that no other process of this run picks
    from: a port one process picked is bound by its service only a moment later, and
    another process must not pick it meanwhile. A run without xdist keeps the range."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not (worker.startswith("gw") and worker[2:].isdigit()):
        return
    count = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1), 1)
    lowest, highest = own_port_range()
    width = (highest - lowest + 1) // count
    start = lowest + int(worker[2:]) * width
    os.environ[OWN_PORTS_VAR] = f"{start}-{start + width - 1}"


def pytest_configure(config: pytest.Config) -> None:
    _own_ports_of_this_process()
    config.addinivalue_line(
        "markers",
        "serial: runs alone after the parallel part of the suite (timing truth, or the "
        "fixed ports of `cronwave up`)",
    )
    config.addinivalue_line(
        "markers",
        "both_backends: run on SQLite and PostgreSQL (when configured); other tests that "
        "need a database run once, on PostgreSQL when configured, else SQLite",
    )
    config.addinivalue_line(
        "markers",
        "postgres_only: run once, on PostgreSQL, even in a folder of both backends (the "
        "test also skips itself when PostgreSQL is not configured)",
    )
    skip_guard.install(config)
    build_commands_once()
    # The suites this test process starts fork their services from one fork server
    # that imported their libraries once (cronwave_core.forked), as every suite does;
    # turned on here for the tests that fork a module without a suite. `cronwave up`
    # run by a test starts its own fork server, as users' does.
    use_fork_server()
    # One CA per test process: every suite a test starts uses it (SuiteConfig.tls_dir
    # defaults to CRONWAVE_TLS_DIR), and so does every channel a test opens, as the
    # local administrator unless it asks for a service's certificate.
    tls_dir = Path(tempfile.mkdtemp(prefix="cronwave-tls-"))
    ensure_pki(tls_dir)
    os.environ["CRONWAVE_TLS_DIR"] = str(tls_dir)
    _TLS_DIRS.append(tls_dir)
    # The default data dir is per user ($XDG_STATE_HOME/cronwave): the tests get their
    # own, never the user's, where a suite of theirs may be running.
    state_home = Path(tempfile.mkdtemp(prefix="cronwave-state-"))
    os.environ["XDG_STATE_HOME"] = str(state_home)
    _STATE_HOMES.append(state_home)


_TLS_DIRS: list[Path] = []
_STATE_HOMES: list[Path] = []


def pytest_unconfigure(config: pytest.Config) -> None:
    _drop_templates()
    for tls_dir in _TLS_DIRS:
        shutil.rmtree(tls_dir, ignore_errors=True)
    for state_home in _STATE_HOMES:
        shutil.rmtree(state_home, ignore_errors=True)


# Tests whose figures a busy machine would distort: they run after the parallel
# part of the suite, alone (see the Makefile's pytest target). The run span's share of
# its trace is one: under load another span of a fast run's trace outlasted it once.
# A planner's call as a dead member lapses is timed to its 6-s window: under the
# parallel part's load it missed it once.
# Named by their path under tests/: tests/bench/test_truth.py holds no trial to being
# named right (the bench's table does), so it runs with the others.
SERIAL_FILES = {
    "tracing/test_truth.py",
    "tracing/test_truth_dns.py",
    "tracing/test_run_spans.py",
    "sharding/test_member_lapse.py",
}


# Files whose tests take minutes each: each starts first on a worker of its own, so
# that the parallel part neither ends with one of them still running alone nor runs
# them one after another on one worker.
LONG_FILES = (
    "test_many_failovers.py",
    "test_fault_matrix.py",
    "test_replica_fault_matrix.py",
    "test_kill_recovery.py",
    "test_graceful_stop.py",
    "test_runner_smoke.py",
)


def pytest_itemcollected(item: pytest.Item) -> None:
    path = Path(str(item.path))
    if f"{path.parent.name}/{path.name}" in SERIAL_FILES:
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
    folder = Path(str(metafunc.definition.path)).parent.name
    marked = metafunc.definition.get_closest_marker
    both = marked("postgres_only") is None and (
        folder in BOTH_BACKEND_FOLDERS or marked("both_backends") is not None
    )
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS if both else BACKENDS[-1:])
    if "module_backend" in metafunc.fixturenames:  # a module's shared database
        metafunc.parametrize("module_backend", BACKENDS if both else BACKENDS[-1:], scope="module")


def _pg_admin_url() -> sa.URL:
    url = sa.make_url(PG_URL)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url


@contextlib.contextmanager
def scheduler_database(backend: str, directory: Path, migrated: bool = True) -> Iterator[str]:
    """A fresh scheduler database: a SQLite file in ``directory``, or a PostgreSQL
    database of its own, dropped at the end. ``migrated``: a copy of a database this
    test process migrated once (its store starts on it as on any database at the
    newest migration, without migrating); else empty."""
    if backend == "sqlite":
        url = f"sqlite:///{directory / 'cronwave.db'}"
        if migrated:
            shutil.copyfile(_sqlite_template(), directory / "cronwave.db")
        yield url
        return
    admin = _pg_admin_url()
    name = f"cw_test_{uuid.uuid4().hex[:12]}"
    template = f' TEMPLATE "{_pg_template()}"' if migrated else ""
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:  # a refused connection fails the test: CI wants PG
        conn.execute(sa.text(f'CREATE DATABASE "{name}"{template}'))
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


_TEMPLATES: dict[str, str] = {}


def _migrate(url: str) -> None:
    from workflow_store.db import create_engine, migrate

    engine = create_engine(url, instrument=False)
    try:
        migrate(engine)
        if engine.dialect.name == "sqlite":  # everything in the main file, to be copied
            with engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        engine.dispose()


def _sqlite_template() -> Path:
    """This test process's migrated SQLite database, made on first use."""
    if "sqlite" not in _TEMPLATES:
        path = Path(tempfile.mkdtemp(prefix="cronwave-template-")) / "cronwave.db"
        _migrate(f"sqlite:///{path}")
        _TEMPLATES["sqlite"] = str(path)
    return Path(_TEMPLATES["sqlite"])


def _pg_template() -> str:
    """This test process's migrated PostgreSQL database (fresh ones are copies of it),
    made on first use and dropped when the process ends."""
    if "postgres" not in _TEMPLATES:
        admin = _pg_admin_url()
        name = f"cw_template_{uuid.uuid4().hex[:12]}"
        engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        finally:
            engine.dispose()
        _migrate(admin.set(database=name).render_as_string(hide_password=False))
        _TEMPLATES["postgres"] = name
    return _TEMPLATES["postgres"]


def _drop_templates() -> None:
    if "sqlite" in _TEMPLATES:
        shutil.rmtree(Path(_TEMPLATES["sqlite"]).parent, ignore_errors=True)
    if "postgres" in _TEMPLATES:
        engine = sa.create_engine(_pg_admin_url(), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(
                    sa.text(f'DROP DATABASE IF EXISTS "{_TEMPLATES["postgres"]}" WITH (FORCE)')
                )
        finally:
            engine.dispose()
    _TEMPLATES.clear()


@pytest.fixture
def database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A fresh scheduler database for one test, at the newest migration."""
    with scheduler_database(backend, tmp_path) as url:
        yield url


@pytest.fixture
def empty_database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty scheduler database for one test (never migrated)."""
    with scheduler_database(backend, tmp_path, migrated=False) as url:
        yield url


@pytest.fixture(scope="module")
def module_database_url(
    module_backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A fresh scheduler database that a module's tests share (per backend, chosen as
    for ``database_url``), at the newest migration."""
    with scheduler_database(module_backend, tmp_path_factory.mktemp("db")) as url:
        yield url


@pytest.fixture
def namespace() -> str:
    """A Redis key namespace no other test uses."""
    return fresh_namespace()


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
