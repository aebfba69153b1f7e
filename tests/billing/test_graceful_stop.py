"""SIGTERM a worker in the middle of a billing run, with a second worker running: the
stopping worker hands the run back at a batch boundary and exits 0, the other worker
resumes it at once (not after a heartbeat lapse), and every invoice is charged exactly
once, by the gateway's ledger.

Real processes: workflow-store, payment-gateway, dispatcher, two workers, Redis, and
SQLite or PostgreSQL. The billing heartbeat timeout is 30 s here, so a resume that
waited for a lapse would show as a ``requeued heartbeat_lapsed`` event, never as the
``released`` one. Trials alternate the stopping worker's isolation (job process,
thread). ``CRONWAVE_DRILL_TRIALS`` sets how many (default 2: one of each),
``CRONWAVE_DRILL_CUSTOMERS`` the run's size, ``CRONWAVE_TEST_SEED`` replays a drill.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from cronwave._models import Run, RunEvent
from cronwave_core.suite import Proc
from tests.harness.gateway import BillingSuite, charged_twice
from tests.helpers import eventually

pytestmark = pytest.mark.slow

TRIALS = int(os.environ.get("CRONWAVE_DRILL_TRIALS") or 2)
CUSTOMERS = int(os.environ.get("CRONWAVE_DRILL_CUSTOMERS") or 20_000)
CHARGE_BATCH = 100
PAYLOAD = {"customers": CUSTOMERS, "charge_batch": CHARGE_BATCH, "invoice_batch": 2_000}
#: SIGTERM once this share of the run's charges reached the gateway: surely mid-run.
MID_RUN = 0.2
#: A worker must be gone this long after SIGTERM (CRONWAVE_GRACE 2 s, job kill grace
#: 2 s, the hand-back); past it the suite would SIGKILL it.
EXIT_WITHIN_S = 30


@dataclass
class Trial:
    number: int
    isolation: str
    exit_code: int
    charged_at_stop: int
    release_to_claim_s: float  # the store's "released" to the next "claimed"
    exit_to_claim_s: float  # the stopped worker's exit to that claim (< 0: before it)
    attempts: int
    replays: int


def wait_until_running(suite: BillingSuite, run_id: str) -> Run:
    def running() -> Run:
        run = suite.run(run_id)
        assert run.state == "RUNNING" and run.worker_id, run.state
        return run

    return eventually(running, timeout=30, interval=0.01, what="run started")


def worker_id(proc: Proc) -> str:
    return f"worker-{proc.pid}"


def start_claimed_by(suite: BillingSuite, victim: Proc, standby: Proc, schedule: str) -> Run:
    """Trigger a run of ``schedule`` while ``standby`` is held (SIGSTOP), so that
    ``victim`` takes it."""
    os.kill(standby.pid, signal.SIGSTOP)
    try:
        run = suite.trigger(schedule)
        running = wait_until_running(suite, run.run_id)
    finally:
        os.kill(standby.pid, signal.SIGCONT)
    assert running.worker_id == worker_id(victim), running.worker_id
    return run


def resumed_claim(events: list[RunEvent], number: int) -> tuple[RunEvent, RunEvent]:
    """The run's ``released`` event and the ``claimed`` event that followed it."""
    kinds = [f"{e.kind} {e.detail}".strip() for e in events]
    released = [i for i, e in enumerate(events) if e.kind == "released"]
    assert released, f"trial {number}: the run was not released: {kinds}"
    assert events[released[0]].detail == "worker_shutdown", kinds
    after = events[released[0] + 1 :]
    assert not [e for e in after if e.kind == "requeued"], (
        f"trial {number}: resumed by a sweep, not by the release: {kinds}"
    )
    claims = [e for e in after if e.kind == "claimed"]
    assert claims, f"trial {number}: no claim after the release: {kinds}"
    return events[released[0]], claims[0]


#: A trial's budget grows with the run: about a minute plus a second per thousand
#: customers (seeding, invoices and charges twice over, on a busy machine).
@pytest.mark.timeout(120 + TRIALS * (60 + CUSTOMERS // 1000))
def test_sigterm_mid_billing_hands_the_run_back_and_charges_every_invoice_once(
    billing_suite, drill_seed: int
) -> None:
    print(f"billing SIGTERM drill: seed {drill_seed}, {TRIALS} trials, {CUSTOMERS} customers")
    rng = random.Random(drill_seed)
    suite: BillingSuite = billing_suite(CRONWAVE_BILLING_HEARTBEAT_TIMEOUT="30")
    standby = suite.start_worker()
    trials: list[Trial] = []
    for number in range(TRIALS):
        # Given a billing run held by a worker, and another worker running
        isolation = "process" if number % 2 == 0 else "thread"
        victim = suite.start_worker(CRONWAVE_JOB_ISOLATION=isolation)
        period = f"trial-{number}"
        before = suite.gateway_count().charges
        run = start_claimed_by(suite, victim, standby, suite.schedule(**PAYLOAD, period=period))
        # When the worker holding it gets SIGTERM in the middle of the charges
        charged = eventually(
            lambda b=before: (n := suite.gateway_count().charges - b) >= MID_RUN * CUSTOMERS and n,
            timeout=60,
            interval=0.01,
            what=f"trial {number}: {MID_RUN:.0%} of the charges made",
        )
        time.sleep(rng.uniform(0.0, 0.3))  # anywhere inside a batch
        assert not suite.run(run.run_id).terminal, f"trial {number}: over before the stop"
        assert victim.popen is not None
        victim.popen.send_signal(signal.SIGTERM)
        exit_code = victim.popen.wait(timeout=EXIT_WITHIN_S)
        exited = datetime.now(UTC)
        # Then it exits 0, the other worker resumes the run from the release, and the
        # run succeeds with every invoice charged exactly once
        final = suite.finished(run.run_id, timeout=120)
        events = suite.api.run_events(run.run_id)
        released, claim = resumed_claim(events, number)
        assert claim.detail == worker_id(standby), (claim.detail, worker_id(standby))
        assert final.state == "SUCCEEDED", (number, final.state, final.error)
        books = suite.reconcile(period)
        assert (books.customers, books.invoices, books.gateway_charges) == (
            CUSTOMERS, CUSTOMERS, CUSTOMERS,
        ), (number, books)  # fmt: skip
        assert (books.duplicates, books.missing, books.unrecorded) == (0, 0, 0), (number, books)
        result = final.result or {}
        trials.append(
            Trial(
                number,
                isolation,
                exit_code,
                charged,
                (claim.at - released.at).total_seconds(),
                (claim.at - exited).total_seconds(),
                final.attempt,
                int(result.get("gateway_replays", 0)),
            )
        )
        assert exit_code == 0, f"trial {number}: the stopped worker exited {exit_code}"

    assert charged_twice(suite.gateway_url) == []
    print(f"  {'trial':>5} {'isolation':<9} {'rc':>3} {'charged':>8} {'rel->claim':>10} "
          f"{'exit->claim':>11} {'attempts':>8} {'replays':>7}")  # fmt: skip
    for t in trials:
        print(
            f"  {t.number:5d} {t.isolation:<9} {t.exit_code:3d} {t.charged_at_stop:8d} "
            f"{t.release_to_claim_s:9.3f}s {t.exit_to_claim_s:10.3f}s {t.attempts:8d} "
            f"{t.replays:7d}"
        )
    waits = [t.release_to_claim_s for t in trials]
    after_exit = [t.exit_to_claim_s for t in trials]
    print(
        f"  non-zero exits: {sum(t.exit_code != 0 for t in trials)} of {len(trials)}; "
        f"released -> claimed: median {statistics.median(waits):.3f}s, max {max(waits):.3f}s; "
        f"exit -> claimed: median {statistics.median(after_exit):.3f}s, "
        f"max {max(after_exit):.3f}s; duplicate charges: 0"
    )
