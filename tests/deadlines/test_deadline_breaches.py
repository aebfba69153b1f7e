"""Deadlines per schedule on whole suites of real processes: the workflow-store's sweep
notices a slot that has not SUCCEEDED by its deadline, even with the worker killed or
no planner at all, records it once, counts it, POSTs it to the schedule's webhooks (a
loopback server of the test's own) and makes ``cronwave status`` fail."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

import cronwave
from tests.deadlines import webhooks
from tests.deadlines.support import (
    NOTIFY_ENV,
    breaches_of,
    client,
    counted,
    counted_in,
    cronwave_cli,
    soon,
    status_json,
    wait_breach,
)
from tests.harness.suites import SuiteFactory, make_suite  # noqa: F401  (fixture)
from tests.helpers import eventually, fresh


@pytest.fixture
def hooks() -> Iterator[webhooks.Receiver]:
    with webhooks.receiver() as rec:
        yield rec


def test_a_killed_worker_breaches_the_deadline_and_the_store_says_so_everywhere(
    make_suite: SuiteFactory,  # noqa: F811
    hooks: webhooks.Receiver,
) -> None:
    # Given a whole suite and a billing-like slot (a long job) with a 20 s deadline
    # and a webhook
    suite = make_suite(env=NOTIFY_ENV)
    schedule_id = fresh("billing")
    with client(suite) as c:
        c.create_schedule(
            schedule_id,
            one_off=[soon(8)],
            job_type="cronwave.sleep",
            payload={"seconds": 600},
            deadline=timedelta(seconds=20),
            notify=[hooks.url("/breach")],
        )

        # When the worker is killed (kill -9) while the run is in its body
        def running() -> str:
            runs = c.list_runs(schedule_id)
            assert len(runs) == 1, "not recorded yet"
            run = runs[0]
            assert run.state == "RUNNING" and run.started_at is not None, run.state
            return run.run_id

        run_id = eventually(running, timeout=60, what="the run in its body")
        os.kill(suite.procs["worker"].pid, signal.SIGKILL)

        # Then the store records the breach once the deadline has passed: still running
        breach = wait_breach(c, schedule_id, timeout=90)
        assert breach.reason == "still_running"
        assert breach.run_id == run_id
        assert breach.run_state == "RUNNING"
        assert breach.deadline_at - breach.fire_time == timedelta(seconds=20)
        assert breach.detected_at >= breach.deadline_at
        print(f"\nbreach recorded {breach.detected_at - breach.deadline_at} after the deadline")
        # and the webhook receives it, with its reason
        post = eventually(lambda: hooks.posts("/breach"), timeout=30, what="the webhook's POST")[0]
        assert post.content_type == "application/json"
        assert post.body["event"] == "cronwave.deadline_breached"
        assert post.body["schedule_id"] == schedule_id
        assert post.body["reason"] == "still_running"
        assert post.body["run_id"] == run_id
        assert post.body["deadline_seconds"] == 20
        # and the delivery is recorded delivered at the first attempt
        (delivery,) = eventually(
            lambda: [d for d in breaches_of(c, schedule_id)[0].deliveries if d.status != "pending"],
            what="the delivery's outcome",
        )
        assert (delivery.status, delivery.attempts, delivery.http_status) == ("delivered", 1, 200)
        # and the run's history says so
        events = c.run_events(run_id)
        assert [e.kind for e in events].count("deadline_breached") == 1
        # and the store's metric counts it once
        assert counted(suite, schedule_id, "still_running") == 1
        # and the health check fails, naming the breach
        code, statuses = status_json(suite, "--schedule", schedule_id)
        assert code == 3
        (status,) = statuses
        assert status["deadline_state"] == "breached"
        assert status["last_breach"]["reason"] == "still_running"
        assert status["last_slot"]["state"] == "RUNNING"
        table = cronwave_cli(suite, "status")
        assert table.returncode == 3
        assert "breached: still_running" in table.stdout
        # and a breach is recorded once: later sweeps add nothing
        assert len(breaches_of(c, schedule_id)) == 1
        assert len(hooks.posts("/breach")) == 1


def test_a_slot_that_succeeds_in_time_is_no_breach(
    make_suite: SuiteFactory,  # noqa: F811
    hooks: webhooks.Receiver,
) -> None:
    # Given two schedules with the same slot and deadline: one that succeeds, and a
    # witness that fails (its breach says the sweep judged that slot)
    suite = make_suite(env=NOTIFY_ENV)
    ok, witness = fresh("ok"), fresh("witness")
    slot = soon(8)
    with client(suite) as c:
        for schedule_id, job_type in ((ok, "cronwave.noop"), (witness, "cronwave.fail")):
            c.create_schedule(
                schedule_id,
                one_off=[slot],
                job_type=job_type,
                deadline=timedelta(seconds=10),
                notify=[hooks.url(f"/{schedule_id}")],
            )

        # When both slots have come and their deadline has passed
        failed = wait_breach(c, witness, timeout=90)

        # Then the failed one breached (failed), and the one that succeeded did not
        assert failed.reason == "failed"
        assert failed.fire_time == slot
        (run,) = c.list_runs(ok)
        assert run.state == "SUCCEEDED"
        assert breaches_of(c, ok) == []
        assert hooks.posts(f"/{ok}") == []
        assert counted(suite, ok, "failed") == 0
        assert counted(suite, witness, "failed") == 1
        # and the health check of the good one passes, on time
        code, (status,) = status_json(suite, "--schedule", ok)
        assert code == 0
        assert status["deadline_state"] == "ok"
        assert status["last_slot"]["state"] == "SUCCEEDED"
        assert status["last_slot"]["on_time"] is True
        assert status_json(suite, "--schedule", witness)[0] == 3


def test_a_slot_nobody_started_breaches_as_not_started_even_without_a_planner(
    make_suite: SuiteFactory,  # noqa: F811
    hooks: webhooks.Receiver,
) -> None:
    # Given a suite with no planner at all (the slot is never recorded) and a
    # schedule whose webhook is Slack's
    suite = make_suite(planners=0, env=NOTIFY_ENV)
    schedule_id = fresh("nightly")
    with client(suite) as c:
        c.create_schedule(
            schedule_id,
            one_off=[soon(3)],
            job_type="cronwave.noop",
            deadline=timedelta(seconds=2),
            notify=[hooks.url("/slack")],
            notify_format="slack",
        )

        # When its deadline passes
        breach = wait_breach(c, schedule_id, timeout=60)

        # Then the breach is not_started, with no run, and Slack gets its text
        assert breach.reason == "not_started"
        assert breach.run_id == ""
        assert "no run recorded" in breach.cause
        post = eventually(lambda: hooks.posts("/slack"), what="the Slack POST")[0]
        assert set(post.body) == {"text"}
        assert schedule_id in post.body["text"] and "not_started" in post.body["text"]
        assert counted(suite, schedule_id, "not_started") == 1
        assert c.list_runs(schedule_id) == []
        code, (status,) = status_json(suite)
        assert code == 3
        assert status["last_slot"] is None and status["deadline_state"] == "breached"


def test_a_failing_webhook_is_retried_then_recorded_failed_and_blocks_nothing(
    make_suite: SuiteFactory,  # noqa: F811
    hooks: webhooks.Receiver,
) -> None:
    # Given a schedule whose webhooks answer 500, hold their answer past the timeout,
    # and answer 200
    suite = make_suite(planners=0, env=NOTIFY_ENV)
    schedule_id = fresh("hooks")
    urls = [hooks.url("/500", 500), hooks.url("/slow", "hold"), hooks.url("/ok")]
    with client(suite) as c:
        c.create_schedule(
            schedule_id,
            one_off=[soon(2)],
            job_type="cronwave.noop",
            deadline=timedelta(seconds=1),
            notify=urls,
        )
        # and a second schedule due a little later
        later = fresh("later")
        c.create_schedule(
            later, one_off=[soon(4)], job_type="cronwave.noop", deadline=timedelta(seconds=1)
        )

        # When the breaches are sent
        wait_breach(c, schedule_id, timeout=60)

        def settled() -> dict[str, object]:
            deliveries = breaches_of(c, schedule_id)[0].deliveries
            assert all(d.status != "pending" for d in deliveries), deliveries
            return {d.url.rsplit("/", 1)[1]: d for d in deliveries}

        by_path = eventually(settled, timeout=60, what="every delivery settled")

        # Then the 500 was tried three times (the attempts setting) and recorded failed
        failed = by_path["500"]
        assert (failed.status, failed.attempts, failed.http_status) == ("failed", 3, 500)
        assert failed.error == "HTTP 500"
        assert len(hooks.posts("/500")) == 3
        # and the held one timed out each time and is recorded failed, naming the timeout
        slow = by_path["slow"]
        assert (slow.status, slow.attempts, slow.http_status) == ("failed", 3, 0)
        assert slow.error == "timed out after 1s"
        # and the good one was delivered once
        assert (by_path["ok"].status, by_path["ok"].attempts) == ("delivered", 1)
        assert len(hooks.posts("/ok")) == 1
        # and the sweep went on meanwhile: the later schedule's breach is recorded too
        assert wait_breach(c, later).reason == "not_started"


@pytest.mark.both_backends
def test_two_store_replicas_record_count_and_send_each_breach_once(
    make_suite: SuiteFactory,  # noqa: F811
    hooks: webhooks.Receiver,
) -> None:
    # Given two workflow-store replicas on one database, both sweeping, and no planner
    suite = make_suite(planners=0, env=NOTIFY_ENV)
    suite.start_service("workflow-store", index=1)
    schedule_id = fresh("pulse")
    with client(suite) as c:
        # and a schedule with a slot every second, none of which anybody starts
        created = c.create_schedule(
            schedule_id,
            intervals=[cronwave.Interval(timedelta(seconds=1))],
            job_type="cronwave.noop",
            deadline=timedelta(seconds=1),
            notify=[hooks.url("/once")],
        )
        eventually(lambda: len(breaches_of(c, schedule_id)) >= 5, timeout=60, what="5 breaches")
        paused = c.pause_schedule(schedule_id, note="enough")
        assert created.updated_at is not None and paused.updated_at is not None

        # When every slot before the pause has been judged
        first = int(created.updated_at.timestamp()) + 1
        slots = list(range(first, int(paused.updated_at.timestamp()) + 1))
        if paused.updated_at.timestamp() == slots[-1]:
            slots.pop()  # a slot at the pause instant itself is not before it

        def all_judged() -> list[cronwave.DeadlineBreach]:
            found = c.deadline_breaches(schedule_id, limit=1000)
            assert len(found) >= len(slots), f"{len(found)} of {len(slots)}"
            return found

        breaches = eventually(all_judged, timeout=60, what="a breach per slot")

        # Then each slot breached exactly once, as not_started
        assert sorted(int(b.fire_time.timestamp()) for b in breaches) == slots
        assert {b.reason for b in breaches} == {"not_started"}
        # and the replicas' counters add up to one count per breach
        total = sum(
            counted_in(suite, name, schedule_id) for name in ("workflow-store", "workflow-store-1")
        )
        assert total == len(slots)
        # and the webhook got each breach once
        posts = eventually(
            lambda: (p := hooks.posts("/once")) and len(p) >= len(slots) and p,
            what="a POST per breach",
        )
        assert sorted(p.body["breach_id"] for p in posts) == sorted(b.breach_id for b in breaches)


def test_a_deadline_that_passed_while_the_store_was_down_is_caught_up(
    make_suite: SuiteFactory,  # noqa: F811
    hooks: webhooks.Receiver,
) -> None:
    # Given a slot with a short deadline, no planner, and the store stopped before it
    suite = make_suite(planners=0, env=NOTIFY_ENV)
    schedule_id = fresh("outage")
    with client(suite) as c:
        created = c.create_schedule(
            schedule_id,
            one_off=[soon(3)],
            job_type="cronwave.noop",
            deadline=timedelta(seconds=1),
            notify=[hooks.url("/late")],
        )
    slot = created.one_off[0]
    suite.stop_proc(suite.procs["workflow-store"])

    # When its deadline passes while the store is down, and the store comes back
    eventually(
        lambda: datetime.now(UTC) > slot + timedelta(seconds=2),
        timeout=30,
        interval=0.2,
        what="the deadline passed",
    )
    suite.restart("workflow-store")

    # Then the restarted store records the breach it could not see, and sends it
    with client(suite) as c:
        breach = wait_breach(c, schedule_id)
    assert breach.reason == "not_started"
    assert breach.fire_time == slot
    assert breach.detected_at > breach.deadline_at + timedelta(seconds=1)
    post = eventually(lambda: hooks.posts("/late"), what="the POST")[0]
    assert post.body["breach_id"] == breach.breach_id
