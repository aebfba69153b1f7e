"""Fault injection and failure drills exist only in processes started for tests: a
service given one of their variables without ``CRONWAVE_TEST_HOOKS`` does not start,
and says which variables to fix."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cronwave_core.settings import TEST_HOOKS
from cronwave_core.suite import free_port

#: The console scripts of the services, beside this interpreter (.venv/bin).
BIN = Path(sys.executable).parent
SERVICES = (
    "workflow-store",
    "leader-election",
    "dispatcher",
    "worker",
    "cron-planner",
    "payment-gateway",
)
LATENCY = "delay=persist:database:50ms:0.05"
#: How long a refusing process may take to exit; one that started instead is stopped then.
START_BOUND_S = 30.0


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment of no CRONWAVE_* setting but a private data dir, free ports and a
    Redis nobody listens on, so a process that does start touches nothing shared."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWAVE_")}
    env["CRONWAVE_DATA_DIR"] = str(tmp_path)
    env["CRONWAVE_REDIS_URL"] = f"redis://127.0.0.1:{free_port()}/0"
    for var in ("STORE", "LEADER", "DISPATCHER", "PLANNER", "WORKER", "GATEWAY"):
        env[f"CRONWAVE_{var}_ADDR"] = f"127.0.0.1:{free_port()}"
    env["CRONWAVE_TRACING"] = "off"
    env.update(extra)
    return env


def _start(service: str, env: dict[str, str]) -> tuple[int | None, str]:
    """Run ``service``'s console script until it exits (at most ``START_BOUND_S``):
    its exit code (None: it was still running, and is stopped) and its stderr."""
    proc = subprocess.Popen(
        [str(BIN / service)], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        _, err = proc.communicate(timeout=START_BOUND_S)
        return proc.returncode, err
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: the service and its children
        _, err = proc.communicate(timeout=10)
        return None, err


CASES = [pytest.param(service, "CRONWAVE_FAULT", LATENCY, id=service) for service in SERVICES]
CASES += [
    pytest.param(
        "payment-gateway", "CRONWAVE_GATEWAY_TIMEOUT_AFTER_COMMIT", "1", id="gateway-drill"
    ),
    pytest.param("worker", "CRONWAVE_BILLING_CRASH_AFTER_CHARGES", "5", id="crash-drill"),
]


@pytest.mark.parametrize(("service", "variable", "value"), CASES)
def test_a_service_given_a_fault_without_the_switch_refuses_to_start(
    tmp_path: Path, service: str, variable: str, value: str
) -> None:
    # Given a fault variable in the environment of a process not started for tests
    env = _env(tmp_path, **{variable: value})
    # When the service is started
    code, err = _start(service, env)
    # Then it exits at start-up, non-zero, naming the variable and the switch
    assert code is not None, f"{service} started with {variable} set:\n{err[-2000:]}"
    assert code != 0
    assert f"{variable} set, but {TEST_HOOKS} is not" in err, err[-2000:]
    assert "never in production" in err
