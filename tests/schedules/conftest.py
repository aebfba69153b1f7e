"""Schedules end to end: real store, leader-election, dispatcher and worker processes,
with the planner either as a real process or -- where calendar time must pass -- in
this process on a ManualClock, talking to the real services over loopback gRPC."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from cron_planner.app import Planner
from cron_planner.clock import ManualClock
from cronwave import Client, Run
from cronwave_core.suite import Suite
from tests.conftest import SuiteFactory
from tests.helpers import eventually, fresh
from tests.workflow_store.support import StoreProcess

LEASE_ENV = {
    "CRONWAVE_LEASE_TTL": "3",
    "CRONWAVE_LEASE_RENEW_INTERVAL": "0.5",
    "CRONWAVE_LEASE_RETRY_INTERVAL": "0.2",
}


def client_for(suite: Suite) -> Client:
    return Client(
        store_addr=suite.store_addr,
        dispatcher_addr=suite.dispatcher_addr,
        planner_addr=suite.planner_addr,
        leader_addr=suite.leader_addr,
        timeout=timedelta(seconds=10),
    )


@dataclass
class ClockedPlanner:
    """A planner in this process on a manual clock, against a real suite."""

    planner: Planner
    clock: ManualClock
    stopped: bool = False

    def leading(self) -> None:
        eventually(lambda: self.planner.elector.is_leader(), timeout=20, what="leading")
        eventually(lambda: self.planner.loop.term, timeout=20, what="term begun")

    def knows(self, schedule_id: str) -> None:
        eventually(
            lambda: self.planner.index.get(schedule_id) is not None,
            timeout=20,
            what=f"planner knows {schedule_id}",
        )
        self.planner.loop.wake()  # so the next parked_until() reflects the change

    def parked_until(self) -> datetime:
        return eventually(self.clock.parked, timeout=20, interval=0.005, what="loop parked")

    def run_until(self, instant: datetime) -> None:
        """Move time to ``instant``, stopping wherever the loop waits, so it acts at
        each instant it asked for."""
        for _ in range(20_000):
            until = self.parked_until()
            if until >= instant:
                self.clock.set(instant)
                self.parked_until()
                return
            self.clock.set(until)
        raise AssertionError("the fire loop did not settle")

    def settle(self) -> None:
        """Let everything queued for now be done (starts, MISSED rows)."""
        self.parked_until()
        eventually(lambda: self.planner.loop.pending_missed == 0, what="MISSED rows recorded")
        self.parked_until()

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.planner.stop()


StartPlanner = Callable[[datetime], ClockedPlanner]


@pytest.fixture
def suite(make_suite: SuiteFactory) -> Suite:
    """Store, leader-election, dispatcher and a worker; no planner process."""
    return make_suite(planners=0, env=LEASE_ENV)


@pytest.fixture
def client(suite: Suite) -> Iterator[Client]:
    with client_for(suite) as c:
        yield c


@pytest.fixture
def start_planner(suite: Suite) -> Iterator[StartPlanner]:
    """Start in-process planners on manual clocks; every one is stopped at the end."""
    started: list[ClockedPlanner] = []

    def start(at: datetime) -> ClockedPlanner:
        env = {**suite.base_env(), **LEASE_ENV, "CRONWAVE_CANDIDATE": fresh("clocked")}
        clock = ManualClock(at)
        planner = Planner.from_env(env, clock=clock, idle=timedelta(hours=1))
        rig = ClockedPlanner(planner, clock)
        started.append(rig)
        planner.start()
        rig.leading()
        return rig

    yield start
    for rig in started:
        rig.stop()


def runs_of(client: Client, schedule_id: str) -> list[Run]:
    """Every run of the schedule, oldest fire time first."""
    return sorted(client.list_runs(schedule_id, limit=1000), key=lambda r: r.fire_time)


@pytest.fixture
def store_only(tmp_path: Path, database_url: str) -> Iterator[StoreProcess]:
    """Just a workflow-store process on the test's database."""
    proc = StoreProcess(tmp_path / "store", database_url).start()
    yield proc
    proc.stop()
    assert not proc.alive()
