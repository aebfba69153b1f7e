"""A real workflow-store process per test, on a free loopback port and a fresh database
(SQLite, and PostgreSQL when CRONWAVE_TEST_DATABASE_URL is set)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cronwave.v1 import workflow_store_service_pb2_grpc as api_grpc
from tests.workflow_store.support import SERVICE_DIR, StoreProcess

StartStore = Callable[..., StoreProcess]


@pytest.fixture
def start_store(tmp_path: Path, database_url: str) -> Iterator[StartStore]:
    """Start store processes on the test's database; all are stopped at the end."""
    started: list[StoreProcess] = []

    def start(port: int | None = None) -> StoreProcess:
        proc = StoreProcess(tmp_path / "store", database_url, port)
        started.append(proc)
        return proc.start()

    yield start
    for proc in started:
        proc.stop()
    assert not [p for p in started if p.alive()], "store processes left running"


@pytest.fixture
def store(start_store: StartStore) -> StoreProcess:
    return start_store()


@pytest.fixture
def stub(store: StoreProcess) -> api_grpc.WorkflowStoreServiceStub:
    return store.stub()


# In-process tests (migrations) import the package even when the editable install
# predates it.
if importlib.util.find_spec("workflow_store") is None:
    sys.path.insert(0, str(SERVICE_DIR))
