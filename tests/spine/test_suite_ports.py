"""A suite's service whose port another process took between the pick and the listen
starts again on a new port, and a server of another suite on its port is never taken
for its own."""

from __future__ import annotations

import socket
from concurrent import futures
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

import cronwave_core.suite as suite_module
from cronwave_core.errors import ConfigurationError, Unavailable
from cronwave_core.security.tls import CredentialFiles, server_credentials
from cronwave_core.suite import (
    OWN_PORTS_VAR,
    Suite,
    SuiteConfig,
    free_port,
    own_port_range,
    wait_healthy,
)
from tests.harness.tls import as_identity


def _config(tmp_path: Path, database_url: str, redis_url: str, namespace: str) -> SuiteConfig:
    return SuiteConfig(
        data_dir=tmp_path / "suite",
        database_url=database_url,
        redis_url=redis_url,
        ports={},
        env={"CRONWAVE_NAMESPACE": namespace},
        grace=timedelta(seconds=2),
    )


def test_a_service_whose_port_was_taken_starts_on_another(
    tmp_path: Path, database_url: str, redis_url: str, namespace: str
) -> None:
    # Given a suite whose dispatcher port another process listens on before it starts
    suite = Suite(_config(tmp_path, database_url, redis_url, namespace))
    taken = suite.ports["dispatcher"]
    squatter = socket.create_server(("127.0.0.1", taken))
    try:
        # When the suite starts
        suite.start()
        # Then its dispatcher listens on a new port, which the later services were given
        assert suite.ports["dispatcher"] != taken
        assert suite.procs["dispatcher"].alive()
        assert suite.procs["cron-planner"].env["CRONWAVE_DISPATCHER_ADDR"] == (
            f"127.0.0.1:{suite.ports['dispatcher']}"
        )
        wait_healthy(suite.dispatcher_addr, timedelta(seconds=10), "cronwave.v1.DispatcherService")
    finally:
        squatter.close()
        suite.stop()
    assert suite.pids() == []


def test_a_server_of_another_service_on_the_port_is_not_taken_for_healthy() -> None:
    # Given a gRPC server that serves only the store's health on a port
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    servicer.set("cronwave.v1.WorkflowStoreService", health_pb2.HealthCheckResponse.SERVING)
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    tls = as_identity("workflow-store")
    port = server.add_secure_port(
        "127.0.0.1:0", server_credentials(CredentialFiles(tls.ca, tls.cert, tls.key))
    )
    server.start()
    try:
        address = f"127.0.0.1:{port}"
        # Then it is healthy as the store, and not as the dispatcher
        wait_healthy(address, timedelta(seconds=5), "cronwave.v1.WorkflowStoreService")
        with pytest.raises(Unavailable, match="not healthy"):
            wait_healthy(address, timedelta(seconds=1), "cronwave.v1.DispatcherService")
    finally:
        server.stop(0)


def test_a_suites_ports_lie_below_the_range_outgoing_connections_draw_from() -> None:
    # Given the kernel's ephemeral range, from which connections take their local ports
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    # When a suite picks ports for its services
    picks = [free_port() for _ in range(50)]
    # Then each lies below that range (a killed service's port is not taken meanwhile by
    # a connection's local end) and can be bound
    assert all(10_000 <= port < low for port in picks), picks
    for port in picks[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_free_port_picks_in_the_own_range_and_never_hands_a_port_out_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given an own range of 40 ports (a port picked is bound by its service only later),
    # none of them handed out by this process before (its earlier tests' suites)
    lowest = free_port()
    monkeypatch.setenv(OWN_PORTS_VAR, f"{lowest}-{lowest + 39}")
    monkeypatch.setattr(suite_module, "_handed_out", {})
    # When 30 ports are picked without binding any
    picked = [free_port() for _ in range(30)]
    # Then each lies in the range and none was handed out twice
    assert all(lowest <= port <= lowest + 39 for port in picked), picked
    assert len(set(picked)) == len(picked), picked


@pytest.mark.parametrize("text", ["20000", "20000-", "30000-20000", "80-90", "a-b", "1-70000"])
def test_a_malformed_own_range_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv(OWN_PORTS_VAR, text)
    with pytest.raises(ConfigurationError, match=f"^{OWN_PORTS_VAR}: expected LO-HI"):
        own_port_range()


def test_the_ports_a_suite_is_given_are_never_picked_for_its_other_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str, redis_url: str
) -> None:
    # Given an own range of 13 ports, the first 6 of which are given to a suite's
    # services (as `cronwave up --port-base` does: bound only when each one starts)
    lowest = suite_module.free_port_base(13)
    monkeypatch.setenv(OWN_PORTS_VAR, f"{lowest}-{lowest + 12}")
    monkeypatch.setattr(suite_module, "_handed_out", {})
    keys = ("store", "leader", "dispatcher", "planner", "worker", "redis")
    given = {key: lowest + i for i, key in enumerate(keys)}
    config = _config(tmp_path, database_url, redis_url, "unused")
    # When the suite is made, and ports are picked for its other processes
    suite = Suite(replace(config, ports=given, console=True))
    picked = [suite.ports["console"], *(free_port() for _ in range(6))]
    # Then none of them is a given one: each is one of the 7 others
    assert sorted(picked) == list(range(lowest + 6, lowest + 13)), picked
    assert {k: suite.ports[k] for k in keys} == given
