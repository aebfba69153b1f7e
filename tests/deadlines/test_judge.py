"""What a breach is: the table of ``cronwave_core.domain.deadlines.judge``, and the
rules of a deadline and a notifier URL (pure, no processes)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronwave_core.domain.deadlines import (
    BreachReason,
    Notifier,
    NotifyFormat,
    SlotRun,
    deadline_value,
    judge,
    notifier_url,
)
from cronwave_core.domain.runs import RunState
from cronwave_core.errors import InvalidArgument
from cronwave_core.settings import DeadlineSettings

FIRE = datetime(2030, 1, 1, 2, tzinfo=UTC)
DUE = FIRE + timedelta(minutes=45)


def run(state: RunState, **fields: object) -> SlotRun:
    return SlotRun(run_id="r1", state=state, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("slot", "reason", "cause"),
    [
        (None, BreachReason.NOT_STARTED, "no run recorded (planner down or no leader)"),
        (run(RunState.SUCCEEDED, finished_at=DUE), None, None),
        (run(RunState.SUCCEEDED, finished_at=DUE + timedelta(seconds=1)),
         BreachReason.SUCCEEDED_LATE, "finished at 2030-01-01T02:45:01Z"),
        (run(RunState.FAILED, error="card declined"), BreachReason.FAILED, "card declined"),
        (run(RunState.TIMED_OUT, error="limit"), BreachReason.TIMED_OUT, "limit"),
        (run(RunState.CANCELLED, error="by hand"), BreachReason.CANCELLED, "by hand"),
        (run(RunState.DEAD_LETTERED, error="x"), BreachReason.DEAD_LETTERED, "x"),
        (run(RunState.RUNNING, started_at=FIRE), BreachReason.STILL_RUNNING,
         "started at 2030-01-01T02:00:00Z"),
        (run(RunState.RUNNING), BreachReason.STILL_RUNNING, "claimed, the job body has not begun"),
        (run(RunState.WAITING, claimed_at=FIRE - timedelta(seconds=5), attempt=1),
         BreachReason.NOT_STARTED, "waiting: claimed at 2030-01-01T01:59:55Z, not begun"),
        (run(RunState.WAITING, attempt=3, error="boom"), BreachReason.FAILED,
         "attempt 2 failed: boom"),
        (run(RunState.PENDING), BreachReason.NOT_STARTED, "pending: never claimed"),
        (run(RunState.PENDING, attempt=2, error="boom"), BreachReason.FAILED,
         "attempt 2 failed: boom"),
        (run(RunState.PENDING, attempt=1), BreachReason.NOT_STARTED,
         "pending: handed back, not running"),
        (run(RunState.MISSED, error="overlap_skip"), BreachReason.MISSED, "overlap_skip"),
        (run(RunState.MISSED, error="outside_catchup_window"), BreachReason.MISSED,
         "outside_catchup_window"),
        (run(RunState.MISSED, error="pending:catchup"), BreachReason.NOT_STARTED,
         "pending:catchup"),
        (run(RunState.MISSED, error="paused"), None, None),
        (run(RunState.MISSED, error="dst_gap_skip"), None, None),
    ],
)  # fmt: skip
def test_a_slot_is_judged_by_what_the_store_holds_at_its_deadline(
    slot: SlotRun | None, reason: BreachReason | None, cause: str | None
) -> None:
    verdict = judge(slot, DUE)
    if reason is None:
        assert verdict is None
    else:
        assert verdict is not None
        assert (verdict.reason, verdict.cause) == (reason, cause)


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        (timedelta(0), "policy.deadline: must be a positive duration, got 0s"),
        (timedelta(seconds=-1), "policy.deadline: must be a positive duration, got -1s"),
        (timedelta(days=32), "policy.deadline: must be at most 31 days"),
    ],
)
def test_a_deadline_is_a_positive_duration(value: timedelta, rule: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        deadline_value(value)
    assert str(refused.value) == rule
    assert deadline_value(timedelta(minutes=45)) == timedelta(minutes=45)


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("", "required: an http:// or https:// URL"),
        (
            "ftp://hooks.example/x",
            "must be an http:// or https:// URL, got 'ftp://hooks.example/x'",
        ),
        ("hooks.example/x", "must be an http:// or https:// URL"),
        ("https:///path", "has no host"),
        ("https://hooks.example:99999/", "is not a valid URL"),
        ("https://hooks.example/a b", "must not contain spaces or control characters"),
        ("https://" + "a" * 2000, "must be at most 2000 characters"),
    ],
)
def test_a_notifier_url_is_http_or_https_with_a_host(url: str, rule: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        notifier_url(url, "notify[0]")
    assert refused.value.field == "notify[0]"
    assert rule in refused.value.rule
    assert Notifier("https://hooks.slack.com/services/T/B/X", NotifyFormat.SLACK).url


def test_the_global_notifiers_are_checked_at_start_up() -> None:
    settings = DeadlineSettings.from_env(
        {
            "CRONWAVE_NOTIFY_URLS": "https://a.example/x, http://b.example",
            "CRONWAVE_NOTIFY_FORMAT": "slack",
        }
    )
    assert settings.notify_urls == ("https://a.example/x", "http://b.example")
    assert settings.sweep_interval == timedelta(seconds=1)
    for env, variable in (
        ({"CRONWAVE_NOTIFY_URLS": "ftp://a.example"}, "CRONWAVE_NOTIFY_URLS"),
        ({"CRONWAVE_NOTIFY_FORMAT": "xml"}, "CRONWAVE_NOTIFY_FORMAT"),
        ({"CRONWAVE_NOTIFY_ATTEMPTS": "0"}, "CRONWAVE_NOTIFY_ATTEMPTS"),
        ({"CRONWAVE_NOTIFY_TIMEOUT": "0s"}, "CRONWAVE_NOTIFY_TIMEOUT"),
        ({"CRONWAVE_DEADLINE_SWEEP_INTERVAL": "5m"}, "CRONWAVE_DEADLINE_SWEEP_INTERVAL"),
    ):
        with pytest.raises(Exception, match=variable):
            DeadlineSettings.from_env(env)
