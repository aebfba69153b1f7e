"""What the failover tests share: short leases, planners started with their own
environment, a TCP proxy that can blackhole a planner's link, and a Redis the test
owns (persistence off, so a restart loses every key)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from cronwave_bench.failover import FAST, Drill
from cronwave_core.suite import Proc, Suite, find_redis_server, free_port, wait_redis

LEASE_ENV = FAST.env()
TTL = FAST.ttl.total_seconds()
RETRY = FAST.retry_interval.total_seconds()
# Taking over costs a few RPCs on top of the lease timing (campaign, the store's newest
# run, the start); on a busy 2-core machine they stay well inside this.
TAKEOVER_WORK = 0.5


def start_planner(suite: Suite, index: int, env: Mapping[str, str] | None = None) -> Proc:
    """Start planner replica ``index`` with ``env`` on top of the suite's environment."""
    base = suite.config.env
    suite.config.env = {**base, **(env or {})}
    try:
        return suite.start_service("cron-planner", index=index)
    finally:
        suite.config.env = base


def log_text(drill: Drill, name: str) -> str:
    return drill.suite.procs[name].log_path.read_text(errors="replace")


class TcpProxy:
    """Forwards connections on a free loopback port to ``target`` (HOST:PORT).

    ``blackhole()`` makes every connection, open or new, swallow the bytes sent either
    way without closing: calls through it hang until their deadline, as across a
    network partition.
    """

    def __init__(self, target: str, port: int = 0) -> None:
        host, _, target_port = target.rpartition(":")
        self._target = (host, int(target_port))
        # A given ``port`` lets a closed proxy come back at the same address.
        self._listener = socket.create_server(("127.0.0.1", port))
        self._listener.settimeout(0.1)
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._blackholed = threading.Event()
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self.connections = 0
        self.swallowed = 0  # bytes
        self._spawn(self._accept)

    def blackhole(self) -> None:
        self._blackholed.set()

    def close(self) -> None:
        self._closing.set()
        self._listener.close()
        with self._lock:
            sockets, threads = list(self._sockets), list(self._threads)
        for sock in sockets:
            sock.close()
        for thread in threads:
            thread.join(timeout=2)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        with self._lock:
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


class OwnRedis:
    """A redis-server on a free port with persistence off: a restart loses all data."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
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
