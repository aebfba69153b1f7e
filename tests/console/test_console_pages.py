"""What a person sees in the console, in a real browser, against a real suite."""

from __future__ import annotations

import urllib.request
from datetime import UTC, datetime, time, timedelta

import pytest
from playwright.sync_api import Page, expect

from console.calendar_view import dst_days
from cronwave import Client, ScheduleNotFound, Unavailable
from cronwave_core.domain.calendar import next_fire_time
from cronwave_core.domain.spec import DstGap, Interval, Spec
from cronwave_core.suite import Suite
from tests.console.conftest import JAEGER_URL, Key, sign_in
from tests.harness.clients import backfill_last_slot
from tests.helpers import eventually, fresh

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def suite(shared_console_suite: Suite) -> Suite:
    """One console suite for this module: its tests change only what they made."""
    return shared_console_suite


def nightly(client: Client) -> str:
    schedule_id = fresh("console")
    client.create_schedule(
        schedule_id, cron="0 2 * * *", time_zone="Europe/Berlin", job_type="cronwave.noop"
    )
    return schedule_id


def test_an_unknown_schedule_or_run_is_a_404_page(suite: Suite, page: Page) -> None:
    # Given a running console
    for path, what in (("schedules/no-such-schedule", "schedule"), ("runs/run_nosuch", "run")):
        # When a person opens a schedule or run that does not exist
        response = page.goto(suite.console_url + path)
        # Then they see the 404 page naming it, and nothing of the console's insides
        assert response is not None and response.status == 404
        expect(page.locator("h1")).to_have_text("Not found")
        expect(page.locator(".error-message")).to_contain_text(f"There is no {what}")
        assert "Traceback" not in page.content()


def test_pause_and_resume_from_the_console_change_the_schedule(
    suite: Suite, client: Client, page: Page, operator: Key
) -> None:
    # Given a schedule, and its page in the console, an operator signed in
    schedule_id = nightly(client)
    sign_in(page, suite.console_url, operator.token)
    page.goto(f"{suite.console_url}schedules/{schedule_id}")
    expect(page.locator("#schedule-state")).to_have_text("active")

    # When the operator pauses it with a note
    page.get_by_placeholder("note (optional)").fill("audit week")
    page.get_by_role("button", name="Pause").click()

    # Then the page says paused, and so does the store
    expect(page.locator("#schedule-state")).to_have_text("paused")
    stored = client.get_schedule(schedule_id)
    assert (stored.paused, stored.pause_note) == (True, "audit week")

    # And resuming it from the console makes it active again
    page.get_by_role("button", name="Resume").click()
    expect(page.locator("#schedule-state")).to_have_text("active")
    assert client.get_schedule(schedule_id).paused is False

    # And the schedule's audit trail names the operator for both, the pause's note too
    page.reload()
    rows = page.locator("#audit tr.audit")
    expect(rows.first).to_have_attribute("data-rpc", "ResumeSchedule")
    expect(rows.nth(1)).to_have_attribute("data-rpc", "PauseSchedule")
    for i in (0, 1):
        expect(rows.nth(i).locator(".actor")).to_have_text(f"user:{operator.name}")
    expect(rows.nth(1)).to_contain_text("audit week")

    # And the console's metrics count the two changes
    metrics = suite.procs["console"].metrics_address
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    assert 'cronwave_console_requests_total{page="pause",status="303"} 1.0' in text
    assert 'cronwave_console_requests_total{page="resume",status="303"} 1.0' in text


def test_a_change_without_the_pages_token_is_refused(
    suite: Suite, client: Client, page: Page
) -> None:
    # Given a schedule and a browser that holds the console's cookie
    schedule_id = nightly(client)
    page.goto(suite.console_url)
    # When something posts a pause without the page's CSRF token
    response = page.request.post(
        f"{suite.console_url}schedules/{schedule_id}/pause", form={"note": "forged"}
    )
    # Then it is refused with the 403 page, and the schedule is unchanged
    assert response.status == 403
    assert "Form expired" in response.text()
    assert client.get_schedule(schedule_id).paused is False


def test_a_triggered_run_shows_its_events_and_its_waterfall(
    suite: Suite, client: Client, page: Page, operator: Key
) -> None:
    # Given a schedule, and an operator signed in to the console
    schedule_id = nightly(client)
    sign_in(page, suite.console_url, operator.token)
    page.goto(f"{suite.console_url}schedules/{schedule_id}")

    # When the operator triggers it from the console
    page.get_by_role("button", name="Trigger now").click()

    # Then they land on the run's page, which follows the run until it succeeded
    expect(page.locator("h1")).to_contain_text("Run run_")
    expect(page.locator("#run-state")).to_have_text("SUCCEEDED")
    expect(page.locator("#events")).to_contain_text("succeeded")
    expect(page.locator("#attempts tbody tr")).to_have_count(1)
    run_id = page.locator("h1").inner_text().removeprefix("Run ").strip()
    run = client.get_run(run_id)
    assert run.state == "SUCCEEDED"
    # And it links the run's trace in the Jaeger the console was given
    expect(page.locator("#jaeger")).to_have_attribute("href", f"{JAEGER_URL}/trace/{run.trace_id}")

    # And once the run's spans are written, its page draws its waterfall by hop
    def drawn() -> bool:
        page.reload()
        return page.locator(".waterfall svg").count() == 1

    eventually(drawn, timeout=30, interval=0.5, what="the run's waterfall")
    expect(page.locator(".waterfall")).to_contain_text("execute")
    # the run's own hops, where each began and ended: no percentiles of one sample
    expect(page.locator('.waterfall tr.hop[data-hop="execute"]')).to_have_count(1)
    expect(page.locator(".waterfall")).not_to_contain_text("p99")
    expect(page.locator(".waterfall")).not_to_contain_text("not enough")

    # And the waterfall across runs, for manual triggers, covers it
    page.goto(f"{suite.console_url}waterfall?trigger=manual&schedule_id={schedule_id}")
    expect(page.locator("#chart-count")).to_have_text("1 runs")
    expect(page.locator("#chart .headline")).to_contain_text("p99")


def test_the_schedules_page_lists_state_job_type_and_next_fire(
    suite: Suite, client: Client, page: Page
) -> None:
    # Given a schedule that ran once: a slot of it (last night's, backfilled)
    schedule_id = nightly(client)
    night = backfill_last_slot(client, schedule_id).fire_time
    # When a person opens the console
    page.goto(suite.console_url)
    row = page.locator(f'tr[data-schedule="{schedule_id}"]')
    # Then the schedule's row shows its state, job type, last slot and next fire in
    # UTC and in its zone, and one slot that ran (late: a backfill runs after its slot)
    expect(row).to_contain_text("active")
    expect(row).to_contain_text("cronwave.noop")
    expect(row).to_contain_text("SUCCEEDED")
    upcoming = next_fire_time(client.get_schedule(schedule_id).spec, datetime.now(UTC))
    assert upcoming is not None
    expect(row).to_contain_text(f"{upcoming:%Y-%m-%d %H:%M:%S}Z")
    expect(row).to_contain_text("(Europe/Berlin)")
    expect(row.locator(".slot")).to_have_count(1)
    expect(row.locator(".slot.late")).to_have_count(1)
    title = row.locator(".slot.late").get_attribute("title") or ""
    assert f"{night:%Y-%m-%d %H:%M:%S}Z late: succeeded" in title, title


def test_a_manual_run_is_shown_as_manual_and_never_as_a_slot(
    suite: Suite, client: Client, page: Page
) -> None:
    # Given a schedule whose only run is a manual trigger that succeeded (the demo's)
    schedule_id = nightly(client)
    manual = client.wait_run(client.trigger(schedule_id).run_id, timeout=timedelta(seconds=30))
    assert manual.state == "SUCCEEDED"
    # When a person opens the console
    page.goto(suite.console_url)
    row = page.locator(f'tr[data-schedule="{schedule_id}"]')
    # Then its strip marks the run as manual, not as a slot that ran
    cell = row.locator(f'a.slot[href="/runs/{manual.run_id}"]')
    expect(cell).to_have_attribute("data-outcome", "manual")
    expect(row.locator(".slot.ran")).to_have_count(0)
    title = cell.get_attribute("title") or ""
    assert "manual" in title and "ran:" not in title, title
    # and the row has no last slot: no SUCCEEDED
    expect(row.locator(".no-slot")).to_have_text("no slot yet")
    expect(row).not_to_contain_text("SUCCEEDED")

    # When a slot of it ran too (last night's, backfilled: older than the manual run)
    backfill_last_slot(client, schedule_id)
    page.reload()
    # Then the strip shows the slot (ran late, as a backfill does) and the manual run,
    # and the row's last slot is the slot
    expect(row.locator(".slot.late")).to_have_count(1)
    expect(row.locator(".slot.manual")).to_have_count(1)
    expect(row.locator(".no-slot")).to_have_count(0)
    expect(row).to_contain_text("SUCCEEDED")
    # and the schedule's calendar lists the manual run as manual
    page.goto(f"{suite.console_url}schedules/{schedule_id}")
    expect(page.locator('#calendar tr.past[data-outcome="manual"]')).to_have_count(1)
    expect(page.locator('#calendar tr.past[data-outcome="late"]')).to_have_count(1)


def test_a_schedules_calendar_marks_its_dst_days_with_the_policy_applied(
    suite: Suite, client: Client, page: Page
) -> None:
    # Given a 02:30 Berlin schedule whose slot in the spring-forward gap is skipped,
    # starting the day before the next spring-forward day
    schedule_id = fresh("console-dst")
    spec = Spec(cron=("30 2 * * *",), time_zone="Europe/Berlin", dst_gap=DstGap.SKIP)
    spring_day = next(
        d.day for d in dst_days(spec, datetime.now(UTC)) if d.change == "spring forward"
    )
    client.create_schedule(
        schedule_id,
        cron="30 2 * * *",
        time_zone="Europe/Berlin",
        dst_gap="skip",
        dst_repeat="twice",
        job_type="cronwave.noop",
        start_at=datetime.combine(spring_day - timedelta(days=1), time(0), UTC),
    )
    # When a person opens its page
    page.goto(f"{suite.console_url}schedules/{schedule_id}")
    # Then the next spring-forward day says the 02:30 slot does not exist and is
    # recorded missed, and the next fall-back day shows both 02:30s
    spring = page.locator(".dst", has_text="spring forward")
    expect(spring).to_contain_text("dst_gap=skip")
    expect(spring).to_contain_text("02:30:00 does not exist that day")
    expect(spring).to_contain_text("recorded as missed")
    autumn = page.locator(".dst", has_text="fall back")
    expect(autumn).to_contain_text("dst_repeat=twice")
    expect(autumn.locator("li")).to_have_count(2)
    expect(autumn).to_contain_text("02:30:00 CEST")
    expect(autumn).to_contain_text("02:30:00 CET")
    # And in the calendar, that day's slot is marked: it will be missed, on a DST day
    marked = page.locator("#calendar tr.upcoming", has_text="DST day")
    expect(marked).to_have_count(1)
    expect(marked).to_contain_text(f"{spring_day} 02:30:00 (no such time)")
    expect(marked).to_contain_text("will be missed")
    expect(marked).to_contain_text("spring forward, dst_gap=skip")


def test_a_running_jobs_own_progress_rises_on_its_page(
    suite: Suite, client: Client, page: Page
) -> None:
    # Given a run of a job that reports its progress (cronwave.sleep: seconds slept)
    schedule_id = fresh("console-progress")
    client.create_schedule(
        schedule_id, cron="0 2 * * *", job_type="cronwave.sleep", payload={"seconds": 30}
    )
    run = client.trigger(schedule_id)
    try:
        # When a person watches its page
        page.goto(f"{suite.console_url}runs/{run.run_id}")

        # Then it shows the job's own count and total, with their unit and a bar
        expect(page.locator("#progress-unit")).to_have_text("seconds slept")
        expect(page.locator("#progress-total")).to_have_text("30")
        expect(page.locator("#progress progress")).to_have_attribute("max", "30")
        first = int(page.locator("#progress-done").inner_text())
        # and the count rises as the page refreshes itself
        eventually(
            lambda: int(page.locator("#progress-done").inner_text()) > first,
            timeout=20,
            interval=0.2,
            what="more seconds slept",
        )
        # and the SDK reads the same progress back
        reported = client.get_run(run.run_id).progress
        assert reported is not None and reported.unit == "seconds slept"
        assert reported.total == 30 and reported.at is not None
    finally:
        client.cancel_run(run.run_id, grace=timedelta(0))


def test_a_one_second_schedules_calendar_is_newest_first_in_one_utc_column_and_fits(
    suite: Suite, client: Client, page: Page
) -> None:
    # Given a UTC schedule firing every second, with a hundred slots past (backfilled)
    schedule_id = fresh("console-1s")
    now = datetime.now(UTC).replace(microsecond=0)
    client.create_schedule(
        schedule_id,
        intervals=[Interval(timedelta(seconds=1))],
        job_type="cronwave.noop",
        start_at=now - timedelta(minutes=3),
    )
    try:

        def loaded() -> list[datetime]:
            try:
                return client.backfill(schedule_id, now - timedelta(seconds=110), now, dry_run=True)
            except (ScheduleNotFound, Unavailable) as exc:  # the planner has not loaded it
                raise AssertionError(str(exc)) from exc

        eventually(loaded, what="the planner loaded the schedule")
        client.backfill(schedule_id, now - timedelta(seconds=110), now, rate_per_second=100)
        eventually(
            lambda: len(client.list_runs(schedule_id, limit=200)) >= 100,
            what="a hundred slots recorded",
        )

        # When a person opens its page
        page.goto(f"{suite.console_url}schedules/{schedule_id}")

        # Then its strip of past slots wraps inside the page: nothing runs off its side
        expect(page.locator(".strip .slot")).to_have_count(100)
        assert page.evaluate(
            "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        )
        # and its calendar has one column of slot times (UTC is its zone)
        expect(page.locator("#calendar thead th")).to_have_count(3)
        expect(page.locator("#calendar thead")).to_contain_text("slot (UTC)")
        # and lists the slots newest first: those to come, now, then those past
        rows = page.locator("#calendar tbody tr")
        classes = [rows.nth(i).get_attribute("class") for i in range(rows.count())]
        assert classes.index("now") == 20, classes
        assert set(classes[:20]) == {"upcoming"} and set(classes[21:]) == {"past"}
        times = rows.evaluate_all("rows => rows.map(r => r.dataset.at).filter(Boolean)")
        parsed = [datetime.fromisoformat(t) for t in times]
        assert parsed == sorted(parsed, reverse=True)
        assert len(parsed) == 120
    finally:
        client.delete_schedule(schedule_id, force=True)


def test_the_audit_trail_reads_in_words_with_the_values_an_update_changed(
    suite: Suite, client: Client, page: Page
) -> None:
    # Given a schedule created, then updated: its overlap policy and its payload
    schedule_id = nightly(client)
    client.update_schedule(schedule_id, overlap="allow_all", payload={"customers": 12})

    # When a person opens its page
    page.goto(f"{suite.console_url}schedules/{schedule_id}")

    # Then the update says what it did and each value it changed, old and new, in words
    update = page.locator('#audit tr.audit[data-rpc="UpdateSchedule"]')
    expect(update.locator(".what")).to_have_text("updated")
    expect(update.locator('.change[data-field="overlap"]')).to_have_text(
        "overlap: skip → allow_all"
    )
    expect(update.locator('.change[data-field="payload"]')).to_have_text("payload: 2 → 17 bytes")
    # and the creation the values it was given, as they are written, never "None →"
    create = page.locator('#audit tr.audit[data-rpc="CreateSchedule"]')
    expect(create.locator(".what")).to_have_text("created")
    expect(create.locator('.change[data-field="overlap"]')).to_have_text("overlap: skip")
    expect(create.locator('.change[data-field="time zone"]')).to_have_text(
        "time zone: Europe/Berlin"
    )
    trail = page.locator("#audit").inner_text()
    assert "None" not in trail and "POLICY_" not in trail and "spec." not in trail, trail


def test_every_page_has_the_consoles_icon(suite: Suite, page: Page) -> None:
    # Given the console's front page, as a browser loads it
    page.goto(suite.console_url)

    # Then it names an icon, and the icon is there, and so is the one browsers look for
    href = page.locator('link[rel="icon"]').get_attribute("href")
    assert href == "/static/favicon.svg"
    for path in (href.lstrip("/"), "favicon.ico"):
        response = page.request.get(suite.console_url + path)
        assert response.status == 200, path
        assert response.headers["content-type"].startswith("image/svg+xml"), path
        assert b"<svg" in response.body()
