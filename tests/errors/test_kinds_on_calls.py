"""Each kind of error the SDK exports is raised, as its own class with its attributes,
by a real call that causes it: the SDK's ``Client`` against a real workflow-store
process (mutual TLS on loopback), and the store's stub where no SDK call can cause
it (a fencing token, an attempt token), read as the SDK reads every failed call
(``error_from_rpc``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from cronwave_proto.v1 import api_key_service_pb2 as keys_pb
from cronwave_proto.v1 import api_key_service_pb2_grpc as keys_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as api
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as api_grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

import cronwave
from cronwave_core.convert import dt_to_ts
from cronwave_core.errors import BY_REASON, CronwaveError, ScheduleBusy
from cronwave_core.rpc import error_from_rpc
from cronwave_core.suite import free_port
from tests.harness.processes import ProcessTable
from tests.harness.store import TOKENS_ISSUED, StoreProcess, register_job_type
from tests.harness.tls import as_identity, channel
from tests.helpers import claim_one, fresh

pytestmark = pytest.mark.slow

TIMEOUT = timedelta(seconds=10)
PAST = datetime(2024, 1, 1, 2, 0, tzinfo=UTC)
#: Every write here is fenced with the newest token the store issued, so the order
#: the tests run in never makes one stale.
TOKEN = TOKENS_ISSUED


def client_of(store_addr: str, identity: str = "local-admin") -> cronwave.Client:
    """The SDK's client of a store alone, calling as ``identity``."""
    return cronwave.Client(
        store_addr=store_addr,
        dispatcher_addr="127.0.0.1:1",  # never dialled: only the store is called
        planner_addr="127.0.0.1:1",
        leader_addr="127.0.0.1:1",
        timeout=TIMEOUT,
        tls=as_identity(identity),
    )


@dataclass
class Rig:
    """A store process, a job type it knows, and the SDK's client of it."""

    store: StoreProcess
    job_type: str
    client: cronwave.Client

    def stub(self) -> api_grpc.WorkflowStoreServiceStub:
        return self.store.stub()

    def schedule(self) -> str:
        sid = fresh("kind")
        # Not paused (the store records no run of a paused schedule); it fires on
        # 1 January only, and no planner runs here
        self.client.create_schedule(sid, cron="0 2 1 1 *", job_type=self.job_type)
        return sid

    def record_runs(self, schedule_id: str, count: int) -> list[str]:
        """``count`` runs of ``schedule_id``, PENDING, one a minute from ``PAST``, recorded
        to be queued (as the dispatcher records them)."""
        request = api.RecordRunsRequest(
            runs=[
                api.RecordRunRequest(
                    schedule_id=schedule_id,
                    fire_time=dt_to_ts(PAST + timedelta(minutes=i)),
                    fencing_token=TOKEN,
                    enqueue=True,
                )
                for i in range(count)
            ]
        )
        results = self.stub().RecordRuns(request, timeout=10).results
        assert all(r.HasField("recorded") for r in results), results
        return [r.recorded.run.run_id for r in results]


@pytest.fixture(scope="module")
def rig(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    table = ProcessTable("the errors' workflow-store")
    store = StoreProcess(tmp_path_factory.mktemp("store"), module_database_url, table=table)
    try:
        store.start()
        with client_of(store.address) as client:
            yield Rig(store, register_job_type(store.stub()), client)
    finally:
        table.close([store.stop])


def raised(call: Callable[[], object]) -> CronwaveError:
    """The cronwave error ``call`` raised, read as the SDK reads a failed call."""
    try:
        call()
    except CronwaveError as exc:
        return exc
    except grpc.RpcError as exc:
        return error_from_rpc(exc)
    raise AssertionError("the call did not fail")


# -- one call per kind ----------------------------------------------------------------------


def schedule_not_found(rig: Rig) -> CronwaveError:
    sid = fresh("missing")
    error = raised(lambda: rig.client.get_schedule(sid))
    assert isinstance(error, cronwave.ScheduleNotFound) and error.schedule_id == sid
    return error


def schedule_exists(rig: Rig) -> CronwaveError:
    sid = rig.schedule()
    error = raised(lambda: rig.client.create_schedule(sid, cron="* * * * *", job_type=rig.job_type))
    assert isinstance(error, cronwave.ScheduleExists) and error.schedule_id == sid
    return error


def run_not_found(rig: Rig) -> CronwaveError:
    error = raised(lambda: rig.client.run_events("run_does_not_exist"))
    assert isinstance(error, cronwave.RunNotFound) and error.run_id == "run_does_not_exist"
    return error


def not_found(rig: Rig) -> CronwaveError:
    with channel(rig.store.address) as admin:
        revoke = keys_grpc.ApiKeyServiceStub(admin).RevokeApiKey
        return raised(lambda: revoke(keys_pb.RevokeApiKeyRequest(key_id="k" * 16), timeout=10))


def invalid_argument(rig: Rig) -> CronwaveError:
    sid = fresh("kind")
    error = raised(lambda: rig.client.create_schedule(sid, cron="0 2 * * *", job_type="no.such"))
    assert isinstance(error, cronwave.InvalidArgument) and error.field == "job_type"
    return error


def stale_fencing_token(rig: Rig) -> CronwaveError:
    sid = rig.schedule()
    slot = api.MissedSlot(schedule_id=sid, fire_time=dt_to_ts(PAST), reason="missed")
    stub = rig.stub()

    def record_missed(token: int) -> object:
        request = api.RecordMissedSlotsRequest(slots=[slot], fencing_token=token)
        return stub.RecordMissedSlots(request, timeout=10)

    record_missed(TOKEN)
    error = raised(lambda: record_missed(TOKEN - 1))
    assert isinstance(error, cronwave.StaleFencingToken)
    assert (error.scope, error.token, error.newest) == ("planner", TOKEN - 1, TOKEN)
    return error


def stale_attempt(rig: Rig) -> CronwaveError:
    (run_id,) = rig.record_runs(rig.schedule(), 1)
    stub = rig.stub()
    claim = claim_one(stub, api.ClaimRunRequest(run_id=run_id, worker_id="w1"), timeout=10)
    assert claim.claimed
    wrong = "0" * 32
    release = api.ReleaseRunRequest(run_id=run_id, attempt_token=wrong, reason="test")
    error = raised(lambda: stub.ReleaseRun(release, timeout=10))
    assert isinstance(error, cronwave.StaleAttempt)
    assert (error.run_id, error.attempts) == (run_id, 1)
    return error


def failed_precondition(rig: Rig) -> CronwaveError:
    # A ScheduleBusy naming more runs than its details hold goes by its code alone
    sid = rig.schedule()
    rig.record_runs(sid, 120)
    error = raised(lambda: rig.client.delete_schedule(sid))
    assert not isinstance(error, ScheduleBusy)
    assert error.message.startswith(f"schedule_id: schedule '{sid}' has 120 run(s) in flight")
    return error


def permission_denied(rig: Rig) -> CronwaveError:
    with client_of(rig.store.address, "worker") as as_worker:
        sid = fresh("kind")
        return raised(lambda: as_worker.create_schedule(sid, cron="* * * * *", job_type="x.y"))


def unauthenticated(rig: Rig) -> CronwaveError:
    with client_of(rig.store.address, "client") as anonymous:
        return raised(lambda: anonymous.get_schedule("nightly"))


def unavailable(rig: Rig) -> CronwaveError:
    nobody = f"127.0.0.1:{free_port()}"
    with client_of(nobody) as lost:
        return raised(lambda: lost.get_schedule("nightly"))


CASES: dict[type[CronwaveError], Callable[[Rig], CronwaveError]] = {
    cronwave.ScheduleNotFound: schedule_not_found,
    cronwave.ScheduleExists: schedule_exists,
    cronwave.RunNotFound: run_not_found,
    cronwave.NotFound: not_found,
    cronwave.InvalidArgument: invalid_argument,
    cronwave.StaleFencingToken: stale_fencing_token,
    cronwave.StaleAttempt: stale_attempt,
    cronwave.FailedPrecondition: failed_precondition,
    cronwave.PermissionDenied: permission_denied,
    cronwave.Unauthenticated: unauthenticated,
    cronwave.Unavailable: unavailable,
}

#: Exported kinds with a reason that no call here causes, and why.
UNCAUSED = {
    cronwave.AlreadyExists: "no call refuses a duplicate bare: it names its kind",
    cronwave.ConfigurationError: "a process's malformed setting, raised before any call",
}


def test_every_exported_kind_with_a_reason_has_a_call_that_causes_it() -> None:
    exported = {getattr(cronwave, name) for name in cronwave.__all__}
    kinds = exported & set(BY_REASON.values())
    assert kinds - set(UNCAUSED) == set(CASES)


@pytest.mark.parametrize("kind", CASES, ids=lambda kind: kind.__name__)
def test_a_real_call_raises_the_kind(rig: Rig, kind: type[CronwaveError]) -> None:
    # When a call is refused for that reason
    error = CASES[kind](rig)

    # Then the SDK raises exactly that class, and the handlers that catch it see it
    assert type(error) is kind, f"{type(error).__name__}: {error}"
    assert error.message


def test_a_bad_field_is_named_in_a_bad_request_any_grpc_client_reads(rig: Rig) -> None:
    # When the store is asked for a schedule by an id that breaks the id rule
    with pytest.raises(grpc.RpcError) as info:
        rig.stub().GetSchedule(api.GetScheduleRequest(schedule_id="no spaces"), timeout=10)

    # Then the status's details name the field and its rule as google.rpc.BadRequest,
    # read with grpc_status alone (no cronwave code), beside the kind's ErrorInfo
    status = rpc_status.from_call(info.value)
    assert status is not None and status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    (detail,) = [d for d in status.details if d.Is(error_details_pb2.BadRequest.DESCRIPTOR)]
    bad = error_details_pb2.BadRequest()
    detail.Unpack(bad)
    (violation,) = bad.field_violations
    error = error_from_rpc(info.value)
    assert isinstance(error, cronwave.InvalidArgument) and violation.field == "schedule_id"
    assert (violation.field, violation.description) == (error.field, error.rule)


def test_a_schedule_with_runs_in_flight_is_busy_naming_them(rig: Rig) -> None:
    # Given a schedule with a run in flight
    sid = rig.schedule()
    run_ids = rig.record_runs(sid, 2)

    # When it is deleted without force
    with pytest.raises(ScheduleBusy) as info:
        rig.client.delete_schedule(sid)

    # Then the refusal names it and its runs, and nothing was deleted
    assert (info.value.schedule_id, info.value.run_ids) == (sid, run_ids)
    assert isinstance(info.value, cronwave.FailedPrecondition)
    assert not rig.client.get_schedule(sid).deleted


def test_an_sdk_call_refused_says_what_to_do_in_the_sdk_words(rig: Rig) -> None:
    # Given a schedule with a run in flight
    sid = rig.schedule()
    (run_id,) = rig.record_runs(sid, 1)

    # When the SDK creates it again, deletes it without force, and asks for a run
    # that does not exist
    exists = raised(
        lambda: rig.client.create_schedule(sid, cron="0 2 * * *", job_type=rig.job_type)
    )
    busy = raised(lambda: rig.client.delete_schedule(sid))
    missing = raised(lambda: rig.client.get_run("run_does_not_exist"))

    # Then each hint names the SDK's keyword or call, never the CLI's flag or command
    assert "if_absent=True" in exists.message and "--if-absent" not in exists.message
    assert f"Client.cancel_run('{run_id}')" in busy.message
    assert f"Client.delete_schedule('{sid}', force=True)" in busy.message
    assert "--force" not in busy.message and "cronwave runs" not in busy.message
    assert "Client.list_runs()" in missing.message and "cronwave" not in missing.message
    assert str(exists) == exists.message  # what a traceback prints
