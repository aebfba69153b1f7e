"""kill -9 the worker at random points of billing runs — including between the
gateway's charge and the job's record of it — and check that after recovery every
invoice is charged exactly once.

Real processes: workflow-store, payment-gateway, dispatcher (its sweeper re-dispatches
a run whose heartbeat lapsed), workers, Redis, and SQLite or PostgreSQL. The billing
heartbeat timeout is 1 s here, so a dead worker's run is resumed within seconds.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from dataclasses import dataclass

import pytest

from cronwave._models import Run
from cronwave_core.suite import Proc
from tests.billing.support import BillingSuite, charged_twice
from tests.helpers import eventually

pytestmark = pytest.mark.slow

TRIALS = 20
CUSTOMERS = 2_000
CHARGE_BATCH = 25  # 80 gateway calls a run: room for kills at many points
PAYLOAD = {"customers": CUSTOMERS, "charge_batch": CHARGE_BATCH, "invoice_batch": 250}
#: The whole drill must end within this (it takes about a minute and a half).
BUDGET_S = 420


@dataclass
class Trial:
    number: int
    how: str  # "kill -9 at <t>s" or "killed itself after gateway answer <k>"
    killed_in: str  # the phase the checkpoint showed at the kill
    attempts: int
    recovery_s: float  # kill -9 to a newer attempt holding the run
    replays: int  # charges the resumed attempt got back from the gateway instead of making


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


@pytest.mark.timeout(BUDGET_S + 60)
def test_kill_9_at_random_points_charges_every_invoice_exactly_once(billing_suite) -> None:
    seed = int(os.environ.get("CRONWAVE_TEST_SEED") or time.time())
    rng = random.Random(seed)
    suite: BillingSuite = billing_suite()
    began = time.monotonic()
    # Two workers, as in a pool: one runs the job and is killed, the other takes over.
    workers = [suite.start_worker(), suite.start_worker()]
    trials: list[Trial] = []
    for number in range(TRIALS):
        assert time.monotonic() - began < BUDGET_S, f"over budget after {number} trials"
        period = f"trial-{number}"
        by_itself = number % 2 == 1
        schedule = suite.schedule(**PAYLOAD, period=period)
        if by_itself:
            # A worker that kills itself right after its k-th gateway answer, before
            # recording it: the one window where money moved and the job's database
            # does not know yet. The other worker is held (SIGSTOP) until the drill
            # worker has claimed the run.
            answer = rng.randint(1, CUSTOMERS // CHARGE_BATCH)
            suite.suite.stop_proc(workers.pop(0))
            victim = suite.start_worker(CRONWAVE_BILLING_CRASH_AFTER_CHARGES=str(answer))
            standby = workers[0]
            os.kill(standby.pid, signal.SIGSTOP)
            try:
                run = suite.trigger(schedule)
                wait_until_running(suite, run.run_id)
            finally:
                os.kill(standby.pid, signal.SIGCONT)
            eventually(lambda w=victim: not w.alive(), timeout=60, what="the worker's crash")
            how = f"killed itself after gateway answer {answer}"
        else:
            run = suite.trigger(schedule)
            victim = holder(workers, wait_until_running(suite, run.run_id))
            delay = rng.uniform(0.0, 1.2)
            time.sleep(delay)
            suite.kill(victim)
            how = f"kill -9 at {delay:.2f}s"
        killed = time.monotonic()
        at_kill = suite.run(run.run_id)
        # A new second worker boots while this trial is checked.
        workers = [w for w in workers if w.alive()] + [suite.start_worker(wait=False)]

        if at_kill.terminal:
            # Killed after the run had already finished: nothing to recover.
            recovery, killed_in = 0.0, "after the end"
        else:
            eventually(
                lambda r=run.run_id, a=at_kill.attempt: suite.run(r).attempt > a,
                timeout=60,
                interval=0.02,
                what=f"trial {number}: a new attempt after the kill",
            )
            recovery, killed_in = time.monotonic() - killed, phase(at_kill)
        final = suite.finished(run.run_id, timeout=90)
        assert final.state == "SUCCEEDED", (number, how, final.state, final.error)
        books = suite.reconcile(period)
        assert (books.customers, books.invoices, books.gateway_charges) == (
            CUSTOMERS, CUSTOMERS, CUSTOMERS,
        ), (number, how, books)  # fmt: skip
        assert (books.duplicates, books.missing, books.unrecorded) == (0, 0, 0), (number, how)
        result = final.result or {}
        trials.append(
            Trial(number, how, killed_in, final.attempt, recovery, result.get("gateway_replays", 0))
        )
        if by_itself:
            # The resumed attempt asked again for the batch its predecessor was charged
            # for but never recorded, and got those charges back.
            assert final.attempt >= 2 and result.get("gateway_replays", 0) >= 1, trials[-1]

    elapsed = time.monotonic() - began
    assert charged_twice(suite.gateway_url) == []
    interrupted = [t for t in trials if t.killed_in != "after the end"]
    recoveries = sorted(t.recovery_s for t in interrupted)
    print(f"\nbilling kill drill (seed {seed}): {len(trials)} trials in {elapsed:.0f}s")
    for t in trials:
        print(
            f"  trial {t.number:2d}: {t.how:<42} in {t.killed_in:<19} attempts {t.attempts}"
            f"  recovered in {t.recovery_s:4.1f}s  replays {t.replays}"
        )
    print(
        f"  interrupted {len(interrupted)}/{len(trials)}; kill to new attempt: median "
        f"{recoveries[len(recoveries) // 2]:.1f}s, max {recoveries[-1]:.1f}s; "
        "0 duplicate and 0 missing charges in every trial"
    )
    # Most random kills land mid-run; every self-kill does.
    assert len(interrupted) >= TRIALS * 3 // 4
