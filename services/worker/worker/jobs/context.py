"""What a job function is given: its run, its input, and a way to report progress."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cronwave_core.errors import CronwaveError, InvalidArgument

Checkpoint = dict[str, Any]


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
    run back, with the newest checkpoint the job reported, and another worker resumes
    the run from there at once. Raised by ``JobContext.heartbeat`` (after keeping the
    checkpoint it was given); the job should let it propagate, after finishing what
    it has in flight if that is quick. Past the worker's grace period the body is
    stopped without its help."""

    status = "UNAVAILABLE"

    def __init__(self, message: str = "the worker is stopping; the run is handed back") -> None:
        super().__init__(message)


def _no_heartbeat(_checkpoint: Checkpoint | None) -> None:
    return None


@dataclass
class JobContext:
    """One attempt of one run, as its job function sees it.

    ``payload`` is the schedule's JSON input; ``checkpoint`` is the last progress the
    run reported (empty on a first attempt), so a retried attempt can resume instead of
    starting over. Job functions must be safe to repeat: delivery is at least once.
    """

    run_id: str
    schedule_id: str
    fire_time: datetime
    attempt: int
    payload: Mapping[str, Any] = field(default_factory=dict)
    checkpoint: Checkpoint = field(default_factory=dict)
    job_type: str = ""
    on_heartbeat: Callable[[Checkpoint | None], None] = _no_heartbeat
    is_cancelled: Callable[[], bool] = lambda: False
    logger: logging.LoggerAdapter[logging.Logger] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        base = logging.getLogger(f"cronwave.job.{self.job_type or 'unknown'}")
        self.logger = logging.LoggerAdapter(base, {"run_id": self.run_id})

    @property
    def cancelled(self) -> bool:
        """True once the run is being cancelled: the job should stop soon (return or
        raise); its body is stopped when the cancel's grace has passed. The run ends
        CANCELLED whatever the body returns."""
        return self.is_cancelled()

    def heartbeat(self, checkpoint: Mapping[str, Any] | None = None) -> None:
        """Report that the attempt is alive, and with ``checkpoint`` (JSON-able) how far
        it got; the worker sends it to the store with its next heartbeat. Raises
        ``AttemptSuperseded`` once the store has handed the run to a newer attempt, and
        ``WorkerStopping`` once the worker is stopping (the checkpoint given is kept and
        handed back with the run), so the job stops at its next checkpoint."""
        data: Checkpoint | None = None
        if checkpoint is not None:
            data = dict(checkpoint)
            try:
                json.dumps(data, allow_nan=False)  # the store takes standard JSON only
            except (TypeError, ValueError) as exc:
                raise InvalidArgument("checkpoint", f"must be JSON data: {exc}") from exc
            self.checkpoint = data
        self.on_heartbeat(data)
