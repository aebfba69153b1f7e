"""The CLI against real suites: schedule and run commands, demo, and up. The tests that
work on schedules of their own under fresh ids share one suite (``shared_suite``)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cronwave
from cronwave.cli.main import app
from cronwave_core.console_settings import CONSOLE_PORT
from cronwave_core.settings import DEFAULT_PORTS, TlsSettings
from cronwave_core.suite import Suite
from cronwave_server.cli.suite_cmds import port_in_use
from tests.harness.cli import cronwave_argv
from tests.harness.processes import describe, read_stat
from tests.helpers import eventually, fresh

pytestmark = pytest.mark.slow


def env_for(suite: Suite) -> dict[str, str | None]:
    return {
        "CRONWAVE_STORE_ADDR": suite.store_addr,
        "CRONWAVE_DISPATCHER_ADDR": suite.dispatcher_addr,
        "CRONWAVE_PLANNER_ADDR": suite.planner_addr,
        "CRONWAVE_LEADER_ADDR": suite.leader_addr,
        "CRONWAVE_RPC_TIMEOUT": "10",
    }


def ok(args: list[str], env: dict[str, str | None]) -> str:
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, (args, result.stdout, result.stderr, result.exception)
    return result.stdout


def test_schedule_and_run_commands(shared_suite):
    suite = shared_suite()
    env = env_for(suite)
    sid = fresh("cli")

    created = ok(
        ["schedule", "create", sid, "--cron", "0 2 * * *", "--cron", "30 14 * * 5",
         "--tz", "Europe/Berlin", "--job-type", "cronwave.noop", "--payload", '{"n": 1}'],
        env,
    )  # fmt: skip
    assert f"created schedule '{sid}'" in created
    assert "Next fire times" in created and "CET" in created

    assert sid in ok(["schedule", "list"], env)
    described = ok(["schedule", "describe", sid], env)
    assert "0 2 * * *, 30 14 * * 5" in described and '{"n": 1}' in described

    ok(["schedule", "pause", sid, "--note", "audit week"], env)
    assert "paused (audit week)" in ok(["schedule", "describe", sid], env)
    ok(["schedule", "resume", sid], env)
    assert "active" in ok(["schedule", "describe", sid], env)

    triggered = ok(["schedule", "trigger", sid], env)
    run_id = re.search(r"cronwave runs wait (\S+)", triggered).group(1)  # type: ignore[union-attr]
    waited = ok(["runs", "wait", run_id, "--timeout", "60"], env)
    assert "SUCCEEDED" in waited

    shown = ok(["runs", "show", run_id], env)
    for kind in ("recorded", "enqueued", "claimed", "succeeded"):
        assert kind in shown
    assert shown.index("recorded") < shown.index("claimed") < shown.index("succeeded")
    assert run_id in ok(["runs", "list", "--schedule", sid, "--limit", "5"], env)
    assert run_id in ok(["runs", "list", "--state", "succeeded"], env)

    ok(["schedule", "delete", sid], env)
    assert sid not in ok(["schedule", "list"], env)
    missing = CliRunner().invoke(app, ["schedule", "describe", sid], env=env)
    assert missing.exit_code == 1 and f"schedule_id: no schedule '{sid}'" in missing.stderr


def test_store_errors_reach_the_terminal_naming_the_field(make_suite):
    suite = make_suite()
    env = env_for(suite)
    base = ["schedule", "create", fresh("cli"), "--cron", "0 2 * * *"]

    cases = [
        (["--job-type", "no.such.job"], "job_type: unknown job type 'no.such.job'"),
        (["--job-type", "cronwave.noop", "--tz", "Mars/Base"], "spec.time_zone: unknown time zone"),
        (["--job-type", "cronwave.noop", "--cron", "0 0 32 * *"], "spec.cron[1]: "),
    ]
    for extra, message in cases:
        result = CliRunner().invoke(app, [*base, *extra], env=env)

        assert result.exit_code == 1, result.stdout
        assert result.stderr.startswith("error: ") and message in result.stderr
        assert "Traceback" not in result.stderr

    assert "no schedules yet" in ok(["schedule", "list"], env)


def test_runs_wait_exits_1_when_the_run_fails_and_leader_shows_the_holder(shared_suite):
    suite = shared_suite()
    env = env_for(suite)
    sid = fresh("fails")
    ok(["schedule", "create", sid, "--cron", "0 2 * * *", "--job-type", "cronwave.fail",
        "--payload", '{"message": "card declined"}'], env)  # fmt: skip
    with cronwave.Client.from_settings(_settings(env)) as client:
        run = client.trigger(sid)
        lease = eventually(lambda: client.leader(), what="a planner leads")

    result = CliRunner().invoke(app, ["runs", "wait", run.run_id, "--timeout", "120"], env=env)

    assert result.exit_code == 1, result.stdout
    assert f"run {run.run_id} ended " in result.stderr and "card declined" in result.stderr
    shown = ok(["leader"], env)
    assert lease.holder in shown and "expires" in shown
    assert "fencing token" not in shown  # the holder's alone


def _settings(env: dict[str, str | None]):
    from cronwave_core.settings import NetworkSettings

    return NetworkSettings.from_env({k: v for k, v in env.items() if v is not None})


def test_demo_runs_billing_then_reuses_its_schedule_and_leaves_nothing_running(
    tmp_path, database_url
):
    data_dir = tmp_path / "demo"
    env: dict[str, str | None] = {
        "CRONWAVE_DATABASE_URL": database_url,
        "CRONWAVE_REDIS_URL": None,  # the demo's own embedded redis
    }
    args = ["demo", "--data-dir", str(data_dir), "--customers", "7", "--zone", "Asia/Tokyo"]

    first = CliRunner().invoke(app, args, env=env)
    second = CliRunner().invoke(app, [*args[:-1], "America/Chicago"], env=env)

    assert first.exit_code == 0, (first.stdout, first.stderr)
    assert "created schedule nightly-billing" in first.stdout
    assert "local (Asia/Tokyo)" in first.stdout and "JST" in first.stdout
    assert "SUCCEEDED" in first.stdout and '"invoices": 7' in first.stdout
    for kind in ("recorded", "claimed", "succeeded"):
        assert kind in first.stdout
    assert second.exit_code == 0, (second.stdout, second.stderr)
    assert "reusing schedule nightly-billing" in second.stdout
    assert "Asia/Tokyo" in second.stdout  # the kept schedule, not the new --zone
    for result in (first, second):
        for pid in re.findall(r"│ \S+\s+│ \S+\s+│ (\d+)\s+│", result.stdout):
            assert not _alive(int(pid)), f"demo left pid {pid} running"


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


def assert_forked_from_one_server(up_pid: int, service_pids: list[int]) -> None:
    """Every service of ``up``'s suite (its Redis left out) is a child of one fork
    server, itself ``up``'s child, and shows in ``ps`` as the ``python -P -m <module>``
    it stands for, named as the interpreter it runs."""
    parents = set()
    for pid in service_pids:
        stat = read_stat(pid)
        assert stat is not None, f"service {pid} is gone"
        parents.add(stat.ppid)
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        command = " ".join(part.decode() for part in raw.split(b"\0") if part)
        shown = re.fullmatch(r"(\S+) -P -m \w[\w.]*", command)
        assert shown, describe(pid)
        assert Path(f"/proc/{pid}/comm").read_text().strip() == Path(shown[1]).name[:15]
    assert len(parents) == 1 and up_pid not in parents, parents
    server = read_stat(parents.pop())
    assert server is not None and server.ppid == up_pid


# Serial: the fixed ports are the machine's, and another test holds one of them
# (test_cli_errors' busy-port test); alone, they are free unless a `cronwave up` runs
# here, which skips the test (and fails a CI run: tests/skips_allowed.txt).
@pytest.mark.serial
def test_up_serves_the_fixed_ports_until_sigterm_then_stops_everything(tmp_path, monkeypatch):
    busy = [p for p in (*DEFAULT_PORTS.values(), CONSOLE_PORT) if port_in_use(p)]
    if busy:
        pytest.skip(f"default ports {busy} are in use (a `cronwave up` runs here)")
    log = tmp_path / "up.out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWAVE_")}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*cronwave_argv(), "up", "--data-dir", str(tmp_path / "up")],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    pids: list[int] = []
    try:
        eventually(lambda: "cronwave is up" in log.read_text(), timeout=120, what="up started")
        pids = [int(p) for p in re.findall(r"│ \S+\s+│ \S+\s+│ (\d+)\s+│", log.read_text())]
        # redis, five services, the billing gateway, the console
        assert len(pids) == 8, log.read_text()
        assert f"Console: http://127.0.0.1:{CONSOLE_PORT}/ " in log.read_text()
        assert_forked_from_one_server(proc.pid, pids[1:])

        # The default ports, recorded in its data dir with the certificates it made there
        tls = TlsSettings.from_env({"CRONWAVE_DATA_DIR": str(tmp_path / "up")})
        monkeypatch.setenv("CRONWAVE_DATA_DIR", str(tmp_path / "up"))
        with cronwave.Client(timeout=timedelta(seconds=10), tls=tls) as client:
            assert repr(client) == f"Client(store_addr='127.0.0.1:{DEFAULT_PORTS['store']}', ...)"
            sid = fresh("up")
            client.create_schedule(sid, cron="0 2 * * *", job_type="cronwave.noop")
            run = client.wait_run(client.trigger(sid).run_id, timeout=timedelta(seconds=60))
            assert run.state == "SUCCEEDED", run.error

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()
    finally:
        if proc.poll() is None:  # the test failed: stop what `up` started, by pid
            proc.kill()
            proc.wait(timeout=10)
            for pid in pids:
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)
    assert "stopped 8 processes" in log.read_text()
    assert not [pid for pid in pids if _alive(pid)]
    assert not [p for p in (*DEFAULT_PORTS.values(), CONSOLE_PORT) if port_in_use(p)]
