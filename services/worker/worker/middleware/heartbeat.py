"""Heartbeat: while an attempt is this worker's (waiting for a job process, at its fire
gate, while its body runs), the worker's ``Liveness`` tells the store it is alive,
with the body's newest checkpoint and, once, when the body began: one ``Heartbeats``
call per tick for every attempt the worker holds (``worker.liveness``), at least every
job type's heartbeat interval, or every ``cancel_check`` when that is shorter.

Nothing here waits for the store: the body's supervisor hands its checkpoints and its
start to the attempt's lease and reads back what the store last said. A refusal says
a newer attempt owns the run (or it ended): the supervisor stops the body and the
attempt is not completed. An answer that says the run is being cancelled sets the
attempt's ``CancelSignal``: the job sees ``ctx.cancelled``, and its supervisor stops
the body when the grace has passed. So a cancel reaches a running body within
``cancel_check`` plus one heartbeat call.

The lease ends with the execute phase: the newest checkpoint is then sent (and waited
for) before the outcome, so a retry resumes from it."""

from __future__ import annotations

from datetime import timedelta

from worker.cancellation import CancelSignal
from worker.chain import Delivery, RunMiddleware
from worker.liveness import Liveness


class Heartbeat(RunMiddleware):
    def __init__(self, liveness: Liveness, cancel_check: timedelta = timedelta(seconds=1)) -> None:
        self.liveness = liveness
        self.cancel_check = cancel_check

    def before_execute(self, delivery: Delivery) -> None:
        if delivery.job_type is None:
            return
        interval = min(delivery.job_type.heartbeat_interval, self.cancel_check)
        cancel = delivery.cancel = CancelSignal()
        lease = self.liveness.hold(delivery.run.run_id, delivery.attempt_token, interval, cancel)
        delivery.lease = lease
        delivery.phase.callback(lease.drop)  # the attempt's outcome is decided then
        delivery.beat = lease.beat
        delivery.report_start = lease.report_start
        delivery.heartbeat_interval = interval

    def close(self) -> None:
        self.liveness.close()
