"""Bad values sent to real services are refused with INVALID_ARGUMENT naming the field
and the rule: never UNKNOWN, never an internal detail (SQL, a path, a traceback), and
nothing is written. One case per field and rule; a request body that is not protobuf
is refused too, by every service."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import cron_planner_service_pb2 as planner
from cronwave_proto.v1 import dispatcher_service_pb2 as dispatcher
from cronwave_proto.v1 import leader_election_service_pb2 as leader
from cronwave_proto.v1 import workflow_store_service_pb2 as store
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from cronwave_billing.v1 import payment_gateway_service_pb2 as gateway
from cronwave_core.suite import Suite
from tests.fuzz.support import Databases, changed, leaks, settled, strings_in
from tests.harness.suites import SuiteFactory
from tests.harness.tls import hop_channel
from tests.helpers import fresh

pytestmark = pytest.mark.slow

JOB = "cronwave.noop"  # registered by the suite's worker
NUL_ID = "nightly\x00billing"
YEAR_0 = Timestamp(seconds=-62_135_596_801)  # 0000-12-31T23:59:59Z
YEAR_10000 = Timestamp(seconds=253_402_300_800)  # 10000-01-01T00:00:00Z
DEEP_JSON = '{"a":' + "[" * 100_000 + "]" * 100_000 + "}"
TEN_YEARS = Duration(seconds=10 * 365 * 86_400)
HUGE = Duration(seconds=10**15)  # past timedelta's range
TOKEN = "0" * 32  # well formed: the value under test is refused before any look-up


def schedule(**spec: object) -> store.CreateScheduleRequest:
    """A valid schedule, under a fresh id, but for what ``spec`` overrides: each case
    stands alone (had an earlier one been created, its id would not be refused
    for the value under test)."""
    fields: dict[str, object] = {"cron": ["0 2 * * *"], **spec}
    payload = fields.pop("payload_json", "{}")
    policy = fields.pop("policy", None)
    return store.CreateScheduleRequest(
        schedule=pb.Schedule(
            schedule_id=fresh("bad"),
            job_type=JOB,
            payload_json=payload,  # type: ignore[arg-type]
            spec=pb.ScheduleSpec(**fields),  # type: ignore[arg-type]
            policy=policy,  # type: ignore[arg-type]
        )
    )


def catch_up_all(overlap: int) -> store.CreateScheduleRequest:
    return schedule(policy=pb.SchedulePolicy(catchup=pb.CATCHUP_POLICY_ALL, overlap=overlap))


def job_type(**retry: object) -> store.RegisterJobTypeRequest:
    return store.RegisterJobTypeRequest(
        job_type=pb.JobType(
            name="billing.fuzzed",
            duration_limit=Duration(seconds=60),
            retry=pb.RetryPolicy(**retry),  # type: ignore[arg-type]
        )
    )


@dataclass(frozen=True)
class Case:
    what: str
    service: str  # the process, as cronwave_core.suite names it
    method: str  # "Service/Method"
    request: Message
    field: str  # named first in the refusal


S = "workflow-store"
STORE = "cronwave.v1.WorkflowStoreService/"
GATEWAY = "cronwave_billing.v1.PaymentGatewayService"
CASES = [
    # NUL in ids and names: PostgreSQL refuses such text, and its error (with the SQL)
    # came back as UNKNOWN.
    Case("NUL in a schedule id", S, STORE + "GetSchedule",
         store.GetScheduleRequest(schedule_id=NUL_ID), "schedule_id"),
    Case("NUL in a run id", S, STORE + "GetRuns",
         store.GetRunsRequest(runs=[store.GetRunRequest(run_id=NUL_ID)]), "runs[0].run_id"),
    Case("NUL in a job type", S, STORE + "CreateSchedule",
         store.CreateScheduleRequest(schedule=pb.Schedule(
             schedule_id="nightly-billing", job_type="cronwave\x00noop",
             spec=pb.ScheduleSpec(cron=["0 2 * * *"]))), "job_type"),
    Case("NUL in a listed schedule id", S, STORE + "ListRuns",
         store.ListRunsRequest(schedule_id=NUL_ID), "schedule_id"),
    Case("NUL in a page cursor", S, STORE + "ListSchedules",
         store.ListSchedulesRequest(after_schedule_id=NUL_ID), "after_schedule_id"),
    Case("NUL in a fencing scope", S, STORE + "GetFencingToken",
         store.GetFencingTokenRequest(fencing_scope="planner\x00"), "fencing_scope"),
    Case("NUL in a heartbeat's run id", S, STORE + "Heartbeat",
         store.HeartbeatRequest(run_id=NUL_ID, attempt_token=TOKEN), "run_id"),
    Case("NUL in a dead letter's run id", S, STORE + "DeadLetterRun",
         store.DeadLetterRunRequest(run_id=NUL_ID, reason="rejected"), "run_id"),
    Case("NUL in an event's detail", S, STORE + "AppendRunEvents",
         store.AppendRunEventsRequest(events=[store.AppendRunEventRequest(
             run_id="run_1", kind="note", detail="a\x00b")]), "events[0].detail"),
    Case("NUL in a missed slot's schedule", S, STORE + "RecordMissedSlots",
         store.RecordMissedSlotsRequest(fencing_token=1, slots=[store.MissedSlot(
             schedule_id=NUL_ID, fire_time=Timestamp(seconds=1_900_000_000), reason="x")]),
         "slots[0].schedule_id"),
    Case("NUL in a pause note", S, STORE + "PauseSchedule",
         store.PauseScheduleRequest(schedule_id="nightly-billing", note="a\x00b"), "note"),
    # Timestamps outside years 1-9999 raised "year ... is out of range".
    Case("a fire time in year 0", S, STORE + "RecordRuns",
         store.RecordRunsRequest(runs=[store.RecordRunRequest(
             schedule_id="nightly-billing", fire_time=YEAR_0, fencing_token=1)]),
         "runs[0].fire_time"),
    Case("a start in year 10000", S, STORE + "CreateSchedule",
         schedule(start_at=YEAR_10000), "spec.start_at"),
    Case("a body start in year 10000", S, STORE + "CompleteRuns",
         store.CompleteRunsRequest(completions=[store.CompleteRunRequest(
             run_id="run_1", attempt_token=TOKEN, state=pb.RUN_STATE_SUCCEEDED,
             body_started_at=YEAR_10000)]),
         "completions[0].body_started_at"),
    # Timestamp nanos outside [0, 1e9) were accepted.
    Case("nanos of a whole second", S, STORE + "CreateSchedule",
         schedule(start_at=Timestamp(seconds=1_900_000_000, nanos=1_000_000_000)),
         "spec.start_at"),
    Case("negative nanos", S, STORE + "CreateSchedule",
         schedule(one_off=[Timestamp(seconds=1_900_000_000, nanos=-1)]), "spec.one_off[0]"),
    # A 5,000-character zone raised "File name too long" with the virtualenv's path.
    Case("a 5,000-character time zone", S, STORE + "CreateSchedule",
         schedule(time_zone="a" * 5_000), "spec.time_zone"),
    # Cron expressions: a huge step and a huge expression were accepted.
    Case("a cron step of twenty digits", S, STORE + "CreateSchedule",
         schedule(cron=["*/" + "9" * 20 + " * * * *"]), "spec.cron[0]"),
    Case("a 100,000-character cron", S, STORE + "CreateSchedule",
         schedule(cron=["1," * 50_000 + "1 * * * *"]), "spec.cron[0]"),
    Case("a cron padded to 100,000 characters", S, STORE + "CreateSchedule",
         schedule(cron=[" " * 100_000 + "0 2 * * *"]), "spec.cron[0]"),
    Case("a ten-year jitter", S, STORE + "CreateSchedule",
         schedule(jitter=TEN_YEARS), "spec.jitter"),
    # Catch-up "all" under an overlap policy that skips or cancels all but one catch-up
    # run dropped 4 of 5 late slots after an outage.
    *(Case(f"catch-up all with overlap {name}", S, STORE + "CreateSchedule",
           catch_up_all(value), "policy.overlap")
      for name, value in (("skip", pb.OVERLAP_POLICY_UNSPECIFIED),
                          ("buffer_one", pb.OVERLAP_POLICY_BUFFER_ONE),
                          ("cancel_other", pb.OVERLAP_POLICY_CANCEL_OTHER))),
    # Durations past timedelta's range raised "Python int too large to convert".
    Case("a huge interval", S, STORE + "CreateSchedule",
         schedule(cron=[], intervals=[pb.IntervalSpec(every=HUGE)]), "spec.intervals[0].every"),
    Case("a huge duration limit", S, STORE + "RegisterJobType",
         store.RegisterJobTypeRequest(job_type=pb.JobType(name="billing.fuzzed",
                                                          duration_limit=HUGE)),
         "job_type.duration_limit"),
    Case("a duration whose nanos have the other sign", S, STORE + "RegisterJobType",
         store.RegisterJobTypeRequest(job_type=pb.JobType(
             name="billing.fuzzed", duration_limit=Duration(seconds=5, nanos=-5))),
         "job_type.duration_limit"),
    Case("a huge retry delay", S, STORE + "CompleteRuns",
         store.CompleteRunsRequest(completions=[store.CompleteRunRequest(
             run_id="run_1", attempt_token=TOKEN, state=pb.RUN_STATE_FAILED, retry_after=HUGE)]),
         "completions[0].retry_after"),
    Case("a huge stall bound", S, STORE + "RequeueStalledRuns",
         store.RequeueStalledRunsRequest(pending_for=HUGE), "pending_for"),
    # JSON: a deep document raised RecursionError; NaN and Infinity were stored.
    Case("100,000-deep JSON payload", S, STORE + "CreateSchedule",
         schedule(payload_json=DEEP_JSON), "payload_json"),
    Case("NaN in a payload", S, STORE + "CreateSchedule",
         schedule(payload_json='{"rate": NaN}'), "payload_json"),
    Case("Infinity in a payload", S, STORE + "CreateSchedule",
         schedule(payload_json='{"rate": 1e999}'), "payload_json"),
    Case("100,000-deep JSON checkpoint", S, STORE + "Heartbeat",
         store.HeartbeatRequest(run_id="run_1", attempt_token=TOKEN, checkpoint_json=DEEP_JSON),
         "checkpoint_json"),
    Case("NaN in a result", S, STORE + "CompleteRuns",
         store.CompleteRunsRequest(completions=[store.CompleteRunRequest(
             run_id="run_1", attempt_token=TOKEN, state=pb.RUN_STATE_SUCCEEDED,
             result_json='{"x": NaN}')]),
         "completions[0].result_json"),
    # Doubles: NaN and Infinity were registered as a backoff coefficient.
    Case("NaN backoff", S, STORE + "RegisterJobType",
         job_type(backoff_coefficient=float("nan")), "job_type.retry.backoff_coefficient"),
    Case("infinite backoff", S, STORE + "RegisterJobType",
         job_type(backoff_coefficient=float("inf")), "job_type.retry.backoff_coefficient"),
    # The other services.
    Case("a 5,000-character zone to preview", "cron-planner",
         "cronwave.v1.CronPlannerService/PreviewFireTimes",
         planner.PreviewFireTimesRequest(count=1, spec=pb.ScheduleSpec(
             cron=["0 2 * * *"], time_zone="a" * 5_000)), "spec.time_zone"),
    Case("a preview after year 9999", "cron-planner",
         "cronwave.v1.CronPlannerService/PreviewFireTimes",
         planner.PreviewFireTimesRequest(count=1, after=YEAR_10000,
                                         spec=pb.ScheduleSpec(cron=["0 2 * * *"])), "after"),
    Case("a backfill from year 0", "cron-planner", "cronwave.v1.CronPlannerService/Backfill",
         planner.BackfillRequest(schedule_id="nightly-billing", dry_run=True, start=YEAR_0,
                                 end=Timestamp(seconds=1_700_000_000)), "start"),
    Case("NUL in a started schedule", "dispatcher", "cronwave.v1.DispatcherService/StartRuns",
         dispatcher.StartRunsRequest(starts=[dispatcher.StartRunRequest(
             schedule_id=NUL_ID, fencing_token=1, fire_time=Timestamp(seconds=1_900_000_000))]),
         "starts[0].schedule_id"),
    Case("a start in year 10000", "dispatcher", "cronwave.v1.DispatcherService/StartRuns",
         dispatcher.StartRunsRequest(starts=[dispatcher.StartRunRequest(
             schedule_id="nightly-billing", fencing_token=1, fire_time=YEAR_10000)]),
         "starts[0].fire_time"),
    Case("NUL in a triggered schedule", "dispatcher", "cronwave.v1.DispatcherService/TriggerRun",
         dispatcher.TriggerRunRequest(schedule_id=NUL_ID), "schedule_id"),
    Case("a huge lease", "leader-election", "cronwave.v1.LeaderElectionService/Campaign",
         leader.CampaignRequest(candidate="planner-1", ttl=HUGE), "ttl"),
    Case("NUL in a customer id", "payment-gateway", f"{GATEWAY}/Charge",
         gateway.ChargeRequest(item=gateway.ChargeItem(
             idempotency_key="k1", customer_id="c\x00", invoice_id="i1", amount_cents=100,
             currency="eur")), "item.customer_id"),
    Case("a huge drill hold", "payment-gateway", f"{GATEWAY}/SetFaults",
         gateway.SetFaultsRequest(timeout_after_commit=1, hold=HUGE), "hold"),
]  # fmt: skip


@pytest.fixture
def suite(make_suite: SuiteFactory) -> Suite:
    return make_suite(processes=("payment-gateway",))


@pytest.fixture
def databases(suite: Suite, database_url: str) -> Iterator[Databases]:
    dbs = Databases([database_url, f"sqlite:///{suite.config.data_dir / 'gateway.db'}"])
    yield dbs
    dbs.close()


def send(suite: Suite, service: str, method: str, body: bytes) -> tuple[grpc.StatusCode, str]:
    with hop_channel(suite, service) as channel:
        call = channel.unary_unary(f"/{method}", request_serializer=None)
        try:
            call(body, timeout=30)
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


def test_every_bad_value_is_refused_naming_the_field_and_nothing_is_written(
    suite: Suite, databases: Databases
) -> None:
    settled(suite)
    problems = []
    for case in CASES:
        # Given the databases as they are
        before = databases.fingerprint()

        # When the bad value is sent
        code, details = send(suite, case.service, case.method, case.request.SerializeToString())

        # Then it is refused, naming the field, with no internals, and nothing changed
        if code != grpc.StatusCode.INVALID_ARGUMENT or not details.startswith(f"{case.field}: "):
            problems.append(f"{case.what}: {code.name} {details[:300]!r}")
        elif leaked := leaks(details, strings_in(case.request)):
            problems.append(f"{case.what}: the message shows {leaked}: {details[:300]!r}")
        if written := changed(before, databases.fingerprint()):
            problems.append(f"{case.what}: refused, but it wrote to {written}")
    assert not problems, "\n".join(problems)


def test_a_body_that_is_not_protobuf_is_an_invalid_argument_at_every_service(
    suite: Suite,
) -> None:
    methods = {
        "workflow-store": "cronwave.v1.WorkflowStoreService/GetSchedule",
        "dispatcher": "cronwave.v1.DispatcherService/TriggerRun",
        "leader-election": "cronwave.v1.LeaderElectionService/Campaign",
        "cron-planner": "cronwave.v1.CronPlannerService/PreviewFireTimes",
        "worker": "cronwave.v1.WorkerService/GetWorkerStatus",
        "payment-gateway": f"{GATEWAY}/Charge",
    }
    truncated = b"\x0a\xff\xff\xff\xff\x0f"  # field 1 says 4 GiB follow; 0 do
    not_utf8 = b"\x0a\x02\xc3\x28"  # field 1, a string, is not UTF-8
    sent = [(service, method, truncated) for service, method in methods.items()]
    sent += [(service, methods[service], not_utf8) for service in ("workflow-store", "dispatcher")]
    for service, method, body in sent:
        code, details = send(suite, service, method, body)

        assert code == grpc.StatusCode.INVALID_ARGUMENT, (service, code, details)
        request_type = method.split(".")[0] + ".v1." + method.rsplit("/", 1)[1] + "Request"
        assert details.startswith("request: ") and request_type in details, details
        assert not leaks(details, []), details
