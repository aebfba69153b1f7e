"""Slots the planner did not run, and a billing run in progress, as the console shows
them: a planner on a manual clock (the schedules tests' harness) makes the MISSED
slots; the billing run is a real one, charging through the sandbox gateway."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Page, expect

from cronwave_core.suite import Suite
from tests.console.conftest import LEASE_ENV
from tests.harness.clients import client_for
from tests.harness.planner import SIMULATED_CALENDAR, ClockedPlanners, StartPlanner
from tests.harness.suites import SuiteFactory
from tests.helpers import eventually, fresh

pytestmark = pytest.mark.slow

T0 = datetime(2030, 1, 7, 0, 0, tzinfo=UTC)
SKIPPED = "not run: the planner was down at the fire time and the catch-up policy is skip"


@pytest.fixture
def plannerless(make_suite: SuiteFactory) -> Suite:
    """Store, leader-election, dispatcher, a worker and the console; no planner (the
    test's planners run on a simulated calendar)."""
    return make_suite(
        console=True, planners=0, env={**LEASE_ENV, **SIMULATED_CALENDAR}, test_hooks=True
    )


@pytest.fixture
def start_planner(plannerless: Suite) -> Iterator[StartPlanner]:
    planners = ClockedPlanners(plannerless, LEASE_ENV)
    yield planners.start
    planners.stop()


def test_slots_missed_while_the_planner_was_down_are_shown_missed_with_the_reason(
    plannerless: Suite, start_planner: StartPlanner, page: Page
) -> None:
    # Given a schedule every 10 minutes that skips the slots of an outage, fired by a
    # planner for its first slot, which then goes away for half an hour
    with client_for(plannerless) as client:
        schedule_id = fresh("console-missed")
        client.create_schedule(
            schedule_id,
            cron="*/10 * * * *",
            job_type="cronwave.noop",
            catchup="skip",
            catchup_window=timedelta(hours=1),
            start_at=T0,
        )
        first = start_planner(T0 - timedelta(minutes=1))
        first.knows(schedule_id)
        first.run_until(T0 + timedelta(minutes=5))
        first.settle()
        first.stop()
        # When another planner takes over and records the slots of the outage
        second = start_planner(T0 + timedelta(minutes=35))
        second.run_until(T0 + timedelta(minutes=35, seconds=30))
        second.settle()
        missed = [r for r in client.list_runs(schedule_id, limit=10) if r.state == "MISSED"]
        assert len(missed) == 3

    # Then the schedules page shows three missed slots, each with its reason on hover
    page.goto(plannerless.console_url)
    row = page.locator(f'tr[data-schedule="{schedule_id}"]')
    expect(row.locator(".slot.missed")).to_have_count(3)
    for cell in row.locator(".slot.missed").all():
        assert SKIPPED in (cell.get_attribute("title") or "")
    # And the schedule's calendar lists them as missed, the reason in words
    page.goto(f"{plannerless.console_url}schedules/{schedule_id}")
    rows = page.locator('#calendar tr.past[data-outcome="missed"]')
    expect(rows).to_have_count(3)
    expect(rows.first).to_contain_text("missed")
    expect(rows.first).to_contain_text(SKIPPED)
    # newest first
    expect(rows.first).to_contain_text("2030-01-07 00:30:00Z")
    expect(rows.last).to_contain_text("2030-01-07 00:10:00Z")


BILLING = {"customers": 60_000, "charge_batch": 20, "invoice_batch": 5_000}


@pytest.fixture
def billing(make_suite: SuiteFactory) -> Suite:
    """A suite with the billing demo's gateway and the console; heartbeats (which carry
    the checkpoints) every 0.2 s."""
    return make_suite(
        console=True,
        processes=("payment-gateway",),
        env={**LEASE_ENV, "CRONWAVE_BILLING_HEARTBEAT_TIMEOUT": "0.6"},
    )


def test_a_running_billing_runs_charged_count_rises_on_its_page(billing: Suite, page: Page) -> None:
    # Given a billing run charging its customers
    with client_for(billing) as client:
        schedule_id = fresh("console-billing")
        client.create_schedule(
            schedule_id, cron="0 2 * * *", job_type="billing.nightly", payload=BILLING
        )
        run = client.trigger(schedule_id)
        try:
            # When a person watches its page
            page.goto(f"{billing.console_url}runs/{run.run_id}")
            done = page.locator("#progress-done")

            def charging() -> int:
                expect(page.locator("#progress")).to_contain_text("customers charged")
                return int(done.inner_text().replace(",", ""))

            # Then the count of customers charged so far rises as the page refreshes itself
            first = eventually(charging, timeout=60, interval=0.1, what="charges begun")
            total = int(page.locator("#progress-total").inner_text().replace(",", ""))
            assert 0 < first < total
            eventually(lambda: charging() > first, timeout=60, interval=0.1, what="more charged")
        finally:
            client.cancel_run(run.run_id, grace=timedelta(0))
