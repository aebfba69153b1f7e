"""A service that refuses to start says why in one line on stderr and exits 2, with no
traceback: real processes, started as ``python -m <package>`` and as their console
scripts (``cronwave_core.entry``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cronwave_core.suite import free_port

BIN = Path(sys.executable).parent
#: A refusal comes before anything is served; a process still running after this has
#: started instead.
REFUSAL_BOUND_S = 60

#: Every service entry point: its package (``python -m``) and its console script.
SERVICES = {
    "workflow-store": "workflow_store",
    "cron-planner": "cron_planner",
    "leader-election": "leader_election",
    "dispatcher": "dispatcher",
    "worker": "worker",
    "console": "console",
    "payment-gateway": "cronwave_billing.gateway",
}


def refused(argv: list[str], tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with only ``variables`` of the CRONWAVE_ ones set; it must exit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWAVE_")}
    env.update(CRONWAVE_DATA_DIR=str(tmp_path), CRONWAVE_TRACING="0", **variables)
    return subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=REFUSAL_BOUND_S, cwd=tmp_path
    )


def assert_one_clean_line(done: subprocess.CompletedProcess[str], service: str, *says: str) -> None:
    lines = done.stderr.splitlines()
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "CRITICAL" not in done.stderr, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"{service}: cannot start: "), lines[0]
    for words in says:
        assert words in lines[0], lines[0]


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_a_malformed_variable_stops_every_service_with_one_line_and_status_2(
    service: str, tmp_path: Path
) -> None:
    # Given a malformed CRONWAVE_GRACE
    # When the service starts, as a module and as its console script
    for argv in ([sys.executable, "-P", "-m", SERVICES[service]], [str(BIN / service)]):
        done = refused(argv, tmp_path, CRONWAVE_GRACE="soon")

        # Then it exits 2 with one line naming the variable and its rule, no traceback
        assert_one_clean_line(
            done,
            service,
            "CRONWAVE_GRACE: expected a duration such as 500ms, 5s or 2m",
            "got 'soon'",
        )


def test_insecure_beyond_loopback_is_refused_in_one_line(tmp_path: Path) -> None:
    # Given plaintext asked for on every interface
    address = f"0.0.0.0:{free_port()}"
    # When the store starts
    done = refused(
        [str(BIN / "workflow-store")],
        tmp_path,
        CRONWAVE_INSECURE="1",
        CRONWAVE_STORE_ADDR=address,
    )
    # Then it refuses in one line, naming the service once, the variable and the address
    assert_one_clean_line(
        done,
        "workflow-store",
        "CRONWAVE_INSECURE=1 serves plaintext without authentication",
        f"not on {address}",
    )
    assert done.stderr.count("workflow-store") == 1


def test_an_unreadable_tls_file_is_refused_in_one_line(tmp_path: Path) -> None:
    # Given a CA file that does not exist
    missing = tmp_path / "no-such-ca.pem"
    # When the store starts
    done = refused(
        [sys.executable, "-P", "-m", "workflow_store"],
        tmp_path,
        CRONWAVE_STORE_ADDR=f"127.0.0.1:{free_port()}",
        CRONWAVE_TLS_CA=str(missing),
    )
    # Then it refuses in one line naming the file
    assert_one_clean_line(done, "workflow-store", f"cannot read the TLS CA certificate {missing}")


def test_a_service_given_a_list_of_replicas_to_listen_on_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    # Given the dispatcher's own variable naming two replicas (its callers' form)
    replicas = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    done = refused(
        [sys.executable, "-P", "-m", "dispatcher"],
        tmp_path,
        CRONWAVE_DISPATCHER_ADDR=replicas,
        CRONWAVE_TLS_DIR=os.environ["CRONWAVE_TLS_DIR"],
        CRONWAVE_TLS_IDENTITY="dispatcher",
    )
    # Then it stops, saying a process listens on one address
    assert_one_clean_line(
        done,
        "dispatcher",
        f"CRONWAVE_DISPATCHER_ADDR: a process listens on one HOST:PORT, got the list {replicas!r}",
    )
