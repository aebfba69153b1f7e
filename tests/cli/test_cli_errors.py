"""Argument errors and error formatting: a red line naming the field, exit 1, no
traceback. None of these needs a running suite."""

from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

from cronwave.cli.main import app
from cronwave_core.settings import DEFAULT_PORTS
from cronwave_core.suite import free_port

ADDR_VARS = (
    "CRONWAVE_STORE_ADDR",
    "CRONWAVE_DISPATCHER_ADDR",
    "CRONWAVE_PLANNER_ADDR",
    "CRONWAVE_LEADER_ADDR",
)


@pytest.fixture
def nowhere() -> dict[str, str | None]:
    """Environment pointing every service address at a port nobody listens on."""
    addr = f"127.0.0.1:{free_port()}"
    return {var: addr for var in ADDR_VARS}


def invoke(args: list[str], env: dict[str, str | None] | None = None):
    return CliRunner().invoke(app, args, env=env)


def assert_reported(result, *fragments: str) -> None:
    """Exit 1 with the fragments on stderr and no traceback anywhere."""
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stderr.startswith("error: ")
    for fragment in fragments:
        assert fragment in result.stderr


def test_no_arguments_shows_the_commands():
    result = invoke([])

    assert result.exit_code == 2
    for command in ("up", "demo", "schedule", "runs", "leader"):
        assert command in result.stdout


def test_a_missing_required_option_is_a_usage_error():
    result = invoke(["schedule", "create", "s1", "--cron", "0 2 * * *"])

    assert result.exit_code == 2
    assert "--job-type" in result.stderr


def test_a_negative_wait_timeout_is_a_usage_error():
    result = invoke(["runs", "wait", "r1", "--timeout", "-1"])

    assert result.exit_code == 2
    assert "--timeout" in result.stderr


@pytest.mark.parametrize(
    ("payload", "rule"),
    [("{", "not valid JSON"), ("[1, 2]", "must be a JSON object")],
)
def test_a_bad_payload_names_the_field(nowhere, payload, rule):
    args = ["schedule", "create", "s1", "--cron", "0 2 * * *", "--job-type", "cronwave.noop"]

    result = invoke([*args, "--payload", payload], env=nowhere)

    assert_reported(result, "payload: ", rule)


def test_a_bad_policy_name_lists_the_choices(nowhere):
    args = ["schedule", "create", "s1", "--cron", "0 2 * * *", "--job-type", "cronwave.noop"]

    result = invoke([*args, "--overlap", "pile-up"], env=nowhere)

    assert_reported(result, "policy.overlap: 'pile-up' is not one of", "buffer_one")


@pytest.mark.parametrize(
    ("args", "service"),
    [
        (["schedule", "list"], "workflow-store"),
        (["schedule", "trigger", "s1"], "dispatcher"),
        (["runs", "show", "r1"], "workflow-store"),
        (["leader"], "leader-election"),
    ],
)
def test_an_unreachable_suite_asks_whether_cronwave_up_runs(nowhere, args, service):
    result = invoke(args, env=nowhere)

    addr = nowhere["CRONWAVE_STORE_ADDR"]
    assert_reported(result, f"{service} at {addr} is unavailable", "is `cronwave up` running?")


def test_a_malformed_address_variable_is_named():
    result = invoke(["schedule", "list"], env={"CRONWAVE_STORE_ADDR": "localhost"})

    assert_reported(result, "CRONWAVE_STORE_ADDR: expected HOST:PORT")


@pytest.mark.serial  # holds a fixed port, which `cronwave up`'s own test needs free
def test_up_refuses_a_busy_port_and_says_which(tmp_path):
    port = DEFAULT_PORTS["store"]
    holder = socket.socket()
    try:
        try:
            holder.bind(("127.0.0.1", port))
            holder.listen()
        except OSError:
            pass  # someone else holds it already: just as busy

        result = invoke(
            ["up", "--data-dir", str(tmp_path / "up")],
            env={"CRONWAVE_REDIS_URL": None, "CRONWAVE_DATABASE_URL": None},
        )
    finally:
        holder.close()

    assert_reported(result, f"port {port} (workflow-store) is already in use")
    assert "cronwave demo" in result.stderr  # what to do instead


def test_demo_refuses_an_unknown_zone_before_starting_anything(tmp_path):
    data_dir = tmp_path / "demo"

    result = invoke(["demo", "--data-dir", str(data_dir), "--zone", "Mars/Olympus"])

    assert_reported(result, "--zone: unknown time zone 'Mars/Olympus'")
    assert not data_dir.exists()


def test_demo_refuses_a_fault_without_the_test_switch_before_starting_anything(tmp_path):
    # `cronwave demo` never sets CRONWAVE_TEST_HOOKS, so a fault in its environment
    # stops it, named, instead of slowing the demo's runs.
    data_dir = tmp_path / "demo"

    result = invoke(
        ["demo", "--data-dir", str(data_dir)],
        env={"CRONWAVE_FAULT": "delay=execute:app:50ms:1", "CRONWAVE_TEST_HOOKS": None},
    )

    assert_reported(result, "CRONWAVE_FAULT set, but CRONWAVE_TEST_HOOKS is not")
    assert not data_dir.exists()


@pytest.mark.parametrize(
    ("grace", "fragments"),
    [
        ("soon", ("--grace: 'soon' is not a duration",)),
        ("2h", ("grace: must be at most 1h", "duration limit")),
    ],
)
def test_a_bad_cancel_grace_is_named_before_anything_is_asked(nowhere, grace, fragments):
    result = invoke(["runs", "cancel", "r1", "--grace", grace], env=nowhere)

    assert_reported(result, *fragments)
