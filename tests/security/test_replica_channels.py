"""A channel to a service's replicas (``CRONWAVE_STORE_ADDR=IP:PORT,IP:PORT``,
``cronwave_core.targets``): calls spread over every replica, a replica that stops
leaves the calls to the others, and mutual TLS still verifies each replica's
certificate by the name the list gives (its first host)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from cronwave_core.security.pki import LocalCA, ensure_pki, service_uri
from cronwave_core.security.tls import CredentialFiles, new_channel, server_credentials
from cronwave_core.settings import TlsSettings
from tests.helpers import eventually

CHECK = health_pb2.HealthCheckRequest()


class _Counted(grpc.ServerInterceptor):
    """Counts the calls a server handled."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def intercept_service(self, continuation: Callable[..., Any], details: Any) -> Any:
        with self._lock:
            self.calls += 1
        return continuation(details)


class _Replica:
    def __init__(self, tls_dir: Path, cert: str) -> None:
        self.counted = _Counted()
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=2), interceptors=[self.counted]
        )
        health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), self.server)
        files = CredentialFiles(
            tls_dir / "ca.pem", tls_dir / f"{cert}.pem", tls_dir / f"{cert}-key.pem"
        )
        self.port = self.server.add_secure_port("127.0.0.1:0", server_credentials(files))
        self.address = f"127.0.0.1:{self.port}"
        self.server.start()


def _caller(tls_dir: Path) -> TlsSettings:
    return TlsSettings(
        insecure=False,
        tls_dir=tls_dir,
        identity="dispatcher",
        ca=tls_dir / "ca.pem",
        cert=tls_dir / "dispatcher.pem",
        key=tls_dir / "dispatcher-key.pem",
        token="",
    )


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Callable[[str], _Replica]]:
    tls_dir = ensure_pki(tmp_path / "tls")
    started: list[_Replica] = []

    def start(cert: str = "workflow-store") -> _Replica:
        replica = _Replica(tls_dir, cert)
        started.append(replica)
        return replica

    yield start
    for replica in started:
        replica.server.stop(0)


def test_calls_spread_over_every_replica_and_move_off_one_that_stops(
    tmp_path: Path, replicas: Callable[..., _Replica]
) -> None:
    # Given two replicas of the store, named in one list
    first, second = replicas(), replicas()
    tls = _caller(tmp_path / "tls")
    with new_channel(f"{first.address}, {second.address}", (), tls) as channel:
        check = health_pb2_grpc.HealthStub(channel).Check

        # When calls are made, then both replicas answer some
        def both_called() -> bool:
            for _ in range(10):
                check(CHECK, timeout=5)
            return first.counted.calls > 0 and second.counted.calls > 0

        eventually(both_called, timeout=20, interval=0.1, what="calls on both replicas")

        # When one replica stops, then the calls go on, all on the other one
        first.server.stop(0).wait(5)
        before = (first.counted.calls, second.counted.calls)

        def ten_in_a_row() -> bool:
            try:
                for _ in range(10):
                    check(CHECK, timeout=5)
            except grpc.RpcError as exc:  # a call that met the stop
                raise AssertionError(f"a call failed: {exc.code()}") from exc
            return True

        eventually(ten_in_a_row, timeout=20, interval=0.1, what="ten calls in a row after a stop")
        assert first.counted.calls == before[0]
        assert second.counted.calls >= before[1] + 10


def test_each_replica_is_verified_by_the_first_listed_host(
    tmp_path: Path, replicas: Callable[..., _Replica]
) -> None:
    # Given a replica whose certificate names the service but not 127.0.0.1 (the
    # list's first host), beside one whose certificate carries it
    tls_dir = tmp_path / "tls"
    replicas()  # makes the CA
    ca = LocalCA(tls_dir)
    key, cert = ca.issue(service_uri("workflow-store"), "workflow-store")
    ca.write("unnamed-store", key, cert)
    unnamed, good = replicas("unnamed-store"), replicas()
    tls = _caller(tls_dir)

    # When the list names the unnamed one alone (twice), then no call gets through
    with new_channel(f"{unnamed.address},{unnamed.address}", (), tls) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            health_pb2_grpc.HealthStub(channel).Check(CHECK, timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE

    # And when it is listed with the good one, every call goes to the good one
    with new_channel(f"{unnamed.address},{good.address}", (), tls) as channel:
        check = health_pb2_grpc.HealthStub(channel).Check
        for _ in range(10):
            check(CHECK, timeout=5)
    assert unnamed.counted.calls == 0
    assert good.counted.calls == 10
