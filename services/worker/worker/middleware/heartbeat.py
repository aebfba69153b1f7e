"""Heartbeat: while an attempt is this worker's (waiting for a job process, at its fire
gate, while its body runs), the worker's ``Liveness`` tells the store it is alive,
with the body's newest checkpoint and progress and, once, when the body began: one ``Heartbeats``
call per tick for every attempt the worker holds (``worker.liveness``), at least every
job type's heartbeat interval, or every ``cancel_check`` when that is shorter.

Nothing here waits for the store: the body's supervisor hands its checkpoints and its
start to the attempt's lease and reads back what the store last said. A refusal says
a newer attempt owns the run (or it ended): the supervisor stops the body and the
attempt is not completed. An answer that says the run is being cancelled sets the
attempt's ``CancelSignal``: the job sees ``ctx.cancelled``, and its supervisor stops
the body when the grace has passed. So a cancel reaches a running body within
``cancel_check`` plus one heartbeat call.

A run claimed ahead of its fire time beats from its claim on (``hold``), so it stays
this worker's however long it waits: a fifth of its heartbeat timeout apart until its
body begins, and once within the interval before its fire time, so a cancel reaches it
before the body would begin. The lease ends with the execute phase: the newest
checkpoint is then sent (and waited for) before the outcome, so a retry resumes from it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from worker.cancellation import CancelSignal
from worker.chain import Delivery, RunMiddleware
from worker.liveness import Lease, Liveness


class Heartbeat(RunMiddleware):
    def __init__(self, liveness: Liveness, cancel_check: timedelta = timedelta(seconds=1)) -> None:
        self.liveness = liveness
        self.cancel_check = cancel_check

    def hold(self, delivery: Delivery) -> Lease:
        """The claimed run's lease, beating from now on: for a run held for its fire
        time (``worker.held_runs``), so that it stays this worker's while it waits, and
        a refusal says it ended meanwhile. Its attempt's execute phase takes it over;
        whoever ends the run's hold without it drops it."""
        if delivery.lease is None:
            assert delivery.job_type is not None  # claimed runs of known job types only
            interval = min(delivery.job_type.heartbeat_interval, self.cancel_check)
            cancel = delivery.cancel = CancelSignal()
            delivery.heartbeat_interval = interval
            run_id, token = delivery.run.run_id, delivery.attempt_token
            # Held for its fire time, it beats a fifth of its heartbeat timeout apart
            # (and once just before the fire time): see Liveness.hold.
            delivery.lease = self.liveness.hold(
                run_id,
                token,
                interval,
                cancel,
                fire_in=delivery.fire_time - datetime.now(UTC),
                held_gap=delivery.job_type.heartbeat_timeout / 5,
            )
        return delivery.lease

    def before_execute(self, delivery: Delivery) -> None:
        if delivery.job_type is None:
            return
        lease = self.hold(delivery)
        delivery.phase.callback(lease.drop)  # the attempt's outcome is decided then
        delivery.beat = lease.beat
        delivery.report_start = lease.report_start
        delivery.report_progress = lease.report_progress

    def close(self) -> None:
        self.liveness.close()
