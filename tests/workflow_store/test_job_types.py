"""RegisterJobType as a worker's stolen certificate would call it, over real gRPC: a
worker registers new job types and re-registers identical ones, but changing a
registered one's queue, limits, retry or financial flag needs an admin."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import grpc
import pytest
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as api_grpc

from cronwave_core.convert import td_to_duration
from tests.harness.store import StoreProcess, rpc_error
from tests.harness.tls import channel
from tests.helpers import fresh


@pytest.fixture
def as_worker(store: StoreProcess) -> Iterator[api_grpc.WorkflowStoreServiceStub]:
    """The store, called with a worker's certificate."""
    with channel(store.address, "worker") as worker:
        yield api_grpc.WorkflowStoreServiceStub(worker)


def billing(name: str, **changes: object) -> api.RegisterJobTypeRequest:
    """A job type like the billing demo's: its own queue, financial (no retry)."""
    fields: dict[str, object] = {
        "name": name,
        "duration_limit": td_to_duration(timedelta(minutes=30)),
        "heartbeat_timeout": td_to_duration(timedelta(seconds=3)),
        "queue": "billing",
        "financial": True,
        "retry": pb.RetryPolicy(maximum_attempts=1),
    }
    fields.update(changes)
    return api.RegisterJobTypeRequest(job_type=pb.JobType(**fields))  # type: ignore[arg-type]


def registered(stub: api_grpc.WorkflowStoreServiceStub, name: str) -> pb.JobType:
    listed = stub.ListJobTypes(api.ListJobTypesRequest(), timeout=10).job_types
    [job] = [j for j in listed if j.name == name]
    return job


def audited(stub: api_grpc.WorkflowStoreServiceStub) -> list[api.AuditEvent]:
    events = stub.ListAuditEvents(api.ListAuditEventsRequest(), timeout=10).events
    return [e for e in events if e.rpc == "RegisterJobType"]


def test_a_worker_registers_new_job_types_and_identical_ones_again(
    store: StoreProcess, as_worker: api_grpc.WorkflowStoreServiceStub
) -> None:
    # Given a job type a worker registered when it started
    name = fresh("billing.nightly")
    first = as_worker.RegisterJobType(billing(name), timeout=10).job_type

    # When that worker (or another of its pool) starts again with the same definition
    again = as_worker.RegisterJobType(billing(name), timeout=10).job_type

    # Then the job type is as it was, and only its creation was audited
    assert again == first == registered(store.stub(), name)
    assert first.queue == "billing" and first.financial
    assert [e.actor for e in audited(store.stub())] == ["service:worker"]


def test_a_workers_certificate_cannot_change_a_registered_job_type(
    store: StoreProcess, as_worker: api_grpc.WorkflowStoreServiceStub
) -> None:
    # Given the billing job type, registered by its workers
    name = fresh("billing.nightly")
    before = as_worker.RegisterJobType(billing(name), timeout=10).job_type

    # When a worker's certificate registers it again on a queue nobody reads, not
    # financial, with retries, and with a longer limit
    err = rpc_error(
        as_worker.RegisterJobType,
        billing(
            name,
            queue="nobody-reads-this",
            financial=False,
            retry=pb.RetryPolicy(maximum_attempts=5),
            duration_limit=td_to_duration(timedelta(hours=5)),
        ),
        timeout=10,
    )

    # Then it is refused, naming the first field changed and who may change it, and
    # the job type is as it was
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    assert err.details().startswith(
        f"job_type.duration_limit: job type '{name}' is registered with 0:30:00, not 5:00:00 "
        "(and job_type.retry.maximum_attempts, job_type.queue, job_type.financial); "
        "service worker registers new job types and re-registers identical ones"
    ), err.details()
    assert "needs an admin" in err.details()
    assert registered(store.stub(), name) == before
    # and so is a change of one field alone
    alone = rpc_error(as_worker.RegisterJobType, billing(name, financial=False), timeout=10)
    assert alone.code() == grpc.StatusCode.PERMISSION_DENIED
    assert alone.details().startswith("job_type.financial: ")


def test_an_admin_changes_a_registered_job_type(
    store: StoreProcess, as_worker: api_grpc.WorkflowStoreServiceStub
) -> None:
    # Given the billing job type, registered by its workers
    name = fresh("billing.nightly")
    as_worker.RegisterJobType(billing(name), timeout=10)

    # When an admin registers it with a longer heartbeat timeout (the harness's stub
    # calls RegisterJobType with the local administrator's certificate)
    admin = store.stub()
    changed = admin.RegisterJobType(
        billing(name, heartbeat_timeout=td_to_duration(timedelta(seconds=30))), timeout=10
    ).job_type

    # Then the change is made and audited as the admin's; the workers that carry it
    # register it as it now is
    assert changed.heartbeat_timeout.ToTimedelta() == timedelta(seconds=30)
    assert registered(admin, name) == changed
    assert [e.actor for e in audited(admin)] == ["user:local-admin", "service:worker"]
    as_worker.RegisterJobType(
        billing(name, heartbeat_timeout=td_to_duration(timedelta(seconds=30))), timeout=10
    )
