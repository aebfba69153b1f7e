"""The transport: plaintext only where asked for and only on loopback, and a
server's certificate read again when its files change."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc
from cryptography import x509
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from cronwave import Client
from cronwave_core.domain.spec import Interval
from cronwave_core.security.pki import LocalCA, ensure_pki, service_uri
from cronwave_core.security.tls import CredentialFiles, new_channel, server_credentials
from cronwave_core.settings import TlsSettings
from cronwave_core.suite import Suite, free_port
from tests.harness.suites import SuiteFactory, make_suite  # noqa: F401  (fixture)
from tests.helpers import eventually, fresh


def test_an_insecure_suite_runs_plaintext_on_loopback(make_suite: SuiteFactory) -> None:  # noqa: F811
    suite = make_suite(insecure=True)
    # Plaintext is answered, and nobody is asked who they are
    with grpc.insecure_channel(suite.store_addr) as plain:
        listed = store_grpc.WorkflowStoreServiceStub(plain).ListSchedules(
            store_pb.ListSchedulesRequest(), timeout=10
        )
    assert list(listed.schedules) == []
    # And a schedule runs through every hop
    with Client(
        store_addr=suite.store_addr,
        dispatcher_addr=suite.dispatcher_addr,
        planner_addr=suite.planner_addr,
        leader_addr=suite.leader_addr,
        tls=suite.tls(),
    ) as client:
        schedule_id = fresh("plain")
        client.create_schedule(
            schedule_id, job_type="cronwave.noop", intervals=[Interval(timedelta(seconds=1))]
        )
        eventually(
            lambda: any(r.state == "SUCCEEDED" for r in client.list_runs(schedule_id)),
            timeout=30,
            what="a run succeeded over plaintext",
        )


def test_insecure_refuses_to_listen_beyond_loopback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWAVE_")}
    env.update(
        CRONWAVE_INSECURE="1",
        CRONWAVE_DATA_DIR=str(tmp_path),
        CRONWAVE_STORE_ADDR=f"0.0.0.0:{free_port()}",
        CRONWAVE_TRACING="0",
    )
    done = subprocess.run(
        [sys.executable, "-P", "-m", "workflow_store"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "CRONWAVE_INSECURE=1 serves plaintext without authentication" in done.stderr
    assert "not on 0.0.0.0:" in done.stderr


def _served_serial(suite: Suite) -> int:
    """The serial number of the certificate the store presents to a new connection."""
    tls = suite.tls()
    context = ssl.create_default_context(cafile=str(tls.ca))
    context.load_cert_chain(str(tls.cert), str(tls.key))
    context.set_alpn_protocols(["h2"])
    host, port = suite.store_addr.rsplit(":", 1)
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as wrapped,
    ):
        der = wrapped.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


@pytest.fixture
def own_ca_suite(make_suite: SuiteFactory, tmp_path: Path) -> Iterator[Suite]:  # noqa: F811
    """A suite with a CA of its own, so that rotating its certificates touches no
    other test's."""
    yield make_suite(tls_dir=tmp_path / "tls")


def test_a_servers_certificate_is_read_again_when_its_files_change(own_ca_suite: Suite) -> None:
    suite = own_ca_suite
    before = _served_serial(suite)
    stored = x509.load_pem_x509_certificate((suite.tls_dir / "workflow-store.pem").read_bytes())
    assert before == stored.serial_number
    # When the store's certificate is renewed in place (as cert-manager does)
    ca = LocalCA(suite.tls_dir)
    key, cert = ca.issue(
        service_uri("workflow-store"), "workflow-store", dns_names=("workflow-store", "localhost")
    )
    ca.write("workflow-store", key, cert)
    renewed = x509.load_pem_x509_certificate(cert).serial_number
    # Then new connections get the new one, without a restart
    eventually(
        lambda: _served_serial(suite) == renewed,
        timeout=timedelta(seconds=20).total_seconds(),
        what="the renewed certificate served",
    )
    assert suite.procs["workflow-store"].alive()


class _PeerCertificates(grpc.ServerInterceptor):
    """Records the serial number of the certificate each call's client presented."""

    def __init__(self) -> None:
        self.serials: list[int] = []

    def intercept_service(self, continuation: Any, details: Any) -> Any:
        handler = continuation(details)
        inner = handler.unary_unary

        def unary_unary(request: Any, context: grpc.ServicerContext) -> Any:
            (pem,) = context.auth_context()["x509_pem_cert"]
            self.serials.append(x509.load_pem_x509_certificate(pem).serial_number)
            return inner(request, context)

        return handler._replace(unary_unary=unary_unary)


def test_a_channel_presents_its_renewed_certificate_without_being_made_again(
    tmp_path: Path,
) -> None:
    tls_dir = ensure_pki(tmp_path / "tls")
    # Given a server and a long-lived channel to it, as a worker's to its store
    seen = _PeerCertificates()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), interceptors=[seen])
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    files = CredentialFiles(
        tls_dir / "ca.pem", tls_dir / "workflow-store.pem", tls_dir / "workflow-store-key.pem"
    )
    port = server.add_secure_port("127.0.0.1:0", server_credentials(files))
    server.start()
    worker = TlsSettings(
        insecure=False,
        tls_dir=tls_dir,
        identity="worker",
        ca=tls_dir / "ca.pem",
        cert=tls_dir / "worker.pem",
        key=tls_dir / "worker-key.pem",
        token="",
    )
    try:
        with new_channel(f"127.0.0.1:{port}", (), worker) as channel:
            check = health_pb2_grpc.HealthStub(channel).Check
            check(health_pb2.HealthCheckRequest(), timeout=10)
            first = seen.serials[-1]
            # When the worker's certificate is renewed in place
            ca = LocalCA(tls_dir)
            key, cert = ca.issue(service_uri("worker"), "worker")
            ca.write("worker", key, cert)
            renewed = x509.load_pem_x509_certificate(cert).serial_number
            assert renewed != first

            # Then the same stub's calls present the new one
            def presented() -> bool:
                check(health_pb2.HealthCheckRequest(), timeout=10)
                return seen.serials[-1] == renewed

            eventually(presented, timeout=20, interval=0.25, what="the renewed certificate sent")
    finally:
        server.stop(0)
