"""Who may call what, against a whole suite of real processes over mutual TLS on
loopback: callers without a certificate, with a certificate of no role, with API
keys of each role, and with another service's certificate."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from cronwave_proto.v1 import api_key_service_pb2 as keys_pb
from cronwave_proto.v1 import api_key_service_pb2_grpc as keys_grpc
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import dispatcher_service_pb2 as dispatcher_pb
from cronwave_proto.v1 import dispatcher_service_pb2_grpc as dispatcher_grpc
from cronwave_proto.v1 import leader_election_service_pb2 as leader_pb
from cronwave_proto.v1 import leader_election_service_pb2_grpc as leader_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc
from google.protobuf import descriptor_pool, message_factory
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2

from cronwave_billing.v1 import payment_gateway_service_pb2 as gateway_pb
from cronwave_billing.v1 import payment_gateway_service_pb2_grpc as gateway_grpc
from cronwave_core.convert import dt_to_ts, td_to_duration
from cronwave_core.security.identity import ROLES
from cronwave_core.security.pki import ensure_pki
from cronwave_core.security.rules import rule_table
from cronwave_core.suite import Suite
from tests.harness.leases import leading_token
from tests.harness.suites import SuiteFactory
from tests.harness.tls import channel
from tests.helpers import fresh

SERVICES = ("workflow-store", "leader-election", "dispatcher", "worker", "cron-planner")
#: How long the suite's services trust an API key they have checked.
CACHE_TTL = timedelta(seconds=1)
#: A call that begins this long past the cache time after a revocation is refused: a
#: service trusts an answer for the cache time from when it asked (the default cache
#: time is 10 s); the margin only covers the clock's reading on either side.
REVOCATION_MARGIN = timedelta(milliseconds=100)


@pytest.fixture(scope="module")
def suite(shared_suite: SuiteFactory) -> Suite:
    """One suite for the module: each test makes its own keys and schedules."""
    return shared_suite(env={"CRONWAVE_AUTH_CACHE_TTL": "1s"}, processes=("payment-gateway",))


def refused(call: Callable[[], Any]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def health(address: str, creds: grpc.ChannelCredentials | None) -> Callable[[], Any]:
    def check() -> Any:
        target = (
            grpc.insecure_channel(address) if creds is None else grpc.secure_channel(address, creds)
        )
        with target:
            stub = health_pb2_grpc.HealthStub(target)
            return stub.Check(health_pb2.HealthCheckRequest(), timeout=5)

    return check


def create_key(suite: Suite, name: str, role: str) -> tuple[str, str]:
    with channel(suite.store_addr, "local-admin") as admin:
        reply = keys_grpc.ApiKeyServiceStub(admin).CreateApiKey(
            keys_pb.CreateApiKeyRequest(name=name, role=role), timeout=10
        )
    return reply.key.key_id, reply.token


def schedule(schedule_id: str) -> common_pb2.Schedule:
    return common_pb2.Schedule(
        schedule_id=schedule_id,
        job_type="cronwave.noop",
        spec=common_pb2.ScheduleSpec(
            intervals=[common_pb2.IntervalSpec(every=td_to_duration(timedelta(hours=1)))]
        ),
    )


def test_without_a_certificate_of_the_suite_no_service_answers(suite: Suite) -> None:
    ca = (suite.tls_dir / "ca.pem").read_bytes()
    other = Path(tempfile.mkdtemp(prefix="other-ca-"))
    ensure_pki(other)  # a certificate from another CA, with the administrator's name
    foreign = grpc.ssl_channel_credentials(
        ca, (other / "local-admin-key.pem").read_bytes(), (other / "local-admin.pem").read_bytes()
    )
    for name in (*SERVICES, "payment-gateway"):
        address = suite.address(name)
        # plaintext, TLS with no client certificate, a certificate of another CA
        for creds in (None, grpc.ssl_channel_credentials(ca), foreign):
            error = refused(health(address, creds))
            assert error.code() == grpc.StatusCode.UNAVAILABLE, (name, error)


def test_a_certificate_without_a_role_or_key_is_unauthenticated_everywhere(suite: Suite) -> None:
    for name in SERVICES:
        with channel(suite.address(name), "client") as anonymous:
            check = health_pb2_grpc.HealthStub(anonymous).Check
            error = refused(lambda c=check: c(health_pb2.HealthCheckRequest(), timeout=10))
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED, (name, error)
        assert "user client carries no role" in error.details()


def test_each_role_may_do_what_it_needs_and_nothing_more(suite: Suite) -> None:
    viewer_id, viewer = create_key(suite, "vera", "viewer")
    _, operator = create_key(suite, "otto", "operator")
    with channel(suite.store_addr, "local-admin") as admin:
        store_grpc.WorkflowStoreServiceStub(admin).CreateSchedule(
            store_pb.CreateScheduleRequest(schedule=schedule("billing")), timeout=10
        )
    # A viewer reads, and cannot delete
    with channel(suite.store_addr, "client", viewer) as as_viewer:
        store = store_grpc.WorkflowStoreServiceStub(as_viewer)
        listed = store.ListSchedules(store_pb.ListSchedulesRequest(), timeout=10)
        assert [s.schedule_id for s in listed.schedules] == ["billing"]
        error = refused(
            lambda: store.DeleteSchedule(
                store_pb.DeleteScheduleRequest(schedule_id="billing"), timeout=10
            )
        )
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error.details() == (
        f"user vera (viewer, API key {viewer_id}) may not call "
        "/cronwave.v1.WorkflowStoreService/DeleteSchedule: it needs role admin"
    )
    # An operator pauses, and cannot create keys
    with channel(suite.store_addr, "client", operator) as as_operator:
        store = store_grpc.WorkflowStoreServiceStub(as_operator)
        paused = store.PauseSchedule(
            store_pb.PauseScheduleRequest(schedule_id="billing"), timeout=10
        )
        assert paused.schedule.paused
        keys = keys_grpc.ApiKeyServiceStub(as_operator)
        error = refused(
            lambda: keys.CreateApiKey(
                keys_pb.CreateApiKeyRequest(name="mallory", role="admin"), timeout=10
            )
        )
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "needs role admin" in error.details()
    # Keys work at every service, not only the store that keeps them
    with channel(suite.leader_addr, "client", viewer) as to_leader:
        lease = leader_grpc.LeaderElectionServiceStub(to_leader).Observe(
            leader_pb.ObserveRequest(scope="planner"), timeout=10
        )
    assert lease.lease.scope == "planner"
    # Nothing of the refused calls was written
    with channel(suite.store_addr, "local-admin") as admin:
        listed = keys_grpc.ApiKeyServiceStub(admin).ListApiKeys(
            keys_pb.ListApiKeysRequest(include_revoked=True), timeout=10
        )
        names = sorted(k.name for k in listed.keys)
        assert names == ["otto", "vera"]
        got = store_grpc.WorkflowStoreServiceStub(admin).GetSchedule(
            store_pb.GetScheduleRequest(schedule_id="billing"), timeout=10
        )
        assert got.schedule.schedule_id == "billing"


#: The process of a suite that serves each service of the rule table.
SERVED_BY = {
    "cronwave.v1.WorkflowStoreService": "workflow-store",
    "cronwave.v1.ApiKeyService": "workflow-store",
    "cronwave.v1.DispatcherService": "dispatcher",
    "cronwave.v1.CronPlannerService": "cron-planner",
    "cronwave.v1.LeaderElectionService": "leader-election",
    "cronwave.v1.WorkerService": "worker",
    "cronwave_billing.v1.PaymentGatewayService": "payment-gateway",
    "grpc.reflection.v1alpha.ServerReflection": "workflow-store",
}
#: A streaming call allowed to run is ended after this (WatchSchedules waits forever).
STREAM_DEADLINE = 0.5


def role_gated() -> list[tuple[str, str]]:
    """(method, least role) of every rule a person's role satisfies: from the rule
    table itself, so a method added to it is tested here at once."""
    return sorted((method, rule.role) for method, rule in rule_table().items() if rule.role)


def answer_code(address: str, method: str, identity: str, token: str) -> tuple[str, str]:
    """(status code name, details) of ``method`` called with an empty request: unary,
    or a stream read for its first message; ``OK`` when that came."""
    service, name = method.strip("/").split("/")
    assert reflection_pb2.DESCRIPTOR  # (its methods are in the default pool once imported)
    descriptor = descriptor_pool.Default().FindMethodByName(f"{service}.{name}")
    request_class = message_factory.GetMessageClass(descriptor.input_type)
    reply_class = message_factory.GetMessageClass(descriptor.output_type)
    codec: dict[str, Any] = {
        "request_serializer": request_class.SerializeToString,
        "response_deserializer": reply_class.FromString,
    }
    with channel(address, identity, token) as target:
        try:
            if descriptor.client_streaming and descriptor.server_streaming:
                replies = target.stream_stream(method, **codec)(
                    iter([request_class()]), timeout=STREAM_DEADLINE
                )
                next(iter(replies))
            elif descriptor.server_streaming:
                replies = target.unary_stream(method, **codec)(
                    request_class(), timeout=STREAM_DEADLINE
                )
                next(iter(replies))
            else:
                target.unary_unary(method, **codec)(request_class(), timeout=10)
        except grpc.RpcError as error:
            return error.code().name, error.details() or ""
    return "OK", ""


def test_every_role_gated_rpc_refuses_the_role_below_and_admits_its_own(suite: Suite) -> None:
    # Given a key of each role, and the role-gated methods of the rule table
    tokens = {role: create_key(suite, fresh(role), role)[1] for role in ROLES}
    gated = role_gated()
    assert len(gated) >= 25 and {role for _, role in gated} == set(ROLES)
    wrong = []
    for method, role in gated:
        address = suite.address(SERVED_BY[method.strip("/").split("/")[0]])
        # When a key of the role just below calls it (below viewer: a certificate
        # of a person with no role), and then a key of its own role
        rank = ROLES.index(role)
        below = ("client", tokens[ROLES[rank - 1]]) if rank else ("client", "")
        refused_code, details = answer_code(address, method, *below)
        admitted_code, admitted_details = answer_code(address, method, "client", tokens[role])
        # Then the first is refused, naming the role it needs, and the second is not
        expected = "PERMISSION_DENIED" if rank else "UNAUTHENTICATED"
        if refused_code != expected or (rank and f"role {role}" not in details):
            wrong.append(f"{method} below {role}: {refused_code} {details!r}")
        if admitted_code in ("PERMISSION_DENIED", "UNAUTHENTICATED"):
            wrong.append(f"{method} as {role}: {admitted_code} {admitted_details!r}")
    assert not wrong, "\n".join(wrong)


def test_a_revoked_key_is_refused_within_its_cache_time(suite: Suite) -> None:
    # Given an operator's key that the store, the dispatcher and leader-election have
    # each checked (and so trust for their cache time, 1 s)
    key_id, token = create_key(suite, "ci", "operator")
    with (
        channel(suite.store_addr, "client", token) as to_store,
        channel(suite.dispatcher_addr, "client", token) as to_dispatcher,
        channel(suite.leader_addr, "client", token) as to_leader,
    ):
        store = store_grpc.WorkflowStoreServiceStub(to_store)
        dispatcher = dispatcher_grpc.DispatcherServiceStub(to_dispatcher)
        leader = leader_grpc.LeaderElectionServiceStub(to_leader)
        calls = {
            "workflow-store": lambda: store.ListSchedules(
                store_pb.ListSchedulesRequest(limit=1), timeout=10
            ),
            "dispatcher": lambda: dispatcher.TriggerRun(
                dispatcher_pb.TriggerRunRequest(schedule_id="nothing-here"), timeout=10
            ),
            "leader-election": lambda: leader.Observe(
                leader_pb.ObserveRequest(scope="planner"), timeout=10
            ),
        }

        def answer(call: Callable[[], object]) -> str:
            try:
                call()
                return "OK"
            except grpc.RpcError as error:
                return str(error.code().name)

        assert {name: answer(call) for name, call in calls.items()} == {
            "workflow-store": "OK",
            "dispatcher": "NOT_FOUND",  # allowed; no such schedule
            "leader-election": "OK",
        }

        # When the key is revoked, and used all the while (every cache hit must not
        # extend the answer's life)
        with channel(suite.store_addr, "local-admin") as admin:
            keys_grpc.ApiKeyServiceStub(admin).RevokeApiKey(
                keys_pb.RevokeApiKeyRequest(key_id=key_id), timeout=10
            )
        revoked = time.monotonic()
        trusted_until = revoked + (CACHE_TTL + REVOCATION_MARGIN).total_seconds()
        seen: dict[str, list[tuple[float, str]]] = {name: [] for name in calls}
        for _ in range(2_000):  # bounded: 50 ms apart, and by the time below
            for name, call in calls.items():
                started = time.monotonic()
                seen[name].append((started, answer(call)))
            late = [[at for at, _ in answers if at >= trusted_until] for answers in seen.values()]
            if all(len(ats) >= 3 for ats in late) or time.monotonic() > revoked + 60:
                break
            time.sleep(0.05)

    # Then every call that began once the cache time (plus a clock margin) had passed
    # since the revocation was refused, by every service: a measure that does not
    # depend on how fast a loaded machine answers
    for name, answers in seen.items():
        late = [code for at, code in answers if at >= trusted_until]
        assert len(late) >= 3, f"{name}: too few calls after the cache time: {answers}"
        assert set(late) == {"UNAUTHENTICATED"}, f"{name}: {late}"
        refused = next(at for at, code in answers if code == "UNAUTHENTICATED")
        print(f"\n{name} refused the revoked key {refused - revoked:.2f} s after")


def test_a_service_may_make_only_its_own_hops(suite: Suite) -> None:
    # A process holding the dispatcher's certificate cannot claim a run
    with channel(suite.store_addr, "dispatcher") as as_dispatcher:
        store = store_grpc.WorkflowStoreServiceStub(as_dispatcher)
        claim = store_pb.ClaimRunsRequest(
            claims=[store_pb.ClaimRunRequest(run_id="run_x", worker_id="w")]
        )
        error = refused(lambda: store.ClaimRuns(claim, timeout=10))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error.details() == (
        "service dispatcher may not call /cronwave.v1.WorkflowStoreService/ClaimRuns: "
        "it needs service worker"
    )
    # One holding a worker's certificate cannot start fires, nor campaign
    with channel(suite.dispatcher_addr, "worker") as as_worker:
        start = dispatcher_pb.StartRunsRequest(
            starts=[dispatcher_pb.StartRunRequest(schedule_id="billing")]
        )
        error = refused(
            lambda: dispatcher_grpc.DispatcherServiceStub(as_worker).StartRuns(start, timeout=10)
        )
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "needs service cron-planner" in error.details()
    with channel(suite.leader_addr, "worker") as as_worker:
        campaign = leader_pb.CampaignRequest(scope="planner", candidate="intruder")
        error = refused(
            lambda: leader_grpc.LeaderElectionServiceStub(as_worker).Campaign(campaign, timeout=10)
        )
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    # The administrator cannot make a service's hop either
    with channel(suite.store_addr, "local-admin") as admin:
        error = refused(
            lambda: store_grpc.WorkflowStoreServiceStub(admin).ClaimRuns(claim, timeout=10)
        )
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED


def test_a_forged_fencing_token_over_a_planners_connection_is_still_refused(
    suite: Suite,
) -> None:
    with channel(suite.store_addr, "local-admin") as admin:
        store_grpc.WorkflowStoreServiceStub(admin).CreateSchedule(
            store_pb.CreateScheduleRequest(schedule=schedule(fresh("fenced"))), timeout=10
        )
    # A token past the newest issued: wait until the suite's planner holds its lease,
    # so the scope has tokens and the forged one is beyond them
    lease = leading_token(suite)
    assert lease < 10**12
    with channel(suite.store_addr, "cron-planner") as as_planner:
        store = store_grpc.WorkflowStoreServiceStub(as_planner)
        missed = store_pb.RecordMissedSlotsRequest(
            slots=[
                store_pb.MissedSlot(
                    schedule_id="any",
                    fire_time=dt_to_ts(datetime(2026, 1, 1, tzinfo=UTC)),
                    reason="forged",
                )
            ],
            fencing_token=10**12,
            fencing_scope="planner",
        )
        error = refused(lambda: store.RecordMissedSlots(missed, timeout=10))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "fencing_token: 1000000000000 was never issued" in error.details()


def test_only_the_workers_jobs_may_charge(suite: Suite) -> None:
    charge = gateway_pb.ChargeRequest(
        item=gateway_pb.ChargeItem(
            idempotency_key="k1",
            customer_id="c1",
            invoice_id="inv-1",
            amount_cents=100,
            currency="eur",
        )
    )
    with channel(suite.address("payment-gateway"), "local-admin") as admin:
        gateway = gateway_grpc.PaymentGatewayServiceStub(admin)
        error = refused(lambda: gateway.Charge(charge, timeout=10))
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "needs service worker" in error.details()
        assert gateway.CountCharges(gateway_pb.CountChargesRequest(), timeout=10).charges == 0
    with channel(suite.address("payment-gateway"), "worker") as as_worker:
        reply = gateway_grpc.PaymentGatewayServiceStub(as_worker).Charge(charge, timeout=10)
    assert reply.result.charge.customer_id == "c1"


def test_a_run_a_person_triggers_is_audited_as_theirs(suite: Suite) -> None:
    # Given an operator's key and a schedule
    _, token = create_key(suite, "otto", "operator")
    schedule_id = fresh("audited")
    with channel(suite.store_addr, "local-admin") as admin:
        store_grpc.WorkflowStoreServiceStub(admin).CreateSchedule(
            store_pb.CreateScheduleRequest(schedule=schedule(schedule_id)), timeout=10
        )
    # When the operator triggers it (the dispatcher records the run in the store)
    with channel(suite.dispatcher_addr, "client", token) as as_otto:
        dispatcher_grpc.DispatcherServiceStub(as_otto).TriggerRun(
            dispatcher_pb.TriggerRunRequest(schedule_id=schedule_id), timeout=10
        )
    # Then the store's audit row names the operator, relayed by the dispatcher
    with channel(suite.store_addr, "local-admin") as admin:
        events = (
            store_grpc.WorkflowStoreServiceStub(admin)
            .ListAuditEvents(store_pb.ListAuditEventsRequest(schedule_id=schedule_id), timeout=10)
            .events
        )
    by_rpc = {event.rpc: event.actor for event in events}
    assert by_rpc["CreateSchedule"] == "user:local-admin"
    assert by_rpc["RecordRuns"] == "user:otto via service:dispatcher", by_rpc


def audit_actors(suite: Suite, rpc: str, schedule_id: str = "") -> list[str]:
    """The actors of the store's audit rows of ``rpc`` (of ``schedule_id``'s events, or
    of every event when it is empty), newest first."""
    with channel(suite.store_addr, "local-admin") as admin:
        events = (
            store_grpc.WorkflowStoreServiceStub(admin)
            .ListAuditEvents(
                store_pb.ListAuditEventsRequest(schedule_id=schedule_id, limit=1000), timeout=10
            )
            .events
        )
    return [event.actor for event in events if event.rpc == rpc]


def test_on_behalf_of_from_no_relay_and_with_a_users_key_changes_nothing_in_the_audit(
    suite: Suite,
) -> None:
    # Given an operator's key, a schedule, and a claim to act for another person
    # that every call below carries
    _, token = create_key(suite, "otto", "operator")
    schedule_id = fresh("relayed")
    with channel(suite.store_addr, "local-admin") as admin:
        store_grpc.WorkflowStoreServiceStub(admin).CreateSchedule(
            store_pb.CreateScheduleRequest(schedule=schedule(schedule_id)),
            metadata=[("cronwave-on-behalf-of", "user:mallory")],
            timeout=10,
        )
    claim = [("cronwave-on-behalf-of", "user:mallory")]
    job_type = fresh("relayed.job").replace("-", ".")

    # When a worker's certificate (a service that relays nobody) registers a job type
    with channel(suite.store_addr, "worker") as as_worker:
        store_grpc.WorkflowStoreServiceStub(as_worker).RegisterJobType(
            store_pb.RegisterJobTypeRequest(
                job_type=common_pb2.JobType(
                    name=job_type, duration_limit=td_to_duration(timedelta(minutes=1))
                )
            ),
            metadata=claim,
            timeout=10,
        )
    # and the operator's key pauses the schedule at the store, and triggers it at the
    # dispatcher (a relay, which records the run for the caller it authenticated)
    with channel(suite.store_addr, "client", token) as as_otto:
        store_grpc.WorkflowStoreServiceStub(as_otto).PauseSchedule(
            store_pb.PauseScheduleRequest(schedule_id=schedule_id), metadata=claim, timeout=10
        )
    with channel(suite.dispatcher_addr, "client", token) as as_otto:
        dispatcher_grpc.DispatcherServiceStub(as_otto).TriggerRun(
            dispatcher_pb.TriggerRunRequest(schedule_id=schedule_id), metadata=claim, timeout=10
        )

    # Then the audit trail names who really called, never the person claimed
    with channel(suite.store_addr, "local-admin") as admin:
        registered = [
            event.actor
            for event in store_grpc.WorkflowStoreServiceStub(admin)
            .ListAuditEvents(store_pb.ListAuditEventsRequest(limit=1000), timeout=10)
            .events
            if event.rpc == "RegisterJobType" and job_type in event.changes_json
        ]
    assert registered == ["service:worker"]
    assert audit_actors(suite, "CreateSchedule", schedule_id) == ["user:local-admin"]
    assert audit_actors(suite, "PauseSchedule", schedule_id) == ["user:otto"]
    assert audit_actors(suite, "RecordRuns", schedule_id) == ["user:otto via service:dispatcher"]


def test_a_planners_certificate_starts_no_fire_of_a_paused_schedule_and_no_manual_run(
    suite: Suite,
) -> None:
    # Given a paused schedule, and the fencing token of the planner that leads
    schedule_id = fresh("paused")
    with channel(suite.store_addr, "local-admin") as admin:
        store = store_grpc.WorkflowStoreServiceStub(admin)
        store.CreateSchedule(
            store_pb.CreateScheduleRequest(schedule=schedule(schedule_id)), timeout=10
        )
        store.PauseSchedule(store_pb.PauseScheduleRequest(schedule_id=schedule_id), timeout=10)
    token = leading_token(suite)

    def start(trigger: common_pb2.TriggerKind) -> dispatcher_pb.StartRunsRequest:
        return dispatcher_pb.StartRunsRequest(
            starts=[
                dispatcher_pb.StartRunRequest(
                    schedule_id=schedule_id,
                    fire_time=dt_to_ts(datetime(2030, 1, 1, tzinfo=UTC)),
                    trigger=trigger,
                    fencing_token=token,
                )
            ]
        )

    # When a planner's certificate starts a fire of it with that token, and a manual
    # run of it in a person's name
    with channel(suite.dispatcher_addr, "cron-planner") as as_planner:
        dispatcher = dispatcher_grpc.DispatcherServiceStub(as_planner)
        fired = dispatcher.StartRuns(start(common_pb2.TRIGGER_KIND_SCHEDULED), timeout=10)
        manual = refused(
            lambda: dispatcher.StartRuns(
                start(common_pb2.TRIGGER_KIND_MANUAL),
                metadata=[("cronwave-on-behalf-of", "user:otto")],
                timeout=10,
            )
        )

    # Then both are refused, naming the schedule and the trigger
    [result] = fired.results
    assert result.error.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert result.error.message.startswith(f"schedule_id: schedule '{schedule_id}' is paused")
    assert manual.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert manual.details().startswith("starts[0].trigger: StartRuns starts a planner's fires")
    # and the schedule has no run, until a person triggers it
    with channel(suite.store_addr, "local-admin") as admin:
        store = store_grpc.WorkflowStoreServiceStub(admin)
        listed = store.ListRuns(store_pb.ListRunsRequest(schedule_id=schedule_id), timeout=10)
        assert list(listed.runs) == []
    with channel(suite.dispatcher_addr, "local-admin") as as_admin:
        triggered = dispatcher_grpc.DispatcherServiceStub(as_admin).TriggerRun(
            dispatcher_pb.TriggerRunRequest(schedule_id=schedule_id), timeout=10
        )
    assert triggered.created and triggered.run.trigger == common_pb2.TRIGGER_KIND_MANUAL
