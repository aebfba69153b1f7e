"""cronwave_core.telemetry.rpc_hops: every RPC's hop follows from its service's rule."""

from __future__ import annotations

import importlib
import pkgutil

import cronwave_proto.v1
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import ServiceDescriptor

from cronwave_core.telemetry.rpc_hops import SERVICES, ServiceHops, rpc_hop
from cronwave_core.telemetry.vocabulary import Hop

STORE = "/cronwave.v1.WorkflowStoreService/"


def _generated_services() -> dict[str, ServiceDescriptor]:
    services: dict[str, ServiceDescriptor] = {}
    for module in pkgutil.iter_modules(cronwave_proto.v1.__path__):
        if module.name.endswith("_pb2"):
            generated = importlib.import_module(f"cronwave_proto.v1.{module.name}")
            for service in generated.DESCRIPTOR.services_by_name.values():
                services[service.full_name] = service
    return services


def _service(*methods: str) -> ServiceDescriptor:
    """A service of its own proto file, in a pool of its own, with ``methods``."""
    proto = descriptor_pb2.FileDescriptorProto(name="probe.proto", package="probe")
    proto.message_type.add(name="Empty")
    service = proto.service.add(name="ProbeService")
    for name in methods:
        service.method.add(name=name, input_type=".probe.Empty", output_type=".probe.Empty")
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(proto.SerializeToString())
    return pool.FindServiceByName("probe.ProbeService")


def test_every_service_of_the_package_states_its_rule_once() -> None:
    # Given every gRPC service the generated code declares
    declared = _generated_services()

    # Then each has exactly one rule, and no rule names a service that is gone
    ruled = [rule.service.full_name for rule in SERVICES]
    assert sorted(ruled) == sorted(declared)
    assert all(rule.service is declared[rule.service.full_name] for rule in SERVICES)


def test_every_rpc_has_the_hop_its_rule_gives_it() -> None:
    # Given every RPC of every service, by its full path
    for rule in SERVICES:
        for method in rule.service.methods:
            path = f"/{rule.service.full_name}/{method.name}"
            # Then the lookup answers the rule's hop (None: the RPC has no hop)
            assert rpc_hop(path) == rule.hop_of(method.name), path
            assert rpc_hop(path) is None or isinstance(rpc_hop(path), Hop)


def test_the_hops_of_a_run_s_rpcs() -> None:
    # A run's writes are filed under the hop that makes them ...
    assert rpc_hop(STORE + "RecordRuns") is Hop.PERSIST
    assert rpc_hop(STORE + "ClaimRuns") is Hop.PICKUP
    assert rpc_hop(STORE + "GetRuns") is Hop.PICKUP
    assert rpc_hop(STORE + "Heartbeat") is Hop.EXECUTE
    assert rpc_hop(STORE + "CompleteRuns") is Hop.COMPLETE
    assert rpc_hop(STORE + "DeadLetterRun") is Hop.COMPLETE
    assert rpc_hop("/cronwave.v1.DispatcherService/StartRuns") is Hop.DISPATCH
    assert rpc_hop("/cronwave.v1.DispatcherService/TriggerRun") is Hop.DISPATCH
    assert rpc_hop("/cronwave.v1.LeaderElectionService/Campaign") is Hop.LEADER
    # ... reads, a run's history, the planner's missed slots and calls outside
    # cronwave's services take the hop of the span they happen in
    assert rpc_hop(STORE + "ListRuns") is None
    assert rpc_hop(STORE + "AppendRunEvents") is None
    assert rpc_hop(STORE + "RecordMissedSlots") is None
    assert rpc_hop("/cronwave.v1.CronPlannerService/Backfill") is None
    assert rpc_hop("/grpc.health.v1.Health/Check") is None


def test_a_new_rpc_takes_its_hop_from_its_name() -> None:
    # Given a service whose rule names verbs and one exception
    service = _service("RecordThings", "ClaimThing", "ListThings", "RecordNothing")
    rule = ServiceHops(
        service,
        default=None,
        verbs={"Record": Hop.PERSIST, "Claim": Hop.PICKUP},
        exceptions={"RecordNothing": None},
    )

    # Then each RPC has the hop of its verb, of its exception, or the default
    assert rule.hops() == {
        "/probe.ProbeService/RecordThings": Hop.PERSIST,
        "/probe.ProbeService/ClaimThing": Hop.PICKUP,
        "/probe.ProbeService/ListThings": None,
        "/probe.ProbeService/RecordNothing": None,
    }
    # and a service's default covers every RPC no verb names
    everything = ServiceHops(service, default=Hop.LEADER)
    assert set(everything.hops().values()) == {Hop.LEADER}


def test_a_rule_that_names_no_rpc_of_its_service_is_refused() -> None:
    service = _service("RecordThings")
    # An exception for an RPC that is gone (renamed, removed) says which
    with pytest.raises(ValueError, match="RecordThing;"):
        ServiceHops(service, default=None, exceptions={"RecordThing": None})
    # and so does a verb no RPC starts with
    with pytest.raises(ValueError, match="start no RPC's name: Claim;"):
        ServiceHops(service, default=None, verbs={"Claim": Hop.PICKUP})
