"""Every RPC of every service, fed requests drawn from its proto descriptor
(``tests.fuzz.strategies``) and raw bytes, against a real suite on loopback.

Whatever the request, the answer is never ``UNKNOWN`` or ``INTERNAL``; no message
shows an internal detail (SQL, a traceback, a path); an ``INVALID_ARGUMENT`` names a
field (``field: rule``); and a refused call wrote nothing: every table of the
scheduler's and the gateway's databases reads the same after it as before.

``CRONWAVE_FUZZ_EXAMPLES`` (default 25) sets the examples per method and
``CRONWAVE_FUZZ_SEED`` the seed (fixed by default, so a run repeats the last one; the
seed is printed). It starts once the planner leads (the last write of a quiet suite).
The planner's and the worker's methods run first, while no schedule exists; those two
processes are then stopped, so no background write can be taken for a refused call's.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest
from cronwave_proto.v1 import (
    cron_planner_service_pb2,
    dispatcher_service_pb2,
    leader_election_service_pb2,
    worker_service_pb2,
    workflow_store_service_pb2,
)
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from cronwave_billing.v1 import payment_gateway_service_pb2
from cronwave_billing.v1 import payment_gateway_service_pb2 as gateway_pb
from cronwave_core.suite import Suite
from tests.fuzz.strategies import messages, weighted
from tests.fuzz.support import FIELD_RULE, NEVER, Databases, leaks, settled, strings_in
from tests.harness.suites import SuiteFactory
from tests.harness.tls import hop_channel

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("CRONWAVE_FUZZ_EXAMPLES", "25"))
SEED = int(os.environ.get("CRONWAVE_FUZZ_SEED", "20261201"))
#: A stream is called with this deadline: WatchSchedules waits for changes forever.
STREAM_DEADLINE = 0.3
STREAM_EXAMPLES = 5
FIELDLESS_EXAMPLES = 8
UNARY_DEADLINE = 10.0


SERVED_BY = {
    "CronPlannerService": "cron-planner",
    "WorkerService": "worker",
    "LeaderElectionService": "leader-election",
    "DispatcherService": "dispatcher",
    "PaymentGatewayService": "payment-gateway",
    "WorkflowStoreService": "workflow-store",
}
#: Fuzzed while the planner and the worker are up (then they are stopped).
FIRST = {"CronPlannerService", "WorkerService"}
# (descriptor, the process that serves it, fuzzed first): every service of every
# *_service.proto.
SERVICES: list[tuple[ServiceDescriptor, str, bool]] = [
    (service, SERVED_BY[service.name], service.name in FIRST)
    for module in (
        cron_planner_service_pb2,
        worker_service_pb2,
        leader_election_service_pb2,
        dispatcher_service_pb2,
        payment_gateway_service_pb2,
        workflow_store_service_pb2,
    )
    for service in module.DESCRIPTOR.services_by_name.values()
]
#: Methods left out, each with the reason. (None: every unary method is fuzzed, and
#: the one stream, WatchSchedules, with a short deadline.)
LEFT_OUT: dict[str, str] = {}


@dataclass
class Outcome:
    code: grpc.StatusCode
    details: str


def call(channel: grpc.Channel, path: str, method: MethodDescriptor, body: bytes) -> Outcome:
    if method.server_streaming:
        stream = channel.unary_stream(path, request_serializer=None, response_deserializer=None)
        try:
            for _ in stream(body, timeout=STREAM_DEADLINE):
                pass
        except grpc.RpcError as exc:
            return Outcome(exc.code(), exc.details() or "")
        return Outcome(grpc.StatusCode.OK, "")
    unary = channel.unary_unary(path, request_serializer=None, response_deserializer=None)
    try:
        reply = unary(body, timeout=UNARY_DEADLINE)
    except grpc.RpcError as exc:
        return Outcome(exc.code(), exc.details() or "")
    return Outcome(grpc.StatusCode.OK, reply.hex())


class Cleanup:
    """Undo what an accepted call started that would go on writing by itself or
    hold later calls: a created schedule is deleted, an armed gateway drill cleared."""

    def __init__(self, channels: dict[str, grpc.Channel]) -> None:
        self._store = channels["workflow-store"]
        self._gateway = channels["payment-gateway"]

    def after(self, method: MethodDescriptor, reply_hex: str) -> None:
        if method.full_name == "cronwave.v1.WorkflowStoreService.CreateSchedule":
            created = store_pb.CreateScheduleResponse.FromString(bytes.fromhex(reply_hex))
            delete = self._store.unary_unary(
                "/cronwave.v1.WorkflowStoreService/DeleteSchedule",
                request_serializer=store_pb.DeleteScheduleRequest.SerializeToString,
                response_deserializer=store_pb.DeleteScheduleResponse.FromString,
            )
            delete(
                store_pb.DeleteScheduleRequest(schedule_id=created.schedule.schedule_id), timeout=10
            )
        if method.full_name == "cronwave_billing.v1.PaymentGatewayService.SetFaults":
            clear = self._gateway.unary_unary(
                "/cronwave_billing.v1.PaymentGatewayService/SetFaults",
                request_serializer=gateway_pb.SetFaultsRequest.SerializeToString,
                response_deserializer=gateway_pb.SetFaultsResponse.FromString,
            )
            clear(gateway_pb.SetFaultsRequest(), timeout=10)


def requests(method: MethodDescriptor) -> st.SearchStrategy[tuple[bytes, list[str]]]:
    """Serialized messages of the method's request type, and now and then raw bytes
    (which must decode or be refused as INVALID_ARGUMENT)."""
    built = messages(method.input_type).map(lambda m: (m.SerializeToString(), strings_in(m)))
    raw = st.binary(max_size=64).map(lambda b: (b, []))
    return weighted((7, built), (1, raw))


def fuzz_method(
    channel: grpc.Channel,
    method: MethodDescriptor,
    databases: Databases,
    cleanup: Cleanup,
    tally: collections.Counter[tuple[str, str]],
) -> None:
    path = f"/{method.containing_service.full_name}/{method.name}"
    examples = STREAM_EXAMPLES if method.server_streaming else EXAMPLES
    if not method.input_type.fields:  # one message only; the rest is raw bytes
        examples = min(examples, FIELDLESS_EXAMPLES)

    @seed(SEED)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )
    @given(requests(method))
    def check(request: tuple[bytes, list[str]]) -> None:
        body, sent = request
        # Nothing writes between examples, so the last example's "after" is this one's
        # "before".
        before = databases.last or databases.fingerprint()
        databases.last = None
        outcome = call(channel, path, method, body)
        tally[(method.name, outcome.code.name)] += 1
        assert outcome.code not in NEVER, f"{path}: {outcome.code.name} {outcome.details}"
        if outcome.code is grpc.StatusCode.OK:
            cleanup.after(method, outcome.details)
            return  # an accepted call may write: the next example reads afresh
        assert not leaks(outcome.details, sent), f"{path}: internals in {outcome.details!r}"
        if outcome.code is grpc.StatusCode.INVALID_ARGUMENT:
            assert FIELD_RULE.match(outcome.details), f"{path}: names no field: {outcome.details!r}"
        if not method.server_streaming or outcome.code is not grpc.StatusCode.DEADLINE_EXCEEDED:
            after = databases.fingerprint()
            changed = {t: (before[t], after.get(t)) for t in before if before[t] != after.get(t)}
            assert not changed, f"{path} was refused ({outcome.code.name}) but wrote: {changed}"
            databases.last = after

    databases.last = None
    check()


@pytest.fixture
def suite(make_suite: SuiteFactory) -> Suite:
    return make_suite(processes=("payment-gateway",))


def methods(
    services: list[tuple[ServiceDescriptor, str, bool]],
) -> Iterator[tuple[MethodDescriptor, str]]:
    for service, name, _ in services:
        for method in service.methods:
            if method.full_name not in LEFT_OUT:
                yield method, name


def test_no_request_gets_unknown_internals_or_a_half_write(
    suite: Suite, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with capsys.disabled():
        print(f"\nRPC fuzz: seed {SEED}, {EXAMPLES} examples per method "
              "(CRONWAVE_FUZZ_SEED, CRONWAVE_FUZZ_EXAMPLES)")  # fmt: skip
    settled(suite)
    gateway_url = f"sqlite:///{suite.config.data_dir / 'gateway.db'}"
    databases = Databases([database_url, gateway_url])
    channels = {name: hop_channel(suite, name) for _, name, _ in SERVICES}
    cleanup = Cleanup(channels)
    tally: collections.Counter[tuple[str, str]] = collections.Counter()
    try:
        first = [entry for entry in SERVICES if entry[2]]
        rest = [entry for entry in SERVICES if not entry[2]]
        for method, name in methods(first):
            fuzz_method(channels[name], method, databases, cleanup, tally)
        # No background writer from here on (see the module docstring).
        for proc in ("cron-planner", "worker"):
            suite.stop_proc(suite.procs[proc])
        for method, name in methods(rest):
            fuzz_method(channels[name], method, databases, cleanup, tally)
            assert suite.procs[name].alive(), f"{name} died fuzzing {method.name}"
    finally:
        for channel in channels.values():
            channel.close()
        databases.close()
    fuzzed = {m for m, _ in tally}
    every = {m.name for service, _, _ in SERVICES for m in service.methods}
    assert fuzzed == every - {n.rsplit(".", 1)[-1] for n in LEFT_OUT}
    with capsys.disabled():
        by_method: dict[str, list[str]] = collections.defaultdict(list)
        for (method_name, code), count in sorted(tally.items()):
            by_method[method_name].append(f"{code} {count}")
        print("\n".join(f"  {m}: {', '.join(codes)}" for m, codes in by_method.items()))
