"""Manual triggers and backfills have no deadline: on a whole suite of real processes,
runs of either kind that never succeed produce no breach, no count and no webhook
post, while the store's deadline sweep judges the very range they lie in."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from cronwave_core.suite import Suite
from tests.deadlines import webhooks
from tests.deadlines.support import BREACHES, NOTIFY_ENV, breaches_of, client, scrape
from tests.harness.suites import SuiteFactory, make_suite  # noqa: F401  (fixture)
from tests.helpers import eventually, fresh
from workflow_store.models import DeadlineCursor

DEADLINE = timedelta(seconds=5)
#: The backfill runs at least this many seconds' slots.
BACKFILLED = timedelta(seconds=2)
#: The sweep runs this often here (1 s by default), so the test waits less for it.
SWEEP_ENV = {**NOTIFY_ENV, "CRONWAVE_DEADLINE_SWEEP_INTERVAL": "200ms"}


@pytest.fixture
def hooks() -> Iterator[webhooks.Receiver]:
    with webhooks.receiver() as rec:
        yield rec


def judged_through(suite: Suite, schedule_id: str) -> datetime | None:
    """How far the store's deadline sweep has judged ``schedule_id``'s slots and runs."""
    assert suite.config.database_url
    engine = sa.create_engine(suite.config.database_url)
    try:
        with engine.connect() as conn:
            through = conn.execute(
                sa.select(DeadlineCursor.checked_through).where(
                    DeadlineCursor.schedule_id == schedule_id
                )
            ).scalar()
    finally:
        engine.dispose()
    if through is None:
        return None
    return through if through.tzinfo else through.replace(tzinfo=UTC)


def counted_any(suite: Suite, schedule_id: str) -> float:
    """The breaches of ``schedule_id`` the store counted, for any reason."""
    family = scrape(suite).get(BREACHES.removesuffix("_total"))
    if family is None:
        return 0.0
    return sum(
        s.value
        for s in family.samples
        if s.name == BREACHES and s.labels.get("schedule") == schedule_id
    )


def test_manual_and_backfill_runs_never_breach_a_deadline(
    make_suite: SuiteFactory,  # noqa: F811
    hooks: webhooks.Receiver,
) -> None:
    # Given a schedule with a 5 s deadline and a webhook that fires every second but
    # at most once (max_runs without start_at: the sweep judges its recorded runs,
    # every second), whose one scheduled run succeeded
    suite = make_suite(env=SWEEP_ENV)
    schedule_id = fresh("adhoc")
    with client(suite) as c:
        made = c.create_schedule(
            schedule_id,
            cron="* * * * * *",
            max_runs=1,
            overlap="allow_all",
            job_type="cronwave.noop",
            deadline=DEADLINE,
            notify=[hooks.url("/breach")],
        )

        def scheduled_run_succeeded() -> bool:
            runs = c.list_runs(schedule_id)
            assert len(runs) == 1 and runs[0].state == "SUCCEEDED", runs
            return True

        eventually(scheduled_run_succeeded, timeout=60, what="the scheduled run SUCCEEDED")

        # When no worker is left to run anything, a person triggers a run, and a
        # backfill runs the slots of the last few seconds: after the schedule's
        # creation (where the sweep's judging begins) and within the deadline (so
        # after the sweep's cursor; slots before either are never judged at all)
        suite.stop_proc(suite.procs["worker"])
        manual = c.trigger(schedule_id)
        assert made.updated_at is not None
        begin = made.updated_at.replace(microsecond=0) + timedelta(seconds=2)

        def slots_to_backfill() -> datetime | None:
            now = datetime.now(UTC).replace(microsecond=0)
            return now if now >= begin + BACKFILLED else None

        now = eventually(slots_to_backfill, timeout=10, what="slots after the creation")
        assert now is not None
        start = max(begin, now - DEADLINE + timedelta(seconds=2))
        backfilled = c.backfill(schedule_id, start, now)
        assert backfilled and min(backfilled) > made.updated_at, backfilled

        def recorded() -> list[str]:
            runs = c.list_runs(schedule_id)
            triggers = sorted(r.trigger for r in runs if r.state == "PENDING")
            assert triggers.count("BACKFILL") >= 1 and "MANUAL" in triggers, triggers
            return triggers

        eventually(recorded, timeout=30, what="the manual and backfill runs recorded")

        # Then once the sweep has judged past all of them and their deadlines, none of
        # them breached: no breach recorded, none counted, no webhook posted
        last = max(manual.fire_time, *backfilled)

        def judged() -> bool:
            through = judged_through(suite, schedule_id)
            assert through is not None and through > last, (through, last)
            return True

        eventually(judged, timeout=60, interval=0.2, what="the sweep past the runs")
        assert breaches_of(c, schedule_id) == []
    assert counted_any(suite, schedule_id) == 0
    assert hooks.posts() == []
