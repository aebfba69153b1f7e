"""Planners for the tests: a replica as a real process of a running suite, or a
planner in the test's own process on a manual clock (where calendar time must pass),
talking to the suite's real services over loopback gRPC."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cron_planner.app import Planner
from cron_planner.clock import ManualClock
from cron_planner.ports import Start
from cron_planner.remote import DispatcherClient, single_fence
from cronwave_core.errors import CronwaveError
from cronwave_core.rpc import open_channel
from cronwave_core.settings import NetworkSettings
from cronwave_core.settings_tls import TlsSettings
from cronwave_core.suite import Proc, Suite
from tests.harness.processes import raise_all, run_all
from tests.helpers import eventually, fresh


def start_planner_process(suite: Suite, index: int, env: Mapping[str, str] | None = None) -> Proc:
    """Start planner replica ``index`` of ``suite`` as a process, with ``env`` on top
    of the suite's environment (it is stopped, and checked gone, with the suite)."""
    base = suite.config.env
    suite.config.env = {**base, **(env or {})}
    try:
        return suite.start_service("cron-planner", index=index)
    finally:
        suite.config.env = base


@dataclass
class ClockedPlanner:
    """A planner in this process on a manual clock, against a real suite."""

    planner: Planner
    clock: ManualClock
    env: Mapping[str, str] = field(default_factory=dict)  # what it was started with
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

    def start_runs(self, starts: Sequence[Start]) -> list[str | CronwaveError]:
        """Start ``starts`` as this planner's fire loop does (its certificate, its
        fencing token, one call to the dispatcher): for a start the loop would not make
        on its own clock, such as one a clock that ran ahead would make."""
        timeout = timedelta(seconds=10)
        address = NetworkSettings.from_env(self.env).dispatcher_addr
        tls = TlsSettings.from_env(self.env)
        channel = open_channel(address, timeout, traced=False, tls=tls)
        try:
            client = DispatcherClient(channel, timeout, single_fence)
            return client.start_runs(starts, self.planner.elector.token())
        finally:
            channel.close()

    def settle(self) -> None:
        """Let everything queued for now be done (starts, the MISSED rows of slots that
        have come: a row waits for its slot's fire time)."""
        self.parked_until()
        eventually(lambda: self.planner.loop.pending_missed_due == 0, what="MISSED rows recorded")
        self.parked_until()

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.planner.stop()


StartPlanner = Callable[[datetime], ClockedPlanner]

#: The environment of a suite whose planner runs on a simulated calendar (in 2030):
#: its workflow-store accepts MISSED slots that far past its own clock. A test hook:
#: the suite needs ``test_hooks=True`` too.
SIMULATED_CALENDAR = {"CRONWAVE_MISSED_SLOTS_AHEAD": "100000h"}


class ClockedPlanners:
    """Starts in-process planners on manual clocks against ``suite``, each a candidate
    of its own with ``env`` on top of the suite's environment, and stops them all."""

    def __init__(self, suite: Suite, env: Mapping[str, str] | None = None) -> None:
        self.suite = suite
        self.env = dict(env or {})
        self.started: list[ClockedPlanner] = []

    def start(self, at: datetime) -> ClockedPlanner:
        """A planner whose clock reads ``at``, once it leads."""
        env = {
            **self.suite.base_env(),
            **self.env,
            "CRONWAVE_CANDIDATE": fresh("clocked"),
            "CRONWAVE_TLS_IDENTITY": "cron-planner",
        }
        clock = ManualClock(at)
        planner = Planner.from_env(env, clock=clock, idle=timedelta(hours=1))
        clocked = ClockedPlanner(planner, clock, env)
        self.started.append(clocked)
        planner.start()
        clocked.leading()
        return clocked

    def stop(self) -> None:
        """Stop every planner, whatever stopping an earlier one raised."""
        raise_all(run_all(p.stop for p in self.started), "stopping the clocked planners")
