"""The request limits (``cronwave_core.limits``), sent past by real clients to a real
suite: each refusal is INVALID_ARGUMENT naming the field, the limit and the size; a
message past a server's receive cap is RESOURCE_EXHAUSTED; junk bytes to every method
are INVALID_ARGUMENT; nothing is written, and every server goes on serving."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import cron_planner_service_pb2 as planner
from cronwave_proto.v1 import dispatcher_service_pb2 as dispatcher
from cronwave_proto.v1 import leader_election_service_pb2 as leader
from cronwave_proto.v1 import worker_service_pb2 as worker
from cronwave_proto.v1 import workflow_store_service_pb2 as store
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from cronwave_core.limits import ID_ALPHABET_RULE, KIB, MIB
from cronwave_core.security.tls import new_channel
from cronwave_core.suite import Suite
from tests.fuzz.support import Databases, changed, settled
from tests.harness.suites import SuiteFactory
from tests.harness.tls import as_identity, caller_for
from tests.helpers import eventually, fresh

pytestmark = pytest.mark.slow

JOB = "cronwave.noop"  # registered by the suite's worker
TEN_MB = 10_000_000


def create(
    payload: str = "{}", schedule_id: str = "", **spec: object
) -> store.CreateScheduleRequest:
    return store.CreateScheduleRequest(
        schedule=pb.Schedule(
            schedule_id=schedule_id or fresh("lim"),
            job_type=JOB,
            payload_json=payload,
            spec=pb.ScheduleSpec(**({"cron": ["0 2 * * *"]} | spec)),  # type: ignore[arg-type]
        )
    )


def record(**fields: object) -> store.RecordRunsRequest:
    run = {
        "schedule_id": "nightly",
        "fire_time": Timestamp(seconds=1_900_000_000),
        "trigger": pb.TRIGGER_KIND_MANUAL,
        **fields,
    }
    return store.RecordRunsRequest(runs=[store.RecordRunRequest(**run)])  # type: ignore[arg-type]


@dataclass(frozen=True)
class Case:
    what: str
    service: str
    method: str
    request: Message
    message: str  # the whole message the refusal must carry


CASES = [
    Case("a 10 MB payload", "workflow-store", "cronwave.v1.WorkflowStoreService/CreateSchedule",
         create('{"a": "' + "x" * (TEN_MB - 9) + '"}'),
         f"schedule.payload_json: at most {256 * KIB} bytes, got {TEN_MB}"),
    Case("a payload one byte over", "workflow-store",
         "cronwave.v1.WorkflowStoreService/CreateSchedule",
         create('{"a": "' + "x" * (256 * KIB - 8) + '"}'),
         f"schedule.payload_json: at most {256 * KIB} bytes, got {256 * KIB + 1}"),
    Case("a 129-character idempotency key", "workflow-store",
         "cronwave.v1.WorkflowStoreService/RecordRuns", record(idempotency_key="k" * 129),
         "runs[0].idempotency_key: must be at most 128 characters, got 129"),
    Case("a space in an idempotency key", "workflow-store",
         "cronwave.v1.WorkflowStoreService/RecordRuns", record(idempotency_key="my key"),
         f"runs[0].idempotency_key: must use only {ID_ALPHABET_RULE} (found U+0020 at index 2)"),
    Case("a 1 MB queue name", "workflow-store", "cronwave.v1.WorkflowStoreService/RecordRuns",
         record(queue="q" * MIB), f"runs[0].queue: must be at most 128 characters, got {MIB}"),
    Case("a 129-character job type", "workflow-store",
         "cronwave.v1.WorkflowStoreService/RegisterJobType",
         store.RegisterJobTypeRequest(job_type=pb.JobType(name="j" * 129)),
         "job_type.name: must be at most 128 characters, got 129"),
    Case("a 129-character worker id", "workflow-store",
         "cronwave.v1.WorkflowStoreService/ClaimRuns",
         store.ClaimRunsRequest(
             claims=[store.ClaimRunRequest(run_id="run_1", worker_id="w" * 129)]),
         "claims[0].worker_id: must be at most 128 characters, got 129"),
    Case("a 1025-byte pause note", "workflow-store",
         "cronwave.v1.WorkflowStoreService/PauseSchedule",
         store.PauseScheduleRequest(schedule_id="nightly", note="n" * 1025),
         "note: must be at most 1024 bytes, got 1025"),
    Case("a 1 MB cancel reason", "workflow-store", "cronwave.v1.WorkflowStoreService/CancelRun",
         store.CancelRunRequest(run_id="run_1", reason="r" * MIB),
         f"reason: must be at most 1024 bytes, got {MIB}"),
    Case("a page of 1,001 schedules", "workflow-store",
         "cronwave.v1.WorkflowStoreService/ListSchedules", store.ListSchedulesRequest(limit=1001),
         "limit: must be at most 1000 per page, got 1001; page on"),
    Case("a page of 1,001 dead letters", "workflow-store",
         "cronwave.v1.WorkflowStoreService/ListDeadLetters",
         store.ListDeadLettersRequest(limit=1001),
         "limit: must be at most 1000 per page, got 1001; page on"),
    Case("a page of 5,000 audit events", "workflow-store",
         "cronwave.v1.WorkflowStoreService/ListAuditEvents",
         store.ListAuditEventsRequest(limit=5000),
         "limit: must be at most 1000 per page, got 5000; page on"),
    Case("a 1 MB candidate name", "leader-election",
         "cronwave.v1.LeaderElectionService/Campaign",
         leader.CampaignRequest(candidate="c" * 1_000_000),
         "candidate: must be at most 200 characters, got 1000000"),
    Case("a 1 MB schedule id to backfill", "cron-planner",
         "cronwave.v1.CronPlannerService/Backfill",
         planner.BackfillRequest(schedule_id="s" * 1_000_000),
         "schedule_id: 'ssssssssssssssssssssssssssssssssssssssss'... (1000000 characters) "
         "must be 1-63 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit"),
    Case("a 200-character trigger key", "dispatcher", "cronwave.v1.DispatcherService/TriggerRun",
         dispatcher.TriggerRunRequest(schedule_id="nightly", idempotency_key="k" * 200),
         "idempotency_key: must be at most 128 characters, got 200"),
    Case("a start's key with a tab", "dispatcher", "cronwave.v1.DispatcherService/StartRuns",
         dispatcher.StartRunsRequest(starts=[dispatcher.StartRunRequest(
             schedule_id="nightly", fencing_token=1, fire_time=Timestamp(seconds=1_900_000_000),
             idempotency_key="a\tb")]),
         f"starts[0].idempotency_key: must use only {ID_ALPHABET_RULE} (found U+0009 at index 1)"),
]  # fmt: skip


@pytest.fixture
def suite(make_suite: SuiteFactory) -> Suite:
    return make_suite()


@pytest.fixture
def databases(suite: Suite, database_url: str) -> Iterator[Databases]:
    dbs = Databases([database_url])
    yield dbs
    dbs.close()


def send(suite: Suite, service: str, method: str, body: bytes) -> tuple[grpc.StatusCode, str]:
    """``body`` to ``method``, called as an identity its rule allows (``caller_for``).
    A client's own caps are not under test: they are lifted past any message here."""
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    identity = as_identity(caller_for(f"/{method}"))
    with new_channel(suite.address(service), options, identity) as channel:
        call = channel.unary_unary(f"/{method}", request_serializer=None)
        try:
            call(body, timeout=60)
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


def serving(suite: Suite, service: str) -> bool:
    """The service still answers a well-formed call of its own."""
    calls = {
        "workflow-store": ("cronwave.v1.WorkflowStoreService/ListJobTypes",
                           store.ListJobTypesRequest()),
        "dispatcher": ("cronwave.v1.DispatcherService/TriggerRun",
                       dispatcher.TriggerRunRequest()),
        "cron-planner": ("cronwave.v1.CronPlannerService/GetPlannerStatus",
                         planner.GetPlannerStatusRequest()),
        "leader-election": ("cronwave.v1.LeaderElectionService/Observe",
                            leader.ObserveRequest()),
        "worker": ("cronwave.v1.WorkerService/GetWorkerStatus", worker.GetWorkerStatusRequest()),
    }  # fmt: skip
    method, request = calls[service]
    code, _ = send(suite, service, method, request.SerializeToString())
    return code in (grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT)


def test_every_request_over_a_limit_is_refused_naming_field_limit_and_size(
    suite: Suite, databases: Databases
) -> None:
    settled(suite)
    problems = []
    for case in CASES:
        # Given the database as it is
        before = databases.fingerprint()

        # When a request over a limit is sent
        code, details = send(suite, case.service, case.method, case.request.SerializeToString())

        # Then it is refused with the field, the limit and the size, and nothing changed
        if code != grpc.StatusCode.INVALID_ARGUMENT or details != case.message:
            problems.append(f"{case.what}: {code.name} {details[:300]!r}")
        if written := changed(before, databases.fingerprint()):
            problems.append(f"{case.what}: refused, but it wrote to {written}")
    assert not problems, "\n".join(problems)
    assert all(serving(suite, service) for service in ("workflow-store", "dispatcher"))


def test_a_backfill_over_its_slot_limit_is_refused_naming_the_limit(
    suite: Suite, databases: Databases
) -> None:
    # Given a schedule every minute but today and tomorrow (so no fire of its own, at a
    # minute's turn during the test, writes a run), known to the planner
    settled(suite)
    schedule_id = fresh("every-minute")
    now = datetime.now(UTC)
    quiet = [f"{day:%Y-%m-%d}" for day in (now, now + timedelta(days=1))]
    every_minute = create(
        schedule_id=schedule_id, cron=["* * * * *"], time_zone="UTC", exclude_dates=quiet
    )
    code, details = send(
        suite,
        "workflow-store",
        "cronwave.v1.WorkflowStoreService/CreateSchedule",
        every_minute.SerializeToString(),
    )
    assert code == grpc.StatusCode.OK, details
    end = now.replace(second=0, microsecond=0) - timedelta(days=1)
    request = planner.BackfillRequest(
        schedule_id=schedule_id,
        start=Timestamp(seconds=int((end - timedelta(days=7)).timestamp())),  # 10,080 slots
        end=Timestamp(seconds=int(end.timestamp())),
        dry_run=True,
    )
    before = databases.fingerprint()

    # When a backfill of a week of minutes (10,080 slots) is asked for, once the
    # planner has heard of the schedule over its watch
    def asked() -> tuple[grpc.StatusCode, str] | None:
        outcome = send(
            suite, "cron-planner", "cronwave.v1.CronPlannerService/Backfill",
            request.SerializeToString(),
        )  # fmt: skip
        return None if outcome[0] == grpc.StatusCode.NOT_FOUND else outcome

    code, details = eventually(asked, timeout=30, what="the planner knows the schedule")

    # Then it is refused, naming the end of the range and the limit, and nothing is written
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert details.startswith(
        "end: the range holds more than 10000 fire times, the limit of one backfill "
        "(CRONWAVE_MAX_BACKFILL_SLOTS)"
    ), details
    assert not changed(before, databases.fingerprint())


@pytest.mark.parametrize(
    ("service", "method", "cap"),
    [
        ("workflow-store", "cronwave.v1.WorkflowStoreService/CreateSchedule", 16 * MIB),
        ("dispatcher", "cronwave.v1.DispatcherService/TriggerRun", 4 * MIB),
        ("cron-planner", "cronwave.v1.CronPlannerService/PreviewFireTimes", 4 * MIB),
        ("leader-election", "cronwave.v1.LeaderElectionService/Campaign", 1 * MIB),
        ("worker", "cronwave.v1.WorkerService/GetWorkerStatus", 1 * MIB),
    ],
)
def test_a_message_past_a_servers_receive_cap_is_resource_exhausted_and_it_serves_on(
    suite: Suite, databases: Databases, service: str, method: str, cap: int
) -> None:
    # Given a settled suite (its start-up writes done), and a message one byte past
    # the server's receive cap (field 1, a string)
    settled(suite)
    size = cap + 1
    body = b"\x0a" + _varint(size - 1 - len(_varint(size))) + b"x" * (size - 1 - len(_varint(size)))
    assert len(body) == size
    before = databases.fingerprint()

    # When it is sent
    code, details = send(suite, service, method, body)

    # Then gRPC refuses it with both sizes, nothing is written, and the server serves on
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, (code, details)
    assert f"{size} vs. {cap}" in details, details
    assert not changed(before, databases.fingerprint())
    assert serving(suite, service)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


JUNK = [
    b"\x0a\xff\xff\xff\xff\x0f",  # field 1 says 4 GiB follow; none do
    b"\x0a\x02\xc3\x28",  # field 1, a string, is not UTF-8
    b"\xff" * 64,  # no field at all
    b"\x08",  # a varint with no value
]


def test_junk_bytes_to_every_method_of_every_service_are_refused_and_nothing_is_written(
    suite: Suite, databases: Databases
) -> None:
    settled(suite)
    problems = []
    for module, service in (
        (store, "workflow-store"),
        (dispatcher, "dispatcher"),
        (planner, "cron-planner"),
        (leader, "leader-election"),
        (worker, "worker"),
    ):
        for descriptor in module.DESCRIPTOR.services_by_name.values():
            for method in descriptor.methods:
                if method.server_streaming:
                    continue  # WatchSchedules: tests/fuzz drives it with a deadline
                for body in JUNK:
                    # Given the database as it is; when junk is sent
                    before = databases.fingerprint()
                    code, details = send(
                        suite, service, f"{descriptor.full_name}/{method.name}", body
                    )

                    # Then it is refused as a malformed request, and nothing changed
                    if code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL):
                        problems.append(f"{method.full_name} {body!r}: {code.name} {details!r}")
                    elif code == grpc.StatusCode.INVALID_ARGUMENT and ": " not in details:
                        # "request: the body is not a valid serialized ...", or a body
                        # that decodes refused by its fields ("field: rule")
                        problems.append(f"{method.full_name} {body!r}: {details!r}")
                    if written := changed(before, databases.fingerprint()):
                        problems.append(f"{method.full_name} {body!r}: wrote to {written}")
        assert serving(suite, service), service
    assert not problems, "\n".join(problems)
