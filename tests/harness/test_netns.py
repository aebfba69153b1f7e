"""The namespaced link of ``tests.harness.netns`` on its own: a service on loopback is
reached from inside the namespace, by a service's name, only across the veth; a cut
stops it and a heal brings it back; closing leaves no namespace, link or file behind."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.netns import NetNamespace, ip
from tests.harness.processes import ProcessTable
from tests.harness.suites import services_suite
from tests.helpers import eventually

# Connects to argv[1]:argv[2] and prints what the server sends, or the error's name.
CLIENT = (
    "import socket, sys\n"
    "try:\n"
    "    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2) as s:\n"
    "        print(s.recv(16).decode())\n"
    "except OSError as exc:\n"
    "    print(type(exc).__name__, exc)\n"
)

pytestmark = pytest.mark.slow


@pytest.fixture
def greeter() -> Iterator[str]:
    """A loopback server that says hello to each connection; its HOST:PORT."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"hello")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    done.set()
    thread.join(timeout=2)
    server.close()


def from_inside(link: NetNamespace, host: str, port: str) -> str:
    done = subprocess.run(
        ["ip", "netns", "exec", link.name, sys.executable, "-c", CLIENT, host, port],
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    )
    return done.stdout.strip()


def test_a_cut_stops_what_crosses_the_link_and_a_heal_restores_it(
    tmp_path: Path, redis_url: str, greeter: str
) -> None:
    # Given a namespace whose link forwards to a loopback server
    table = ProcessTable("none")
    link = NetNamespace(services_suite(table, tmp_path, redis_url, {}))
    try:
        port = link.forward(greeter).rpartition(":")[2]
        assert link.link_states() == ("UP", "UP")

        # Then the server is reached by a service's name, across the link
        assert from_inside(link, "workflow-store", port) == "hello"
        # and loopback inside the namespace is not the machine's
        assert from_inside(link, "127.0.0.1", greeter.rpartition(":")[2]) != "hello"

        # When the link is cut, nothing gets across; when it heals, it does again
        link.cut()
        assert link.link_states() == ("DOWN", "DOWN")
        assert from_inside(link, "workflow-store", port) != "hello"
        link.heal()
        # (a neighbour look-up begun during the cut may still fail its last probes:
        # "No route to host" for up to its few seconds, as after any link flap)
        eventually(
            lambda: from_inside(link, "workflow-store", port) == "hello",
            timeout=20,
            interval=0.2,
            what="the server reached again",
        )
    finally:
        link.close()

    # And closing left nothing behind
    assert link.name not in ip("netns", "list")
    assert link.host_link not in ip("-o", "link", "show")
    assert not (Path("/etc/netns") / link.name).exists()
    table.close()


def test_what_a_killed_test_process_left_is_swept_by_the_next(
    tmp_path: Path, redis_url: str
) -> None:
    # Given a namespace, a veth and an /etc/netns entry named after a process now gone
    dead = subprocess.Popen(["true"])
    dead.wait()
    name, link_name = f"cw{dead.pid}x0", f"cwh{dead.pid}x0"
    ip("netns", "add", name)
    ip("link", "add", link_name, "type", "veth", "peer", "name", f"cwn{dead.pid}x0")
    (Path("/etc/netns") / name).mkdir(parents=True)

    # When a test makes a namespace
    table = ProcessTable("none")
    link = NetNamespace(services_suite(table, tmp_path, redis_url, {}))
    link.close()
    table.close()

    # Then the leftovers are gone
    assert name not in ip("netns", "list")
    assert link_name not in ip("-o", "link", "show")
    assert not (Path("/etc/netns") / name).exists()
