"""Schedules end to end: real store, leader-election, dispatcher and worker processes,
with the planner either as a real process or -- where calendar time must pass -- in
this process on a ManualClock, talking to the real services over loopback gRPC."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cronwave import Client, Run
from cronwave_core.suite import Suite
from tests.harness.clients import client_for
from tests.harness.planner import SIMULATED_CALENDAR, ClockedPlanners, StartPlanner
from tests.harness.suites import SuiteFactory

LEASE_ENV = {
    "CRONWAVE_LEASE_TTL": "3",
    "CRONWAVE_LEASE_RENEW_INTERVAL": "0.5",
    "CRONWAVE_LEASE_RETRY_INTERVAL": "0.2",
}


@pytest.fixture
def suite(make_suite: SuiteFactory) -> Suite:
    """Store, leader-election, dispatcher and a worker; no planner process (the tests'
    planners run on simulated calendars)."""
    return make_suite(planners=0, env={**LEASE_ENV, **SIMULATED_CALENDAR}, test_hooks=True)


@pytest.fixture
def client(suite: Suite) -> Iterator[Client]:
    with client_for(suite) as c:
        yield c


@pytest.fixture
def start_planner(suite: Suite) -> Iterator[StartPlanner]:
    """Start in-process planners on manual clocks; every one is stopped at the end."""
    planners = ClockedPlanners(suite, LEASE_ENV)
    yield planners.start
    planners.stop()


def runs_of(client: Client, schedule_id: str) -> list[Run]:
    """Every run of the schedule, oldest fire time first."""
    return sorted(client.list_runs(schedule_id, limit=1000), key=lambda r: r.fire_time)
