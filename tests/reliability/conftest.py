"""Rigs of real processes (workflow-store, dispatcher, workers per pool) on a fresh
database (SQLite, and PostgreSQL when CRONWAVE_TEST_DATABASE_URL is set) and Redis."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from tests.helpers import eventually
from tests.reliability.support import Rig, job_processes, new_suite, stop_rig
from tests.workflow_store.support import StoreProcess

MakeRig = Callable[..., Rig]


@pytest.fixture
def make_rig(
    tmp_path: Path, database_url: str, redis_url: str, namespace: str
) -> Iterator[MakeRig]:
    """``make_rig(pools={"default": 2}, env={...})``: start the processes; every one
    is stopped by pid at the end, and no job process may outlive its worker."""
    rigs: list[Rig] = []

    def make(pools: Mapping[str, int] | None = None, env: Mapping[str, str] | None = None) -> Rig:
        suite = new_suite(
            tmp_path / f"rig{len(rigs)}",
            database_url,
            redis_url,
            namespace,
            pools or {"default": 1},
            env,
        )
        try:
            suite.start_service("workflow-store")
            suite.start_service("dispatcher")
            suite.start_workers()
        except BaseException:
            stop_rig(suite)
            raise
        rig = Rig(suite, namespace)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        rig.close()
        stop_rig(rig.suite)
    leftovers = [pid for rig in rigs for pid in rig.suite.pids()]
    assert not leftovers, f"processes left running: {leftovers}"
    eventually(
        lambda: not job_processes(namespace), timeout=10, what="job processes gone with workers"
    )


@pytest.fixture
def store(tmp_path: Path, database_url: str) -> Iterator[StoreProcess]:
    """One workflow-store process on a fresh database."""
    proc = StoreProcess(tmp_path / "store", database_url).start()
    try:
        yield proc
    finally:
        proc.stop()
    assert not proc.alive(), "store process left running"
