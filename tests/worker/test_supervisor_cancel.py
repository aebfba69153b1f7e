"""A cancel as an attempt's supervisor meets it: the store's answer to a beat sets the
attempt's ``CancelSignal``; the job sees ``ctx.cancelled``, a body that does not return
is stopped at the grace, and either way the attempt is CANCELLED without its result.
While a body runs, its start is reported once; a body that ended first is not."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwave import JobContext
from tests.harness.beats import Beats
from worker.cancellation import CancelSignal
from worker.supervisor import BeatResult, Outcome, Supervisor


class CancellingBeats(Beats):
    """Beats answered OK; from the ``after``-th on, the answer also carries a cancel
    with ``grace`` (as the store's heartbeat answer does)."""

    def __init__(self, cancel: CancelSignal, grace: timedelta, after: int = 1) -> None:
        super().__init__()
        self.cancel, self.grace, self.after = cancel, grace, after

    def __call__(self, checkpoint: Any) -> BeatResult:
        answer = super().__call__(checkpoint)
        if len(self.times) >= self.after:
            self.cancel.request(self.grace, "operator")
        return answer


def ctx_for(supervisor: Supervisor) -> JobContext:
    return JobContext(
        run_id="run-1",
        schedule_id="s",
        fire_time=datetime.now(UTC),
        attempt=1,
        on_heartbeat=supervisor.on_heartbeat,
        is_cancelled=supervisor.cancel.is_set,
    )


def test_a_job_that_sees_cancelled_returns_and_the_attempt_is_cancelled_without_its_result():
    # Given a body that works until ctx.cancelled, and a beat whose answer cancels
    cancel = CancelSignal()
    beats = CancellingBeats(cancel, grace=timedelta(seconds=60))
    supervisor = Supervisor(beats, timedelta(milliseconds=20), timedelta(minutes=1), cancel=cancel)

    def body(ctx: JobContext) -> dict[str, Any]:
        for _ in range(5000):
            if ctx.cancelled:
                return {"charged": 7}
            time.sleep(0.01)
        raise AssertionError("ctx.cancelled never became True")

    # When it runs
    result = supervisor.run(body, ctx_for(supervisor))

    # Then the attempt is CANCELLED with the reason and no result
    assert result.outcome is Outcome.CANCELLED
    assert (result.error, dict(result.result)) == ("operator", {})
    assert result.body_started_ns > 0


def test_a_body_that_ignores_the_cancel_is_stopped_at_the_grace():
    # Given a body that never looks at ctx.cancelled, and a cancel with a short grace
    cancel = CancelSignal()
    beats = CancellingBeats(cancel, grace=timedelta(milliseconds=200))
    supervisor = Supervisor(beats, timedelta(milliseconds=20), timedelta(minutes=1), cancel=cancel)
    stopped = threading.Event()

    def body(ctx: JobContext) -> dict[str, Any]:
        try:
            for _ in range(60_000):
                time.sleep(0.01)
        finally:
            stopped.set()
        return {}

    # When it runs
    result = supervisor.run(body, ctx_for(supervisor))

    # Then the attempt is CANCELLED and the body was stopped (its finally block ran)
    assert result.outcome is Outcome.CANCELLED
    assert stopped.wait(10)


def test_a_running_body_reports_its_start_once_and_a_short_one_leaves_it_to_the_completion():
    # Given a start reporter
    reported: list[int] = []

    def report(started_ns: int) -> BeatResult:
        reported.append(started_ns)
        return BeatResult.OK

    # When a body runs for a while
    long_run = Supervisor(Beats(), timedelta(seconds=10), timedelta(minutes=1), report_start=report)
    slow = long_run.run(lambda ctx: time.sleep(0.3) or {}, ctx_for(long_run))

    # Then its start went out once, while it ran, and the completion need not carry it
    assert slow.outcome is Outcome.SUCCEEDED and slow.start_recorded
    assert reported == [slow.body_started_ns]

    # When a body returns at once (a noop), its start is reported at most once
    reported.clear()
    short_run = Supervisor(
        Beats(), timedelta(seconds=10), timedelta(minutes=1), report_start=report
    )
    quick = short_run.run(lambda ctx: {}, ctx_for(short_run))
    assert quick.outcome is Outcome.SUCCEEDED
    assert quick.start_recorded == (reported == [quick.body_started_ns])
    assert len(reported) <= 1
