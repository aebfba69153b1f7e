"""Default deny: every RPC of every service cronwave serves has an explicit rule, and
a method without one is refused to everyone, the local administrator too."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
from cronwave_proto.v1 import (
    api_key_service_pb2,
    cron_planner_service_pb2,
    dispatcher_service_pb2,
    leader_election_service_pb2,
    worker_service_pb2,
    workflow_store_service_pb2,
)
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from cronwave_billing.v1 import payment_gateway_service_pb2
from cronwave_core.bootstrap import RunningServer, Service
from cronwave_core.security.rules import rule_table
from cronwave_core.suite import free_port
from tests.harness.tls import as_identity, channel

DESCRIPTORS = (
    workflow_store_service_pb2,
    api_key_service_pb2,
    dispatcher_service_pb2,
    cron_planner_service_pb2,
    leader_election_service_pb2,
    worker_service_pb2,
    payment_gateway_service_pb2,
    health_pb2,
    reflection_pb2,
)


def served_methods() -> set[str]:
    return {
        f"/{service.full_name}/{method.name}"
        for module in DESCRIPTORS
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }


def test_every_rpc_has_a_rule_and_every_rule_an_rpc() -> None:
    methods = served_methods()
    assert len(methods) > 50
    missing = sorted(methods - set(rule_table()))
    assert not missing, f"RPCs without an authorisation rule (refused to all): {missing}"
    stale = sorted(set(rule_table()) - methods)
    assert not stale, f"rules for RPCs no service has: {stale}"


def test_the_rule_table_lists_every_rpc_and_who_may_call_it() -> None:
    """The table the closing note and docs/operations/security.md show, from the code."""
    for method in sorted(served_methods()):
        rule = rule_table()[method]
        assert rule.describe() != "nobody", f"{method} has a rule nobody can satisfy"


def _ping(request: bytes, context: grpc.ServicerContext) -> bytes:
    return b"pong"


@pytest.fixture
def unruled_server() -> Iterator[str]:
    """A real server, as every service starts (mutual TLS, the interceptors), that
    also serves a method no rule names."""
    address = f"127.0.0.1:{free_port()}"

    def register(server: grpc.Server) -> None:
        handler = grpc.method_handlers_generic_handler(
            "cronwave.test.Unruled", {"Ping": grpc.unary_unary_rpc_method_handler(_ping)}
        )
        server.add_generic_rpc_handlers((handler,))

    running = RunningServer(
        Service("unruled", address, register, ["cronwave.test.Unruled"]),
        timedelta(seconds=1),
        traced=False,
        tls=as_identity("workflow-store"),
    )
    running.start()
    try:
        yield address
    finally:
        running.stop()


def test_a_method_without_a_rule_is_refused_even_to_the_administrator(
    unruled_server: str,
) -> None:
    with channel(unruled_server, "local-admin") as admin:
        ping = admin.unary_unary("/cronwave.test.Unruled/Ping")
        with pytest.raises(grpc.RpcError) as refused:
            ping(b"", timeout=10)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "/cronwave.test.Unruled/Ping has no authorisation rule" in refused.value.details()
    assert "user local-admin" in refused.value.details()


def test_the_operations_guide_shows_every_rule() -> None:
    guide = (Path(__file__).parents[2] / "docs" / "operations" / "security.md").read_text()
    for method, rule in rule_table().items():
        service, name = method.strip("/").split("/")
        row = next(
            (line for line in guide.splitlines() if f"`{service.split('.')[-1]}/{name}`" in line),
            None,
        )
        assert row is not None, f"docs/operations/security.md (Rules) does not list {method}"
        assert (rule.role or "-") in row.split("|")[-2], (method, row)
