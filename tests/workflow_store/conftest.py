"""A real workflow-store process per test (``tests.harness.store``'s ``store``), on a
free loopback port and a fresh database (SQLite, and PostgreSQL when
CRONWAVE_TEST_DATABASE_URL is set)."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as api_grpc

from tests.harness.store import SERVICE_DIR, StoreProcess


@pytest.fixture
def stub(store: StoreProcess) -> api_grpc.WorkflowStoreServiceStub:
    return store.stub()


# In-process tests (migrations) import the package even when the editable install
# predates it.
if importlib.util.find_spec("workflow_store") is None:
    sys.path.insert(0, str(SERVICE_DIR))
