"""What a job function is given: its run, its input, its checkpoint, a way to report
progress, whether the run was cancelled, and a logger bound to the run."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cronwave._checkpoint import Checkpoint, Report
from cronwave_core.domain.progress import Progress
from cronwave_core.errors import InvalidArgument

#: The record attributes every line of ``JobContext.logger`` carries.
LOG_FIELDS = ("run_id", "schedule_id", "trace_id", "job_type")


def _no_heartbeat(_checkpoint: dict[str, Any] | None) -> None:
    return None


def _no_progress(_progress: Progress) -> None:
    return None


def _never_cancelled() -> bool:
    return False


class RunLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger whose every record carries the run's ``run_id``, ``schedule_id``,
    ``trace_id`` and ``job_type`` as attributes (a record's own ``extra`` adds to
    them); the worker's log format shows them."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs


@dataclass(frozen=True)
class JobContext:
    """One attempt of one run, as its job function sees it.

    ``fire_time`` is the run's nominal fire time (aware, UTC); ``attempt`` counts from
    1; ``payload`` is the schedule's (or the trigger's) JSON input. ``checkpoint`` is
    the run's newest checkpoint (empty on a first attempt), so a resumed attempt
    continues instead of starting over: ``ctx.checkpoint.load()`` and
    ``ctx.checkpoint.save({...})``. A job must be safe to repeat: delivery is at least
    once, and everything since the last saved checkpoint may be done again.

    ``cancelled`` turns True once someone cancelled the run (``cronwave runs cancel``):
    the job should stop at its next safe point; past the cancel's grace the worker
    stops it. ``logger`` writes lines bound to the run (see ``RunLogger``).

    ``progress(done, total, unit)`` says how far the run got, for people watching it.

    The worker builds the context; ``on_heartbeat``, ``on_progress`` and
    ``is_cancelled`` are its hooks (the defaults do nothing and say "not cancelled",
    for a job called in a test of its own).
    """

    run_id: str
    schedule_id: str
    fire_time: datetime
    attempt: int
    payload: Mapping[str, Any] = field(default_factory=dict)
    checkpoint: Checkpoint = field(default_factory=Checkpoint)
    job_type: str = ""
    trace_id: str = ""
    on_heartbeat: Report = _no_heartbeat
    is_cancelled: Callable[[], bool] = _never_cancelled
    on_progress: Callable[[Progress], None] = _no_progress
    logger: RunLogger = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.checkpoint, Checkpoint):
            object.__setattr__(self, "checkpoint", Checkpoint(self.checkpoint))
        if not isinstance(self.fire_time, datetime) or self.fire_time.tzinfo is None:
            raise InvalidArgument("fire_time", "must be a timezone-aware datetime")
        self.checkpoint._attach(self.on_heartbeat)
        base = logging.getLogger(f"cronwave.job.{self.job_type or 'unknown'}")
        fields = {
            "run_id": self.run_id,
            "schedule_id": self.schedule_id,
            "trace_id": self.trace_id,
            "job_type": self.job_type,
        }
        object.__setattr__(self, "logger", RunLogger(base, fields))

    @property
    def cancelled(self) -> bool:
        """True once the run was cancelled: stop soon, the run ends CANCELLED."""
        return bool(self.is_cancelled())

    def heartbeat(self, checkpoint: Mapping[str, Any] | None = None) -> None:
        """Report that the attempt is alive, and with ``checkpoint`` (JSON-able) how far
        it got (the same as ``ctx.checkpoint.save(checkpoint)``); the worker sends it
        to the store with its next heartbeat. Raises ``AttemptSuperseded`` once the
        store has handed the run to a newer attempt, and ``WorkerStopping`` once the
        worker is stopping (the checkpoint given is kept and handed back with the
        run), so the job stops at its next checkpoint."""
        if checkpoint is not None:
            self.checkpoint.save(checkpoint)
        else:
            self.on_heartbeat(None)

    def progress(self, done: int, total: int | None = None, unit: str = "") -> None:
        """Say how far the run got: ``done`` of ``total`` ``unit`` (``total`` None when
        it is not known), e.g. ``ctx.progress(5_000, 100_000, "customers charged")``.
        The console's run page shows it as a bar and ``Run.progress`` reads it back.

        The worker sends the newest report with the attempt's next heartbeat, within
        about a second, so a job may report as often as is convenient (after every
        item): only the last report of each second reaches the store. It never waits
        for the store and raises only ``InvalidArgument`` (a negative or fractional
        count, a unit over 64 characters). A retry keeps the last report until its
        body reports again; unlike the checkpoint, nothing resumes from it."""
        self.on_progress(Progress(done, total, unit, datetime.now(UTC)))
