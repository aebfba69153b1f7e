"""A slot that missed its deadline, as a person sees it in the console: a real suite
whose workflow-store noticed the breach, and Debian's chromium."""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Page, expect

from cronwave import Client
from cronwave_core.suite import Suite
from tests.helpers import eventually, fresh

pytestmark = pytest.mark.slow


def test_a_slot_past_its_deadline_shows_as_failed_deadline_with_its_reason(
    suite: Suite, client: Client, page: Page
) -> None:
    # Given a long billing-like slot with a 3 s deadline, whose worker is killed
    # while the run is in its body
    schedule_id = fresh("deadline")
    fire = (datetime.now(UTC) + timedelta(seconds=6)).replace(microsecond=0)
    client.create_schedule(
        schedule_id,
        one_off=[fire],
        job_type="cronwave.sleep",
        payload={"seconds": 600},
        deadline=timedelta(seconds=3),
    )

    def running() -> str:
        runs = client.list_runs(schedule_id)
        assert runs and runs[0].state == "RUNNING" and runs[0].started_at, runs
        return runs[0].run_id

    run_id = eventually(running, timeout=60, what="the run in its body")
    os.kill(suite.procs["worker"].pid, signal.SIGKILL)
    eventually(
        lambda: client.deadline_breaches(schedule_id), timeout=60, what="the breach recorded"
    )

    # When a person opens the schedules page
    page.goto(suite.console_url)
    # Then the slot is shown as a missed deadline, with the reason on hover
    cell = page.locator(f'a.slot[href="/runs/{run_id}"]')
    expect(cell).to_have_attribute("data-outcome", "failed-deadline")
    title = cell.get_attribute("title") or ""
    assert "deadline missed at" in title and "still_running" in title, title

    # and the schedule's page lists the breach in its deadline history
    page.goto(f"{suite.console_url}schedules/{schedule_id}")
    row = page.locator("#deadlines tr.breach")
    expect(row).to_have_count(1)
    expect(row).to_have_attribute("data-reason", "still_running")
    expect(row).to_contain_text(f"{fire:%Y-%m-%d %H:%M:%S}Z")
    expect(page.locator("tr.past").first).to_have_attribute("data-outcome", "failed-deadline")
