"""What the deadline tests share: a client of a suite, the CLI as a process, the
store's breaches, the scrape of its metrics."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

import cronwave
from cronwave_core.suite import Suite
from tests.harness.cli import cronwave_argv
from tests.helpers import eventually

BREACHES = "cronwave_deadline_breaches_total"
#: The deadline tests' notifier settings: quick retries, a short timeout.
NOTIFY_ENV = {
    "CRONWAVE_NOTIFY_ATTEMPTS": "3",
    "CRONWAVE_NOTIFY_BACKOFF": "200ms",
    "CRONWAVE_NOTIFY_TIMEOUT": "1s",
}


def client(suite: Suite) -> cronwave.Client:
    return cronwave.Client(
        store_addr=suite.store_addr,
        dispatcher_addr=suite.dispatcher_addr,
        planner_addr=suite.planner_addr,
        leader_addr=suite.leader_addr,
        timeout=timedelta(seconds=10),
    )


def cli_env(suite: Suite) -> dict[str, str]:
    return {
        **os.environ,
        "CRONWAVE_STORE_ADDR": suite.store_addr,
        "CRONWAVE_DISPATCHER_ADDR": suite.dispatcher_addr,
        "CRONWAVE_PLANNER_ADDR": suite.planner_addr,
        "CRONWAVE_LEADER_ADDR": suite.leader_addr,
    }


def cronwave_cli(suite: Suite, *args: str) -> subprocess.CompletedProcess[str]:
    """``cronwave ARGS`` as a process of its own, against ``suite``."""
    return subprocess.run(
        [*cronwave_argv(), *args],
        env=cli_env(suite),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def soon(seconds: float) -> datetime:
    """An instant ``seconds`` from now, on a whole second."""
    return (datetime.now(UTC) + timedelta(seconds=seconds)).replace(microsecond=0)


def breaches_of(c: cronwave.Client, schedule_id: str) -> list[cronwave.DeadlineBreach]:
    return c.deadline_breaches(schedule_id)


def wait_breach(
    c: cronwave.Client, schedule_id: str, timeout: float = 60
) -> cronwave.DeadlineBreach:
    def recorded() -> cronwave.DeadlineBreach:
        found = breaches_of(c, schedule_id)
        assert found, f"no breach of {schedule_id} yet"
        return found[0]

    return eventually(recorded, timeout=timeout, interval=0.2, what=f"a breach of {schedule_id}")


def scrape(suite: Suite, service: str = "workflow-store") -> dict[str, Any]:
    address = suite.procs[service].metrics_address
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def counted(suite: Suite, schedule_id: str, reason: str) -> float:
    return counted_in(suite, "workflow-store", schedule_id, reason)


def counted_in(suite: Suite, service: str, schedule_id: str, reason: str = "not_started") -> float:
    """The breaches of ``schedule_id`` for ``reason`` that process ``service`` counted."""
    family = scrape(suite, service).get(BREACHES.removesuffix("_total"))
    if family is None:
        return 0.0
    return sum(
        s.value
        for s in family.samples
        if s.name == BREACHES
        and s.labels.get("schedule") == schedule_id
        and s.labels.get("reason") == reason
    )


def status_json(suite: Suite, *args: str) -> tuple[int, list[dict[str, Any]]]:
    done = cronwave_cli(suite, "status", "-o", "json", *args)
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)
