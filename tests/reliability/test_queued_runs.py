"""Runs queued on busy job processes: the bodies of an instant are in their processes
before it and run back to back; a run that has not begun moves when its process is
held up, is handed over when its process dies, and is cancelled without running; a
cancel reaches only the run it names."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronwave_core.domain.instants import epoch_ns
from tests.harness.beats import Beats
from tests.harness.processes import job_processes
from tests.helpers import eventually
from tests.reliability.pools import open_pool, spec, supervised
from worker.isolation import ProcessSupervisor
from worker.job_process import JobProcessPool
from worker.supervisor import AttemptResult, BeatResult, Outcome

pytestmark = pytest.mark.slow


class Runs:
    """Attempts supervised on threads of their own, each result kept by name."""

    def __init__(self, pool: JobProcessPool, interval: float = 10) -> None:
        self.pool = pool
        self.interval = interval  # each run's heartbeat interval, in seconds
        self.results: dict[str, AttemptResult] = {}
        self.supervisors: dict[str, ProcessSupervisor] = {}
        self._threads: list[threading.Thread] = []

    def start(self, name: str, job_type: str, fire: datetime, **payload: Any) -> None:
        supervisor = supervised(self.pool, interval=self.interval)
        self.supervisors[name] = supervisor
        run = {**spec(job_type, fire, **payload), "run_id": name}

        def attempt() -> None:
            self.results[name] = supervisor.run(run, fire)

        thread = threading.Thread(target=attempt, name=f"run-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def queued(self, count: int) -> None:
        """Wait until ``count`` runs are in the pool's processes."""
        eventually(lambda: self.pool.queued_count() == count, timeout=30, what=f"{count} queued")

    def join(self) -> None:
        for thread in self._threads:
            thread.join(90)
        assert not any(thread.is_alive() for thread in self._threads)


def soon(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def test_runs_due_at_one_instant_are_in_their_processes_before_it(
    pool: JobProcessPool, namespace: str
) -> None:
    # Given two job processes and 20 runs due at one instant a few seconds off
    processes = set(job_processes(namespace))
    fire = soon(6)
    runs = Runs(pool)
    for i in range(20):
        runs.start(f"r{i}", "cronwave.noop", fire)
    # Then all 20 are handed over before the instant, queued on the two processes
    runs.queued(20)
    queued_at = datetime.now(UTC)
    runs.join()
    assert queued_at < fire, "the machine was too slow to tell: rerun"
    # and each ran there, at the instant at the earliest, once
    assert {r.outcome for r in runs.results.values()} == {Outcome.SUCCEEDED}
    assert all(r.body_started_ns >= epoch_ns(fire) for r in runs.results.values())
    assert set(job_processes(namespace)) == processes


def queue_behind_busy_processes(runs: Runs, gate: Path, bound: float) -> None:
    """Both of the pool's processes busy, one with a body held at ``gate``, one napping
    a second; then two runs due in a moment queued, one on each. Waits up to ``bound``
    seconds for both queued runs to end while the gate is still shut (the one behind
    the held body must move to the napping process once its nap is over), then opens
    the gate and joins every run."""
    runs.start("held", "drill.gated", soon(0), gate=str(gate))
    runs.queued(1)
    runs.start("nap", "cronwave.sleep", soon(0), seconds=1.0)
    runs.queued(2)
    fire = soon(0.3)
    runs.start("a", "cronwave.noop", fire)
    runs.queued(3)
    runs.start("b", "cronwave.noop", fire)
    runs.queued(4)
    done: Callable[[], bool] = lambda: {"a", "b"} <= runs.results.keys()  # noqa: E731
    try:
        eventually(done, timeout=bound, what="both queued runs over, the gate shut")
    finally:
        gate.touch()
        runs.join()


def test_a_run_queued_behind_a_body_that_goes_on_moves_to_a_process_gone_idle(
    pool: JobProcessPool, tmp_path: Path
) -> None:
    # Given both processes busy, when a run is queued on each: then both run while
    # the gate is still shut
    runs = Runs(pool)
    queue_behind_busy_processes(runs, tmp_path / "gate", bound=30)
    assert runs.results["a"].outcome is runs.results["b"].outcome is Outcome.SUCCEEDED
    assert runs.results["held"].outcome is runs.results["nap"].outcome is Outcome.SUCCEEDED


def test_a_process_gone_idle_wakes_a_run_queued_elsewhere_at_once(
    pool: JobProcessPool, tmp_path: Path
) -> None:
    # Given runs whose heartbeats come only once a minute: within the bound only the
    # pool can wake them (a queued run never polls; the bound is well inside the
    # 30-s duration limit, past which a queued run moves anyway)
    runs = Runs(pool, interval=60)
    # When both processes are busy and a run is queued on each, then the one behind
    # the held body moves once the napping process is idle
    queue_behind_busy_processes(runs, tmp_path / "gate", bound=15)
    assert runs.results["a"].outcome is runs.results["b"].outcome is Outcome.SUCCEEDED


def test_a_run_woken_before_it_is_due_looks_again_at_its_instant(
    pool: JobProcessPool, tmp_path: Path
) -> None:
    # Given a body held at a gate on the first process, a short nap on the second, and
    # a run due in 1.5 s queued behind the held body (the first of two equal queues)
    gate = tmp_path / "gate"
    runs = Runs(pool, interval=60)
    runs.start("held", "drill.gated", soon(0), gate=str(gate))
    runs.queued(1)
    runs.start("nap", "cronwave.sleep", soon(0), seconds=0.3)
    runs.queued(2)
    runs.start("late", "cronwave.noop", soon(1.5))
    runs.queued(3)
    try:
        # When the nap ends (the pool wakes the queued run, which is not due yet), then
        # the run moves to the idle process at its instant, with nothing waking it then
        eventually(lambda: "nap" in runs.results, timeout=15, what="the nap over")
        assert "late" not in runs.results
        eventually(lambda: "late" in runs.results, timeout=10, what="the late run over")
        assert runs.results["late"].outcome is Outcome.SUCCEEDED
        assert "held" not in runs.results  # it ran beside the held body, not after it
    finally:
        gate.touch()
        runs.join()


def test_runs_queued_on_a_process_that_dies_are_handed_to_another_and_run(
    tmp_path: Path, namespace: str
) -> None:
    with open_pool(tmp_path, namespace, processes=1) as one:
        # Given one process, with a body that kills it first in its queue: due a moment
        # before the runs behind it, so it is first whichever hand-over reaches the
        # process first (on a loaded machine a later run's can overtake it)
        crash_fire = soon(1.5)
        fire = crash_fire + timedelta(seconds=0.3)
        runs = Runs(one)
        runs.start("crash", "drill.crash", crash_fire)
        runs.queued(1)
        runs.start("a", "cronwave.noop", fire)
        runs.start("b", "cronwave.noop", fire)
        runs.queued(3)
        runs.join()
    # Then the crash fails its own run only; the runs behind it never began there and
    # ran in the process that replaced it
    crash = runs.results["crash"]
    assert crash.outcome is Outcome.FAILED and crash.error_types == ("JobProcessDied",)
    for name in ("a", "b"):
        assert runs.results[name].outcome is Outcome.SUCCEEDED
        assert runs.results[name].body_started_ns >= epoch_ns(fire)


def test_bodies_that_began_or_ended_before_their_process_died_at_a_crowded_instant_run_once(
    tmp_path: Path, namespace: str
) -> None:
    with open_pool(tmp_path, namespace, processes=1) as one:
        # Given one process and four runs due at one instant, queued in this order: a
        # body that ends at once, one that kills the process, two behind them (at such
        # an instant the process holds its started and outcome lines back)
        fire = soon(1.5)
        ended, crashed = tmp_path / "ended-bodies", tmp_path / "crash-bodies"
        runs = Runs(one)
        runs.start("first", "drill.marked", fire, mark=str(ended))
        runs.queued(1)
        runs.start("crash", "drill.crash", fire, mark=str(crashed))
        runs.queued(2)
        runs.start("a", "cronwave.noop", fire)
        runs.start("b", "cronwave.noop", fire)
        runs.queued(4)
        runs.join()
    # Then each of the first two began once: its worker learned from the lines the
    # process held back that the first ended and the second began, so neither went to
    # another process to begin again; the runs behind them ran in the next process
    assert ended.read_text().count("\n") == 1
    assert crashed.read_text().count("\n") == 1
    first, crash = runs.results["first"], runs.results["crash"]
    assert first.outcome is Outcome.SUCCEEDED and first.result.get("pid")
    assert crash.outcome is Outcome.FAILED and crash.error_types == ("JobProcessDied",)
    for name in ("a", "b"):
        assert runs.results[name].outcome is Outcome.SUCCEEDED


def test_a_queued_run_superseded_while_it_waits_leaves_its_process_when_woken(
    pool: JobProcessPool,
) -> None:
    # Given a run queued on its process a minute ahead of its fire time, its
    # supervisor looking at the lease only when woken (its heartbeat interval is 60 s)
    wakes: list[Callable[[], None] | None] = []
    beats = Beats()
    supervisor = supervised(pool, beats, interval=60, watch=wakes.append)
    fire = soon(60)
    box: dict[str, AttemptResult] = {}

    def attempt() -> None:
        box["r"] = supervisor.run(spec("cronwave.noop", fire), fire)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    eventually(lambda: pool.queued_count() == 1 and wakes, timeout=30, what="queued, watched")
    # When the store refuses its attempt and the lease wakes it
    beats.answer = BeatResult.SUPERSEDED
    wake = wakes[-1]
    assert wake is not None
    wake()
    # Then it leaves its process at once, superseded, without its body beginning
    thread.join(15)
    assert not thread.is_alive(), "the superseded run still waits"
    assert box["r"].outcome is Outcome.SUPERSEDED and not box["r"].body_started_ns
    assert pool.queued_count() == 0


def test_a_cancel_reaches_only_the_run_it_names(tmp_path: Path, namespace: str) -> None:
    with open_pool(tmp_path, namespace, processes=1) as one:
        # Given one process with a body that runs until cancelled, and two runs behind;
        # without the store's wake-ups here, each supervisor learns of its cancel at
        # its next look (every second), well within the cancel's 10-s grace: on a
        # loaded machine a 10-s look could come after the grace, and then the body is
        # stopped with its process, which is another path than the one tested here
        fire = soon(1.0)
        runs = Runs(one, interval=1)
        for name in ("first", "second", "third"):
            runs.start(name, "drill.polite", fire)
            runs.queued(len(runs.supervisors))
        # When the third is cancelled before it begins, and the first while it runs
        runs.supervisors["third"].cancel.request(timedelta(seconds=10), "cancelled: test")
        eventually(lambda: "third" in runs.results, timeout=30, what="third cancelled")
        eventually(lambda: runs.supervisors["first"]._started_ns > 0, timeout=30, what="first")
        runs.supervisors["first"].cancel.request(timedelta(seconds=10), "cancelled: test")
        eventually(lambda: "first" in runs.results, timeout=30, what="first cancelled")
        # Then the second, which began after it on the same process, did not see it
        eventually(lambda: runs.supervisors["second"]._started_ns > 0, timeout=30, what="2nd")
        # (a body that saw a cancel returns within its 20 ms step)
        threading.Event().wait(1.0)
        assert "second" not in runs.results
        runs.supervisors["second"].cancel.request(timedelta(seconds=10), "cancelled: test")
        runs.join()
    third = runs.results["third"]
    assert third.outcome is Outcome.CANCELLED and third.body_started_ns == 0
    assert runs.results["first"].outcome is Outcome.CANCELLED
    assert runs.results["second"].outcome is Outcome.CANCELLED


def test_a_run_handed_over_later_but_due_sooner_begins_first(
    tmp_path: Path, namespace: str
) -> None:
    with open_pool(tmp_path, namespace, processes=1) as one:
        # Given one process with a run due in two seconds queued on it
        later, sooner = soon(2.5), soon(1.0)
        runs = Runs(one)
        runs.start("later", "cronwave.noop", later)
        runs.queued(1)
        # When a run due sooner is queued behind it
        runs.start("sooner", "cronwave.noop", sooner)
        runs.queued(2)
        runs.join()
    # Then each began at its own fire time, the sooner one first
    first, second = runs.results["sooner"], runs.results["later"]
    assert first.outcome is second.outcome is Outcome.SUCCEEDED
    assert epoch_ns(sooner) <= first.body_started_ns < epoch_ns(later) <= second.body_started_ns


def test_runs_queued_while_the_pool_grows_wait_for_its_new_processes(
    tmp_path: Path, namespace: str
) -> None:
    # Given a pool of one warm process that may grow to four
    with open_pool(tmp_path, namespace, processes=4, warm=1) as pool:
        # When eight runs of an instant are queued at once, as its claims arrive
        taken = [pool.acquire(wait=30, queue=True, ahead=5.0) for _ in range(8)]
        try:
            # Then they are spread over the four processes, two each, rather than
            # piled on the one that was ready
            assert all(proc is not None for proc in taken)
            per_process = Counter(id(proc) for proc in taken)
            assert sorted(per_process.values()) == [2, 2, 2, 2]
        finally:
            for proc in taken:
                if proc is not None:
                    pool.release(proc, reusable=True)


def test_a_run_due_now_queues_at_once_while_the_pool_grows(tmp_path: Path, namespace: str) -> None:
    # Given a pool of one warm process that may grow to four, that one busy
    with open_pool(tmp_path, namespace, processes=4, warm=1) as pool:
        busy = pool.acquire(wait=30, queue=True)
        assert busy is not None
        try:
            # When a run due now asks for a place while the others start
            due_now = pool.acquire(wait=0.0, queue=True, ahead=0.0)
            # Then it has one at once, on the busy process, rather than wait for them
            assert due_now is busy
            pool.release(due_now, reusable=True)
        finally:
            pool.release(busy, reusable=True)
