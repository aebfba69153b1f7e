"""kill -9 the worker at random points of billing runs — including between the
gateway's charge and the job's record of it — and check that after recovery every
invoice is charged exactly once.

Real processes: workflow-store, payment-gateway, dispatcher (its sweeper re-dispatches
a run whose heartbeat lapsed), two workers, Redis, and SQLite or PostgreSQL. The
billing heartbeat timeout is 1 s here, so a dead worker's run resumes within about a
second. ``CRONWAVE_DRILL_KILLS`` sets how many kills must interrupt a run (8 by
default, on the production backend; the longer drill is 20 or more);
``CRONWAVE_TEST_SEED`` replays a drill (the ``drill_seed`` fixture).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from cronwave._models import Run
from cronwave_core.suite import Proc
from tests.conftest import BACKENDS
from tests.harness.gateway import BillingSuite, charged_twice
from tests.helpers import eventually

# A guarantee: both backends. The full drill runs on the production backend when it
# is configured (CI: PostgreSQL); on the other, fewer kills keep the suite in budget.
pytestmark = [pytest.mark.slow, pytest.mark.both_backends]

#: Trials whose kill interrupted the run, on the production backend
KILLS = int(os.environ.get("CRONWAVE_DRILL_KILLS") or 8)
KILLS_SECOND_BACKEND = max(KILLS // 3, 1)  # on SQLite when PostgreSQL is configured too
CUSTOMERS = 2_000
CHARGE_BATCH = 25  # 80 gateway calls a run: room for kills at many points
PAYLOAD = {"customers": CUSTOMERS, "charge_batch": CHARGE_BATCH, "invoice_batch": 250}
#: The whole drill must end within this: about 5 s a kill on an idle machine, and room
#: for a loaded one.
BUDGET_S = 120 + 30 * KILLS


@dataclass
class Trial:
    number: int
    how: str  # "kill -9 at <t>s" or "killed itself after gateway answer <k>"
    killed_in: str  # the phase of the checkpoint the store had at the kill
    attempts: int
    recovery_s: float  # kill -9 to a newer attempt holding the run
    replays: int  # charges the resumed attempt got back from the gateway instead of making

    @property
    def interrupted(self) -> bool:
        return self.attempts > 1


def wait_until_running(suite: BillingSuite, run_id: str) -> Run:
    def running() -> Run:
        run = suite.run(run_id)
        assert run.state == "RUNNING" and run.worker_id, run.state
        return run

    return eventually(running, timeout=30, interval=0.01, what="run started")


def holder(workers: list[Proc], run: Run) -> Proc:
    """The worker process whose attempt holds ``run`` (worker ids are worker-<pid>)."""
    for proc in workers:
        if run.worker_id == f"worker-{proc.pid}":
            return proc
    raise AssertionError(f"{run.worker_id} is none of {[w.pid for w in workers]}")


def phase(run: Run) -> str:
    checkpoint = json.loads(run.checkpoint_json) if run.checkpoint_json else {}
    return str(checkpoint.get("phase", "(no checkpoint yet)"))


def drill_worker(suite: BillingSuite, workers: list[Proc], answer: int, schedule: str) -> Run:
    """Replace one idle worker by one that kills itself right after its ``answer``-th
    gateway answer, before recording it, and let it take the run: the other worker is
    held (SIGSTOP) until the run is claimed."""
    suite.suite.stop_proc(workers.pop(0))
    workers.insert(0, suite.start_worker(CRONWAVE_BILLING_CRASH_AFTER_CHARGES=str(answer)))
    standby = workers[1]
    os.kill(standby.pid, signal.SIGSTOP)
    try:
        run = suite.trigger(schedule)
        wait_until_running(suite, run.run_id)
    finally:
        os.kill(standby.pid, signal.SIGCONT)
    return run


@pytest.mark.timeout(BUDGET_S + 60)
def test_kill_9_at_random_points_charges_every_invoice_exactly_once(
    billing_suite, drill_seed: int, backend: str
) -> None:
    seed = drill_seed
    kills_wanted = KILLS if backend == BACKENDS[-1] else KILLS_SECOND_BACKEND
    max_trials = kills_wanted * 2  # a kill can land after the run ended: not counted
    rng = random.Random(seed)
    suite: BillingSuite = billing_suite(test_hooks=True)  # the crash drill
    began = time.monotonic()
    # Two workers, as in a pool: one runs the job and is killed, the other takes over.
    workers = [suite.start_worker(), suite.start_worker()]
    # An uninterrupted run first: it seeds the customers, and its length is the window
    # the random kills are drawn from.
    warm = suite.trigger(suite.schedule(**PAYLOAD, period="warm-up"))
    window = wait_until_running(suite, warm.run_id)
    started = time.monotonic()
    assert suite.finished(warm.run_id).state == "SUCCEEDED"
    window_s = time.monotonic() - started
    assert window.state == "RUNNING"

    trials: list[Trial] = []
    for number in range(max_trials):
        if sum(t.interrupted for t in trials) >= kills_wanted:
            break
        assert time.monotonic() - began < BUDGET_S, f"over budget after {number} trials"
        period = f"trial-{number}"
        by_itself = number % 2 == 1
        schedule = suite.schedule(**PAYLOAD, period=period)
        if by_itself:
            # The one window in which money moved and the job's database does not
            # know yet.
            answer = rng.randint(1, CUSTOMERS // CHARGE_BATCH)
            run = drill_worker(suite, workers, answer, schedule)
            eventually(lambda w=workers[0]: not w.alive(), timeout=60, what="the crash")
            how = f"killed itself after gateway answer {answer}"
        else:
            run = suite.trigger(schedule)
            victim = holder(workers, wait_until_running(suite, run.run_id))
            seen_running = datetime.now(UTC)
            delay = rng.uniform(0.0, 0.6 * window_s)  # the warm-up also paid start-up costs
            time.sleep(delay)
            suite.kill(victim)
            how = f"kill -9 at {delay:.2f}s"
        killed = time.monotonic()
        at_kill = suite.run(run.run_id)
        # A new second worker boots while this trial is checked.
        workers = [w for w in workers if w.alive()] + [suite.start_worker(wait=False)]

        recovery = 0.0
        if not at_kill.terminal:
            eventually(
                lambda r=run.run_id, a=at_kill.attempt: suite.run(r).attempt > a,
                timeout=60,
                interval=0.02,
                what=f"trial {number}: a new attempt after the kill",
            )
            recovery = time.monotonic() - killed
        final = suite.finished(run.run_id, timeout=90)
        assert final.state == "SUCCEEDED", (seed, number, how, final.state, final.error)
        books = suite.reconcile(period)
        assert (books.customers, books.invoices, books.gateway_charges) == (
            CUSTOMERS, CUSTOMERS, CUSTOMERS,
        ), (seed, number, how, books)  # fmt: skip
        assert (books.duplicates, books.missing, books.unrecorded) == (0, 0, 0), (
            seed, number, how,
        )  # fmt: skip
        if at_kill.terminal and not by_itself and final.finished_at is not None:
            # The kill came after the end: this run was shorter than the warm-up (which
            # also paid start-up costs, and on a loaded machine far more), so later
            # kills are drawn from the shortest time a run had left once the test saw it
            # running (its own duration counts from its start, which the test sees only
            # after its next look: 1.13 s into a 1.11-s run was after its end).
            left = (final.finished_at - seen_running).total_seconds()
            window_s = min(window_s, max(left, 0.05))
        result = final.result or {}
        killed_in = phase(at_kill) if not at_kill.terminal else "after the end"
        trial = Trial(number, how, killed_in, final.attempt, recovery, result["gateway_replays"])
        trials.append(trial)
        if by_itself:
            # The resumed attempt asked again for the batch its predecessor was charged
            # for but never recorded, and got those charges back.
            assert trial.interrupted and trial.replays >= 1, (seed, trial)

    elapsed = time.monotonic() - began
    assert charged_twice(suite.gateway_url) == [], f"seed {seed}"
    kills = [t for t in trials if t.interrupted]
    recoveries = sorted(t.recovery_s for t in kills)
    print(
        f"\nbilling kill drill (seed {seed}): {len(trials)} trials, {len(kills)} interrupted "
        f"runs, in {elapsed:.0f}s (kill window {window_s:.2f}s)"
    )
    for t in trials:
        print(
            f"  trial {t.number:2d}: {t.how:<42} in {t.killed_in:<19} attempts {t.attempts}"
            f"  new attempt after {t.recovery_s:4.1f}s  replays {t.replays}"
        )
    print(
        f"  kill -9 to new attempt: median {recoveries[len(recoveries) // 2]:.1f}s, max "
        f"{recoveries[-1]:.1f}s; 0 duplicate, 0 missing, 0 unrecorded charges in every trial"
    )
    assert len(kills) >= kills_wanted, (
        f"seed {seed}: only {len(kills)} of {len(trials)} kills interrupted a run"
    )


def test_a_worker_dead_between_charge_and_record_is_resumed_by_another_without_a_second_charge(
    billing_suite,
) -> None:
    # Given two worker processes; the one that takes the run kills itself (SIGKILL)
    # right after the gateway's 3rd answer, before the job's database records it
    suite: BillingSuite = billing_suite(test_hooks=True)  # the crash drill
    workers = [suite.start_worker(), suite.start_worker()]
    period = "two-processes"
    schedule = suite.schedule(**PAYLOAD, period=period)
    run = drill_worker(suite, workers, 3, schedule)

    # When it has died and the other worker process resumed the run
    eventually(lambda: not workers[0].alive(), timeout=60, what="the crash")
    final = suite.finished(run.run_id, timeout=90)

    # Then the gateway's ledger has every invoice charged exactly once
    assert final.state == "SUCCEEDED", (final.state, final.error)
    assert final.attempt == 2 and final.worker_id == f"worker-{workers[1].pid}"
    books = suite.reconcile(period)
    assert (books.customers, books.invoices, books.gateway_charges) == (
        CUSTOMERS, CUSTOMERS, CUSTOMERS,
    ), books  # fmt: skip
    assert (books.duplicates, books.missing, books.unrecorded) == (0, 0, 0), books
    assert charged_twice(suite.gateway_url) == []
    # And the resumed attempt got the charges it had not recorded back from the gateway
    # under the same keys, instead of making them again
    assert (final.result or {})["gateway_replays"] >= 1
