"""README's Python example, run as written against a real `cronwave up` that holds what
`make demo` leaves (its nightly-billing schedule): the billing run it triggers succeeds
(`up` runs the billing example's payment gateway beside the workers that register its
job)."""

from __future__ import annotations

import io
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

import cronwave
from cronwave_billing.demo import cli as demo
from cronwave_core.settings import TlsSettings
from cronwave_server.cli.suite_cmds import PORT_ORDER
from tests.harness.cli import cronwave_argv, free_port_base, user_env
from tests.harness.processes import ProcessTable
from tests.helpers import REPO, eventually

pytestmark = pytest.mark.slow

SECTION = "The same from Python:"


def python_example() -> str:
    text = (REPO / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", text[text.index(SECTION) :], re.S)
    assert block, "the README's Python example is gone"
    return block.group(1)


def test_the_readme_python_example_runs_as_written_under_cronwave_up(tmp_path: Path) -> None:
    # Given `cronwave up` (on a port base of its own, so the test runs beside others)
    base = free_port_base()
    env = user_env()
    log_path = tmp_path / "up.log"
    table = ProcessTable("cronwave up and its suite")
    with log_path.open("wb") as log:
        up = table.spawn(
            [*cronwave_argv(), "up", "--data-dir", str(tmp_path / "up"), "--port-base", str(base)],
            stdout=log,
            stderr=log,
            env=env,
        )

    def stop() -> None:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
            up.wait(timeout=60)

    try:
        eventually(lambda: "cronwave is up" in log_path.read_text(), timeout=120, what="up started")
        assert "payment-gateway" in log_path.read_text()

        # and the schedule `make demo` leaves behind
        ports = {key: base + i for i, key in enumerate(PORT_ORDER)}
        client_env = {
            **env,
            **{f"CRONWAVE_{key.upper()}_ADDR": f"127.0.0.1:{ports[key]}" for key in (
                "store", "dispatcher", "planner", "leader")},
            # Its certificates, as `cronwave up` left them in its data dir.
            "CRONWAVE_DATA_DIR": str(tmp_path / "up"),
        }  # fmt: skip
        addrs = {f"{key}_addr": f"127.0.0.1:{ports[key]}" for key in (
            "store", "dispatcher", "planner", "leader")}  # fmt: skip
        tls = TlsSettings.from_env({"CRONWAVE_DATA_DIR": str(tmp_path / "up")})
        with cronwave.Client(**addrs, tls=tls) as client:
            made = demo.ensure_schedule(client, Console(file=io.StringIO()), "Europe/Berlin", 7)
        assert made.schedule_id == "nightly-billing" and made.payload == {"customers": 7}
        assert made.critical  # the demo labels it so: the critical alert pages for it

        # When the README's example runs, as written, with the suite's addresses
        done = subprocess.run(
            [sys.executable, "-c", python_example()],
            cwd=tmp_path,
            env=client_env,
            capture_output=True,
            text=True,
            timeout=180,
        )

        # Then the billing run it triggered succeeded, and its events say so
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert done.stdout.startswith("SUCCEEDED "), done.stdout
        assert "'succeeded'" in done.stdout
    finally:
        table.close([stop])
