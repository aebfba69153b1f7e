"""The CLI talks to the suite of the data dir it is given: two ``cronwave up`` suites
side by side (``--port-base``), each reached through its own data dir, by the flag or
by ``CRONWAVE_DATA_DIR``; an address variable still wins; a data dir whose suite has
stopped, or that never held one, is an error that says where it looked and what to do.
(The default data dir, and the SDK and the worker: ``test_suite_from_anywhere.py``.)"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cronwave import _suite_record
from cronwave.cli.main import app
from cronwave_core.errors import ConfigurationError
from cronwave_core.settings import DEFAULT_PORTS
from cronwave_core.suite import OWN_PORTS_VAR, own_port_range
from cronwave_server.cli.suite_cmds import PORT_ORDER, up_ports
from tests.harness.cli import cronwave_argv, free_port_base, user_env
from tests.harness.processes import ProcessTable
from tests.helpers import eventually, fresh

CLEAN = {
    "CRONWAVE_STORE_ADDR": None,
    "CRONWAVE_DISPATCHER_ADDR": None,
    "CRONWAVE_PLANNER_ADDR": None,
    "CRONWAVE_LEADER_ADDR": None,
    "CRONWAVE_DATA_DIR": None,
    # The test session's CA is not these suites': each has its own in its data dir.
    "CRONWAVE_TLS_DIR": None,
}


def cli(args: list[str], **env: str | None):
    return CliRunner().invoke(app, args, env={**CLEAN, **env})


def ok(args: list[str], **env: str | None) -> str:
    result = cli(args, **env)
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result.stdout


@pytest.fixture
def ups(tmp_path, monkeypatch):
    """Start ``cronwave up`` processes; each is stopped (SIGTERM) and every process it
    started checked gone when the test ends.

    This test process's port range is split in two: the ports the test names
    (``free_port_base``) come from the lower half, and the suites pick their own (their
    metrics ports, and a new port for a service whose port was taken) from the upper
    half, so that neither suite takes a port the test has named for the other."""
    lowest, highest = own_port_range()
    middle = (lowest + highest) // 2
    monkeypatch.setenv(OWN_PORTS_VAR, f"{lowest}-{middle - 1}")
    suites_own = f"{middle}-{highest}"
    table = ProcessTable("cronwave up and its suite")
    started = []

    def start(data_dir: Path, *args: str, **env: str):
        base_env = {**user_env(), OWN_PORTS_VAR: suites_own}
        log = (tmp_path / f"{data_dir.name}.log").open("wb")
        proc = table.spawn(
            [*cronwave_argv(), "up", "--data-dir", str(data_dir), *args],
            stdout=log,
            stderr=log,
            env={**base_env, "CRONWAVE_GRACE": "2", **env},
        )
        started.append(proc)
        return proc

    yield start

    def stop(proc):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)

    table.close([lambda p=p: stop(p) for p in started])


def running_record(data_dir: Path) -> _suite_record.SuiteRecord:
    found = _suite_record.read(data_dir)
    assert found is not None and found.running(), f"no running suite in {data_dir} yet"
    return found


@pytest.mark.slow
def test_two_suites_each_reached_through_its_data_dir(tmp_path, ups):
    dir_a, dir_b = tmp_path / "a", tmp_path / "b"
    base_a = free_port_base()
    # Suite b's ports are chosen clear of suite a's, which it may not have bound yet.
    taken = set(range(base_a, base_a + len(PORT_ORDER) + 1))
    for _ in range(50):
        base_b, store_b = free_port_base(), free_port_base(1)
        ports_b = {*range(base_b, base_b + len(PORT_ORDER) + 1), store_b}
        if not ports_b & taken and store_b not in range(base_b, base_b + len(PORT_ORDER) + 1):
            break
    up_a = ups(dir_a, "--port-base", str(base_a))
    up_b = ups(dir_b, "--port-base", str(base_b), CRONWAVE_STORE_ADDR=f"127.0.0.1:{store_b}")

    a = eventually(lambda: running_record(dir_a), timeout=180, what="suite a up")
    b = eventually(lambda: running_record(dir_b), timeout=180, what="suite b up")

    # --port-base N: the services on N, N+1, ...; an address variable pins its service.
    assert a.addresses == {k: f"127.0.0.1:{base_a + i}" for i, k in enumerate(PORT_ORDER[:5])}
    assert a.pid == up_a.pid
    assert b.addresses["store"] == f"127.0.0.1:{store_b}"
    assert b.addresses["dispatcher"] == f"127.0.0.1:{base_b + 2}"

    sid_a, sid_b = fresh("in-a"), fresh("in-b")
    create = ["schedule", "create", "--cron", "0 2 * * *", "--job-type", "cronwave.noop"]
    ok(["--data-dir", str(dir_a), *create[:2], sid_a, *create[2:]])
    ok([*create[:2], sid_b, *create[2:]], CRONWAVE_DATA_DIR=str(dir_b))

    listed_a = ok(["--data-dir", str(dir_a), "schedule", "list"])
    listed_b = ok(["schedule", "list"], CRONWAVE_DATA_DIR=str(dir_b))
    assert sid_a in listed_a and sid_b not in listed_a
    assert sid_b in listed_b and sid_a not in listed_b

    # An address variable wins over the data dir's (the listing is the store's); so
    # does the TLS dir (each suite has a CA of its own).
    mixed = ok(
        ["--data-dir", str(dir_a), "schedule", "list"],
        CRONWAVE_STORE_ADDR=b.addresses["store"],
        CRONWAVE_TLS_DIR=str(dir_b / "tls"),
    )
    assert sid_b in mixed and sid_a not in mixed
    # With a's CA, b's store is not trusted
    foreign = cli(
        ["--data-dir", str(dir_a), "schedule", "list"], CRONWAVE_STORE_ADDR=b.addresses["store"]
    )
    assert foreign.exit_code == 1

    # A second suite in a data dir whose suite runs is refused before it starts.
    again = cli(["up", "--data-dir", str(dir_a), "--port-base", str(free_port_base())])
    assert again.exit_code == 1, (again.stdout, again.stderr)
    assert f"data dir {dir_a}: a suite already runs there (pid {up_a.pid})" in again.stderr
    assert running_record(dir_a) == a

    up_a.send_signal(signal.SIGTERM)
    assert up_a.wait(timeout=60) == 0
    stopped = _suite_record.read(dir_a)
    assert stopped is not None and stopped.stopped

    after = cli(["--data-dir", str(dir_a), "schedule", "list"])
    assert after.exit_code == 1
    assert "is not running any more" in after.stderr
    assert f"cronwave up --data-dir {dir_a}" in after.stderr
    assert up_b.poll() is None  # the other suite is untouched
    assert sid_b in ok(["--data-dir", str(dir_b), "schedule", "list"])


def test_a_data_dir_that_never_held_a_suite_is_named(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()

    result = cli(["--data-dir", str(empty), "schedule", "list"])

    assert result.exit_code == 1
    assert result.stderr.startswith("error: ")
    message = " ".join(result.stderr.split())
    assert f"data dir {empty} (from --data-dir): no cronwave suite was started there" in message
    assert f"(looked for {empty / 'suite.json'})" in message
    assert "Traceback" not in result.stdout + result.stderr


def test_a_data_dir_variable_is_not_read_when_every_address_is_given(tmp_path):
    # Every address given: the variable's data dir (here one with no suite) is not read,
    # so the command fails for the addresses, not for the data dir. (Its certificates
    # are given too: by default they would be the data dir's.)
    addr = "127.0.0.1:1"
    result = cli(
        ["schedule", "list"],
        CRONWAVE_DATA_DIR=str(tmp_path),
        CRONWAVE_TLS_DIR=os.environ["CRONWAVE_TLS_DIR"],
        CRONWAVE_STORE_ADDR=addr,
        CRONWAVE_DISPATCHER_ADDR=addr,
        CRONWAVE_PLANNER_ADDR=addr,
        CRONWAVE_LEADER_ADDR=addr,
        CRONWAVE_RPC_TIMEOUT="2",
    )

    assert result.exit_code == 1
    assert f"workflow-store at {addr} is unavailable" in result.stderr


def test_up_ports_from_a_base_and_the_address_variables():
    assert tuple(DEFAULT_PORTS) == PORT_ORDER
    assert up_ports(None, {}) == {
        "store": 7401, "leader": 7402, "dispatcher": 7403, "planner": 7404, "worker": 7405,
        "redis": 7479,
    }  # fmt: skip
    assert up_ports(9000, {"CRONWAVE_PLANNER_ADDR": "localhost:9100"}) == {
        "store": 9000, "leader": 9001, "dispatcher": 9002, "planner": 9100, "worker": 9004,
        "redis": 9005,
    }  # fmt: skip
    with pytest.raises(ConfigurationError, match="CRONWAVE_STORE_ADDR: `cronwave up` serves on"):
        up_ports(None, {"CRONWAVE_STORE_ADDR": "10.0.0.5:7401"})
    with pytest.raises(ConfigurationError, match="share port 9001"):
        up_ports(9000, {"CRONWAVE_STORE_ADDR": "127.0.0.1:9001"})
    with pytest.raises(ConfigurationError, match="DISPATCHER_ADDR: `cronwave up` runs one"):
        up_ports(None, {"CRONWAVE_DISPATCHER_ADDR": "127.0.0.1:7403,127.0.0.1:7413"})
