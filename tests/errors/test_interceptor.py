"""What a caller sees when a servicer fails: the bootstrap's error interceptor, over
real gRPC on loopback.

An exception nobody meant is INTERNAL with a correlation id and nothing else, and the
service's log holds the traceback under that id; a CronwaveError keeps its status,
message and kind, whichever servicer raised it (a status a servicer sets itself, as the
dispatcher relays the store's, is kept too: tests/sdk/test_client_suite.py); a body that
does not decode is INVALID_ARGUMENT, on the plain path and on the traced one. The last
test does the same to a real workflow-store process whose database stops taking
connections.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
import sqlalchemy as sa
from cronwave_proto.v1 import cron_planner_service_pb2 as planner_pb
from cronwave_proto.v1 import cron_planner_service_pb2_grpc as planner_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as api
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as api_grpc

from cron_planner.app import PlannerStatus
from cron_planner.servicer import CronPlannerServicer
from cronwave_core.bootstrap import RunningServer, Service, full_names
from cronwave_core.errors import ScheduleNotFound, Unimplemented
from cronwave_core.status import error_from_rpc
from cronwave_core.suite import free_port
from tests.conftest import PG_URL, _pg_admin_url
from tests.fuzz.support import leaks
from tests.harness.store import StoreProcess
from tests.harness.tls import as_identity, hop_channel
from tests.helpers import eventually, fresh
from workflow_store.servicer import WorkflowStoreServicer

CORRELATED = re.compile(
    r"^internal error \(correlation id ([0-9a-f]{16})\); the detail is in the "
    r"workflow-store's log$"
)
# What the store's database driver would say: SQL and a path, for the log only.
LEAK = (
    "(psycopg.DataError) PostgreSQL text fields cannot contain NUL (0x00) bytes "
    "[SQL: SELECT schedules.id FROM schedules] /work/x/.venv/lib/site-packages/psycopg"
)
TRACEPARENT = (("traceparent", "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"),)


class BrokenSchedules:
    """Schedules whose reads fail the way a database driver does, and whose one known
    schedule is missing."""

    def get_schedule(self, schedule_id: str) -> Any:
        if schedule_id == "gone":
            raise ScheduleNotFound(schedule_id)
        raise RuntimeError(LEAK)

    def watch(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        raise RuntimeError(LEAK)
        yield  # a generator, as Schedules.watch is


class QuietChanges:
    def wake_watchers(self) -> None:
        pass


class BrokenStore:
    """A store whose schedules are ``BrokenSchedules``."""

    schedules = BrokenSchedules()
    changes = QuietChanges()


def _status() -> PlannerStatus:
    raise AssertionError("not asked in these tests")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """The store's and the planner's servicers behind the bootstrap, traced."""
    port = free_port()

    def register(srv: grpc.Server) -> None:
        api_grpc.add_WorkflowStoreServiceServicer_to_server(
            WorkflowStoreServicer(BrokenStore()),  # type: ignore[arg-type]
            srv,
        )
        planner_grpc.add_CronPlannerServiceServicer_to_server(CronPlannerServicer(_status), srv)

    service = Service(
        name="workflow-store",
        address=f"127.0.0.1:{port}",
        register=register,
        service_names=full_names([api.DESCRIPTOR, planner_pb.DESCRIPTOR]),
    )
    running = RunningServer(
        service, timedelta(seconds=1), traced=True, tls=as_identity("workflow-store")
    )
    running.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        running.stop()


def rpc_error(call: Any, request: Any, **kwargs: Any) -> grpc.RpcError:
    """The error a unary call ends with (a stream's: ``stream=True``)."""
    stream = kwargs.pop("stream", False)
    with pytest.raises(grpc.RpcError) as info:
        answer = call(request, timeout=10, **kwargs)
        if stream:
            list(answer)
    return info.value


def test_an_unexpected_error_is_internal_with_a_correlation_id_and_logged(
    server: str, caplog: pytest.LogCaptureFixture
) -> None:
    with hop_channel(None, server) as channel:
        stub = api_grpc.WorkflowStoreServiceStub(channel)
        for what, call, request in [
            ("unary", stub.GetSchedule, api.GetScheduleRequest(schedule_id="nightly")),
            ("stream", stub.WatchSchedules, api.WatchSchedulesRequest()),
        ]:
            # When the servicer raises an exception nobody meant
            with caplog.at_level(logging.ERROR, logger="cronwave"):
                err = rpc_error(call, request, stream=what == "stream")

            # Then the caller sees INTERNAL, a correlation id and no internals
            assert err.code() == grpc.StatusCode.INTERNAL, what
            found = CORRELATED.match(err.details() or "")
            assert found, (what, err.details())
            assert not leaks(err.details(), []), err.details()
            # And the log has the traceback under the same id
            logged = [r for r in caplog.records if found.group(1) in r.getMessage()]
            assert len(logged) == 1, what
            assert logged[0].exc_info is not None and LEAK in str(logged[0].exc_info[1])


def test_a_cronwave_error_and_a_status_the_servicer_set_are_kept(server: str) -> None:
    with hop_channel(None, server) as channel:
        store = api_grpc.WorkflowStoreServiceStub(channel)
        missing = rpc_error(store.GetSchedule, api.GetScheduleRequest(schedule_id="gone"))
        planner = planner_grpc.CronPlannerServiceStub(channel)
        aborted = rpc_error(planner.Backfill, planner_pb.BackfillRequest(schedule_id="s"))

    assert missing.code() == grpc.StatusCode.NOT_FOUND
    assert missing.details() == ScheduleNotFound("gone").message
    assert aborted.code() == grpc.StatusCode.UNIMPLEMENTED
    assert aborted.details() == "this planner does not backfill"


def test_a_refusal_keeps_its_kind_whichever_servicer_raised_it(server: str) -> None:
    # When the store refuses an unknown schedule and the planner a backfill it cannot do
    with hop_channel(None, server) as channel:
        store = api_grpc.WorkflowStoreServiceStub(channel)
        missing = rpc_error(store.GetSchedule, api.GetScheduleRequest(schedule_id="gone"))
        planner = planner_grpc.CronPlannerServiceStub(channel)
        refused = rpc_error(planner.Backfill, planner_pb.BackfillRequest(schedule_id="s"))

    # Then the caller raises each as its own class, from the status details alone
    assert type(error_from_rpc(missing)) is ScheduleNotFound
    assert type(error_from_rpc(refused)) is Unimplemented


@pytest.mark.parametrize("metadata", [(), TRACEPARENT], ids=["plain", "traced"])
def test_a_body_that_does_not_decode_is_an_invalid_argument(
    server: str, metadata: tuple[tuple[str, str], ...]
) -> None:
    with hop_channel(None, server) as channel:
        raw = channel.unary_unary(
            "/cronwave.v1.WorkflowStoreService/GetSchedule", request_serializer=None
        )
        err = rpc_error(raw, b"\x0a\xff\xff\xff\xff\x0f", metadata=metadata)

    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").startswith(
        "request: the body is not a valid serialized cronwave.v1.GetScheduleRequest message"
    )


@pytest.mark.slow
@pytest.mark.skipif(
    not PG_URL, reason="the fault is PostgreSQL refusing connections (CRONWAVE_TEST_DATABASE_URL)"
)
def test_a_store_whose_database_is_gone_answers_unavailable_and_logs_why(tmp_path: Path) -> None:
    # Given a real store on its own PostgreSQL database
    admin = sa.create_engine(_pg_admin_url(), isolation_level="AUTOCOMMIT")
    name = fresh("cw_gone").replace("-", "_")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = _pg_admin_url().set(database=name).render_as_string(hide_password=False)
    proc = StoreProcess(tmp_path / "store", url).start()
    try:
        stub = proc.stub()
        stub.ListSchedules(api.ListSchedulesRequest(), timeout=10)

        # When the database stops taking connections and drops the store's
        with admin.connect() as conn:
            conn.execute(sa.text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
            conn.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n"
                ),
                {"n": name},
            )
        err = rpc_error(stub.GetSchedule, api.GetScheduleRequest(schedule_id="nightly"))

        # Then the caller sees UNAVAILABLE (worth a retry, nothing written), no internals,
        # and the log says why
        assert err.code() == grpc.StatusCode.UNAVAILABLE, err.details()
        assert "database did not answer" in (err.details() or "")
        assert not leaks(err.details(), []), err.details()

        def logged() -> bool:
            log = proc.log_path.read_text(errors="replace")
            # the driver's error, named: the connection cut (AdminShutdown) when the
            # first call found it so, or the refused reconnect (OperationalError)
            return "database did not answer" in log and "(psycopg." in log

        eventually(logged, timeout=10, what="the cause logged")
    finally:
        try:
            proc.table.close([proc.stop])
        finally:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()


def test_the_correlation_id_is_new_for_every_failure(server: str) -> None:
    with hop_channel(None, server) as channel:
        stub = api_grpc.WorkflowStoreServiceStub(channel)
        ids = set()
        for _ in range(3):
            err = rpc_error(stub.GetSchedule, api.GetScheduleRequest(schedule_id="nightly"))
            found = CORRELATED.match(err.details() or "")
            assert found, err.details()
            ids.add(found.group(1))
    assert len(ids) == 3
