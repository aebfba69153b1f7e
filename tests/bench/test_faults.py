"""The drills' fault means on real sockets and a real redis-server: a proxied link
blackholed and then reset, and a Redis killed and started again empty."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from cronwave_bench.faults import OwnRedis, TcpProxy
from tests.helpers import eventually


@pytest.fixture
def echo() -> Iterator[str]:
    """A loopback server that sends back what it receives, on every connection."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            while data := conn.recv(4096):
                conn.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    server.close()
    thread.join(timeout=2)


def _connect(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=5)


def _received(sock: socket.socket) -> bytes | None:
    """What has arrived so far without waiting: None when nothing has."""
    sock.setblocking(False)
    try:
        return sock.recv(4096)
    except BlockingIOError:
        return None
    finally:
        sock.settimeout(5)


def test_a_blackholed_link_swallows_everything_until_reset_closes_it(echo: str) -> None:
    # Given a connection through the proxy that echoes
    proxy = TcpProxy(echo)
    try:
        old = _connect(proxy.address)
        old.sendall(b"ping")
        assert old.recv(4) == b"ping"

        # When the link is blackholed, a request is swallowed and nothing comes back
        proxy.blackhole()
        old.sendall(b"lost")
        eventually(lambda: proxy.swallowed >= 4, timeout=5, what="the request swallowed")
        assert _received(old) is None

        # Then a reset closes that connection and forwards new ones again
        assert proxy.reset() == 1
        with pytest.raises(ConnectionResetError):
            old.recv(4)
        new = _connect(proxy.address)
        new.sendall(b"back")
        assert new.recv(4) == b"back"
        assert proxy.resets == 1
        new.close()
        old.close()
    finally:
        proxy.close()


def test_own_redis_comes_back_empty_on_the_same_port(tmp_path: Path) -> None:
    # Given a Redis the test owns, holding a key
    server = OwnRedis(tmp_path / "redis")
    server.start()
    try:
        client = redis.Redis.from_url(server.url, socket_timeout=5)
        client.set("k", "v")

        # When it is killed and started again
        server.kill()
        with pytest.raises(redis.ConnectionError):
            client.get("k")
        server.start()

        # Then it answers at the same address, and the key is gone
        assert client.get("k") is None
        client.close()
    finally:
        server.stop()
