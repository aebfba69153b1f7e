"""Time limit: the body runs for at most its job type's duration limit; past it, the
attempt is TIMED_OUT and its body is stopped (a job process gets ``kill_grace``
between SIGTERM and SIGKILL; a body in a thread cannot be killed, only abandoned).
dramatiq's own ``TimeLimit`` stays installed as a backstop (``worker.actors``)."""

from __future__ import annotations

from datetime import timedelta

from worker.chain import Delivery, RunMiddleware


class TimeLimit(RunMiddleware):
    def __init__(self, kill_grace: timedelta = timedelta(seconds=2)) -> None:
        self.kill_grace = kill_grace

    def before_execute(self, delivery: Delivery) -> None:
        if delivery.job_type is not None:
            delivery.duration_limit = delivery.job_type.duration_limit
        delivery.kill_grace = self.kill_grace
