"""Suites of real processes on loopback (``cronwave_core.suite.Suite``, the one
``cronwave up`` and the benchmarks use), with every process they start recorded in a
``ProcessTable``, and the fixtures that start them."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from cronwave_core.suite import Proc, Suite, SuiteConfig
from tests.harness.processes import ProcessTable, raise_all
from tests.helpers import fresh_namespace


class TrackedSuite(Suite):
    """A ``Suite`` whose every process (restarts and replicas too) is recorded in
    ``table``, and whose ``stop`` tries every process even when one fails to stop."""

    def __init__(self, config: SuiteConfig, table: ProcessTable) -> None:
        super().__init__(config)
        self.table = table

    def _spawn(self, proc: Proc) -> None:
        super()._spawn(proc)
        assert proc.popen is not None
        self.table.track(proc.popen)

    def stop(self) -> None:
        """Stop everything this suite started, tier by tier as ``Suite.stop`` does,
        trying every process even when one fails to stop; then raise what failed."""
        errors = [error for tier in self.stop_order() for error in self.stop_procs(tier)]
        raise_all(errors, "stopping the suite")

    def resume_all(self) -> None:
        """SIGCONT to every process group of the suite: a group that was SIGSTOPped
        must be able to act on SIGTERM."""
        for proc in self.procs.values():
            if proc.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGCONT)


SuiteFactory = Callable[..., Suite]


def _tracked_suite(
    table: ProcessTable,
    data_dir: Path,
    database_url: str,
    redis_url: str,
    namespace: str,
    overrides: dict[str, object],
) -> TrackedSuite:
    """A suite of the tests' settings (free ports, a 2-s grace, its own namespace)
    with ``overrides``, its processes recorded in ``table``; not started yet."""
    env = {"CRONWAVE_NAMESPACE": namespace, **overrides.pop("env", {})}  # type: ignore[dict-item]
    config = SuiteConfig(
        data_dir=data_dir,
        database_url=database_url,
        redis_url=redis_url,
        ports={},
        env=env,
        grace=timedelta(seconds=2),
        **overrides,  # type: ignore[arg-type]
    )
    return TrackedSuite(config, table)


@pytest.fixture
def make_suite(
    tmp_path: Path, database_url: str, redis_url: str, namespace: str
) -> Iterator[SuiteFactory]:
    """Start whole suites of real processes on free loopback ports; every process
    is stopped by pid when the test ends, whatever happened, and none may be left."""
    table = ProcessTable("make_suite's processes")
    started: list[Suite] = []

    def make(**overrides: object) -> Suite:
        data_dir = Path(overrides.pop("data_dir", tmp_path / f"suite{len(started)}"))  # type: ignore[arg-type]
        suite = _tracked_suite(table, data_dir, database_url, redis_url, namespace, overrides)
        started.append(suite)
        return suite.start()

    yield make
    table.close(suite.stop for suite in started)


@pytest.fixture(scope="module")
def shared_suite(
    tmp_path_factory: pytest.TempPathFactory, module_database_url: str, redis_url: str
) -> Iterator[SuiteFactory]:
    """``make_suite`` for a module whose tests only read a suite or change what they
    made themselves (under fresh ids): the module's first call starts the suite, and
    every later call with the same settings gets it (of one pytest worker); it is
    stopped by pid when the module ends. One suite per module: its database is the
    module's, so other settings are refused."""
    table = ProcessTable("shared_suite's processes")
    shared: dict[str, Suite] = {}  # the settings' repr -> the suite, at most one

    def make(**overrides: object) -> Suite:
        settings = repr(sorted(overrides.items()))
        if not shared:
            data_dir = tmp_path_factory.mktemp("shared-suite")
            suite = _tracked_suite(
                table, data_dir, module_database_url, redis_url, fresh_namespace(), overrides
            )
            shared[settings] = suite
            suite.start()
        if settings not in shared:
            raise AssertionError(f"shared_suite already serves {next(iter(shared))}")
        return shared[settings]

    yield make
    table.close(suite.stop for suite in shared.values())


def services_suite(
    table: ProcessTable, directory: Path, redis_url: str, env: dict[str, str]
) -> TrackedSuite:
    """A suite whose services a test starts one by one (``start_service``), on a
    SQLite file of its own in ``directory``, with ``env`` (its namespace included)."""
    return TrackedSuite(
        SuiteConfig(
            data_dir=directory / "suite",
            database_url=f"sqlite:///{directory / 'cronwave.db'}",
            redis_url=redis_url,
            ports={},
            env=env,
            grace=timedelta(seconds=2),
            start_timeout=timedelta(seconds=30),
        ),
        table,
    )


@pytest.fixture
def services(tmp_path: Path, redis_url: str, namespace: str) -> Iterator[Suite]:
    """``services_suite`` for one test."""
    table = ProcessTable("the services' processes")
    suite = services_suite(table, tmp_path, redis_url, {"CRONWAVE_NAMESPACE": namespace})
    yield suite
    table.close([suite.stop])
