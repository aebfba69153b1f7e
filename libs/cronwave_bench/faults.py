"""The means of the faults a drill applies to links and servers it owns: a TCP proxy
that can blackhole a link and then reset it, and a Redis server that can be killed and
started again empty on the same port.

Both run on loopback, in the drill's own process (the proxy) or as its child (Redis),
so a fault is real -- a socket that stops answering, a server that is gone -- and is
undone by the drill alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from cronwave_core.suite import find_redis_server, free_port, wait_redis


class TcpProxy:
    """Forwards connections on a loopback port (or on ``host``, another address of
    this machine, such as a veth's) to ``target`` (HOST:PORT).

    ``blackhole()`` makes every connection, open or new, swallow the bytes sent either
    way without closing: calls through it hang until their deadline, as across a
    network partition. ``reset()`` ends that: every connection open through the proxy
    is closed with a TCP reset, and new ones are forwarded again (a partition that
    heals after the peers' connections were cut, as a stateful firewall or a NAT that
    lost its table does).
    """

    def __init__(self, target: str, port: int = 0, host: str = "127.0.0.1") -> None:
        target_host, _, target_port = target.rpartition(":")
        self._target = (target_host, int(target_port))
        # A given ``port`` lets a closed proxy come back at the same address.
        self._listener = socket.create_server((host, port))
        self._listener.settimeout(0.1)
        self.port = int(self._listener.getsockname()[1])
        self.address = f"{host}:{self.port}"
        self._blackholed = threading.Event()
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self.connections = 0
        self.swallowed = 0  # bytes
        self.resets = 0  # connections closed by reset()
        self._spawn(self._accept)

    def blackhole(self) -> None:
        self._blackholed.set()

    def reset(self) -> int:
        """Close every connection open through the proxy (an RST to both peers) and
        forward new ones again; the number of connections closed."""
        # Taken and healed in one step: a connection accepted meanwhile is either
        # among those closed or forwarded whole, never one that lost bytes and lives.
        with self._lock:
            sockets, self._sockets = list(self._sockets), []
            self._blackholed.clear()
            self.resets += len(sockets) // 2
        for sock in sockets:
            _abort(sock)
        return len(sockets) // 2

    def close(self) -> None:
        self._closing.set()
        self._listener.close()
        with self._lock:
            sockets, threads = list(self._sockets), list(self._threads)
        for sock in sockets:
            sock.close()
        for thread in threads:
            thread.join(timeout=2)

    def _spawn(self, target: Callable[..., object], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
                self.connections += 1
            self._spawn(self._pump, client, upstream)
            self._spawn(self._pump, upstream, client)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        src.settimeout(0.1)
        try:
            while not self._closing.is_set():
                try:
                    data = src.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                if self._blackholed.is_set():
                    with self._lock:
                        self.swallowed += len(data)
                    continue
                dst.sendall(data)
        except OSError:
            pass
        finally:
            if not self._blackholed.is_set():
                for sock in (src, dst):
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)


def _abort(sock: socket.socket) -> None:
    """Close ``sock`` with a TCP reset (linger 0), not an orderly FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class OwnRedis:
    """A redis-server on a free port with persistence off: a restart loses all data."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start it (again, on the same port), empty, and wait until it answers."""
        argv = [
            find_redis_server(), "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(self._workdir),
        ]  # fmt: skip
        self._proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        wait_redis(self.port, timedelta(seconds=20))

    def kill(self) -> None:
        """kill -9: whatever it held is gone."""
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGKILL)
            self._proc.wait(timeout=10)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
