"""What a job raises on purpose, and what the worker raises into a job.

A job raises ``NonRetryable`` (or a subclass) when no retry can help: the run ends
FAILED at once, whatever its job type's retry policy. ``AttemptSuperseded`` and
``WorkerStopping`` come out of ``JobContext.heartbeat`` / ``Checkpoint.save``; a job
lets them propagate.
"""

from __future__ import annotations

from cronwave_core.errors import CronwaveError


class NonRetryable(CronwaveError):
    """Raised by a job whose failure no retry can fix (a card declined, an input that
    will never parse): the run ends FAILED with this error and is not retried, even
    under a policy that would retry. Subclass it to give the failure its own name;
    the run's error is recorded as ``<type name>: <message>``."""

    status = "FAILED_PRECONDITION"


class AttemptSuperseded(CronwaveError):
    """A newer attempt owns the run (this one was presumed dead). The job must stop;
    its result would be refused anyway."""

    status = "FAILED_PRECONDITION"

    def __init__(self, run_id: str, detail: str = "") -> None:
        super().__init__(
            f"run '{run_id}': a newer attempt owns the run; this attempt stops without "
            f"completing{': ' + detail if detail else ''}"
        )
        self.run_id = run_id


class WorkerStopping(CronwaveError):
    """The worker running this attempt is stopping (SIGTERM): the attempt hands its
    run back, with the newest checkpoint the job saved, and another worker resumes
    the run from there at once. Raised by ``JobContext.heartbeat`` and
    ``Checkpoint.save`` (after keeping the checkpoint they were given); the job should
    let it propagate, after finishing what it has in flight if that is quick. Past the
    worker's grace period the body is stopped without its help."""

    status = "UNAVAILABLE"

    def __init__(self, message: str = "the worker is stopping; the run is handed back") -> None:
        super().__init__(message)
