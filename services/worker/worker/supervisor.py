"""One attempt of one job: the body runs in its own thread while the supervising
thread heartbeats for it, enforces its duration limit and notices when a newer attempt
has taken the run over.

No gRPC here: the store is reached through the ``beat`` callable, which reports the
store's answer as a ``BeatResult``.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from cronwave import AttemptSuperseded, JobContext, WorkerStopping
from cronwave._job import JobFn
from cronwave_core.domain.instants import epoch_ns
from worker.body_threads import BODIES, BodyTask, BodyThreads
from worker.cancellation import CANCELLED, CancelSignal
from worker.run_context import CheckpointData, body_span
from worker.timing import GATE

log = logging.getLogger("cronwave.worker")

#: A body still running this long after it began has its start sent to the store at
#: once (a heartbeat); one that ends sooner leaves it to its completion, so a short run
#: costs no extra store call.
START_REPORT_AFTER = timedelta(milliseconds=50)


class BeatResult(enum.Enum):
    OK = "ok"
    SUPERSEDED = "superseded"  # the store refused: a newer attempt owns the run
    FAILED = "failed"  # the store could not be reached; try again next beat


class DurationLimitExceeded(Exception):
    """Raised inside a job body that ran past its job type's duration limit."""


class AttemptStopped(Exception):
    """Raised inside a job body whose attempt a newer attempt superseded."""


class RunCancelled(Exception):
    """Raised inside a job body still running when its cancel's grace has passed."""


class Outcome(enum.Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    SUPERSEDED = "superseded"  # not ours to complete
    RELEASED = "released"  # stopped for the worker's shutdown: handed back, not completed
    CANCELLED = "cancelled"  # the run was cancelled while the attempt ran


@dataclass
class AttemptResult:
    outcome: Outcome
    result: Mapping[str, Any] = field(default_factory=dict)
    error: str = ""
    body_started_ns: int = 0  # wall clock, ns since the epoch; 0 = the body never ran
    # The error's type and base type names, matched against non-retryable errors.
    error_types: tuple[str, ...] = ()
    # Time the job process added to the run: handing the run over and the result back.
    overhead_ns: int = 0
    # RELEASED: the newest checkpoint the job reported and the store has not been
    # sent yet, as JSON; "" when the store's is the newest.
    checkpoint_json: str = ""
    # The store has the body's start already (a heartbeat sent it while it ran).
    start_recorded: bool = False
    # What a job process held of the body's spans, its run not sampled, as it handed
    # them over (``span_wire``): the worker's keep rule decides them with its own.
    job_spans: Sequence[Any] = ()


def error_types(exc: BaseException) -> tuple[str, ...]:
    """The names of the error's type and its base types, without the builtin roots."""
    stop = {"BaseException", "Exception", "object"}
    return tuple(cls.__name__ for cls in type(exc).__mro__ if cls.__name__ not in stop)


#: A run's recorded error is cut to this many characters: the store refuses longer
#: free text (``cronwave_core.fields.MAX_TEXT``), which would leave the run unfinished.
MAX_ERROR = 8_000


def describe(exc: BaseException) -> str:
    """``"ExcType: message"``, the form a run's error is recorded in: at most
    ``MAX_ERROR`` characters, a NUL written as ``\\x00`` (no database text holds one)."""
    text = str(exc)
    described = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    described = described.replace("\x00", "\\x00")
    if len(described) > MAX_ERROR:
        described = described[: MAX_ERROR - 14] + " ... (cut off)"
    return described


class Supervisor:
    """Runs one attempt's body and keeps the store informed while it runs.

    Beats every ``heartbeat_interval`` with the newest checkpoint the job reported (or
    none when it did not change). Past ``duration_limit`` the body gets
    ``DurationLimitExceeded`` and the attempt is TIMED_OUT. When a beat is refused the
    body gets ``AttemptStopped`` and the attempt is SUPERSEDED. Either exception is
    delivered between Python instructions, so it cannot cut a system call short; the
    attempt's outcome is decided at once all the same, and the body's thread (a daemon)
    is left to unwind on its own, never to be reused (``worker.body_threads``).

    The worker's stop (``worker.draining``) reaches the attempt through ``release``:
    the body's next heartbeat keeps its checkpoint and raises ``WorkerStopping``, and
    the attempt is RELEASED with that checkpoint; a body that has not begun (held for
    its fire time) never begins. ``force_release`` (the grace period is over) raises
    ``WorkerStopping`` into the body and releases the attempt at once.

    A cancel (``cancel``, set by a beat's answer) is seen by the job as
    ``ctx.cancelled``; a body still running when its grace has passed gets
    ``RunCancelled``. Either way the attempt is CANCELLED, whatever the body returned.
    A body still running ``START_REPORT_AFTER`` after it began has its start sent
    once through ``report_start``, so the run shows as started while it runs; a
    shorter body leaves its start to the completion (no extra call).
    """

    def __init__(
        self,
        beat: Callable[[str], BeatResult],
        heartbeat_interval: timedelta,
        duration_limit: timedelta,
        run_id: str = "",
        monotonic: Callable[[], float] = time.monotonic,
        threads: BodyThreads = BODIES,
        *,
        report_start: Callable[[int], BeatResult] | None = None,
        cancel: CancelSignal | None = None,
    ) -> None:
        self._beat = beat
        self._report_start = report_start
        self.cancel = cancel or CancelSignal(monotonic)
        self._threads = threads
        self._interval = max(heartbeat_interval.total_seconds(), 0.01)
        self._limit = duration_limit
        self._run_id = run_id
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._checkpoint: CheckpointData | None = None
        self._version = 0
        self._sent = 0
        self._stopped: type[Exception] | None = None
        self._releasing = False  # the worker is stopping: hand the run back
        self._forced = False  # ... without waiting for the body any longer
        self._begun = False  # the job function was called
        self._wake = threading.Event()  # the body ended, or the worker's stop cut it short

    # called from the job's thread through JobContext.heartbeat ------------------
    def on_heartbeat(self, checkpoint: CheckpointData | None) -> None:
        with self._lock:
            stopped = self._stopped
            if stopped is None and checkpoint is not None:
                self._checkpoint = checkpoint
                self._version += 1
            releasing = self._releasing
        if stopped is AttemptStopped:
            raise AttemptSuperseded(self._run_id)
        if stopped is DurationLimitExceeded:
            raise DurationLimitExceeded(f"exceeded the duration limit of {self._limit}")
        if releasing:
            raise WorkerStopping()

    # called from the worker's stop (worker.draining) ------------------------------
    def release(self) -> None:
        """Ask the body to stop at its next heartbeat; a body not begun never begins."""
        with self._lock:
            self._releasing = True
            begun = self._begun
        if not begun:
            self._wake.set()

    def force_release(self) -> None:
        """Stop the body now (``WorkerStopping`` raised into it) and release the run."""
        with self._lock:
            self._releasing = self._forced = True
        self._wake.set()

    # the supervising thread -----------------------------------------------------
    def run(self, fn: JobFn, ctx: JobContext, fire_time: datetime | None = None) -> AttemptResult:
        """Run ``fn(ctx)`` to its end, its duration limit, its supersession or its
        cancel; not before ``fire_time`` (the body's thread waits for it at the
        process's ``FireGate``, and the duration limit counts from then)."""
        box: dict[str, Any] = {}
        report = self._report_start is not None

        def body() -> None:
            try:
                started_ns = GATE.wait(fire_time) if fire_time else time.time_ns()
                with self._lock:
                    if self._releasing:  # the worker stopped while it waited
                        return
                    self._begun = True
                box["started_ns"] = started_ns
                if report:
                    self._wake.set()  # the supervising thread reports the start
                with body_span(ctx, started_ns):
                    box["result"] = fn(ctx)
            except BaseException as exc:  # everything the job raised is its outcome
                box["error"] = exc
            finally:
                if fire_time is not None:  # the bodies of a burst before its completions
                    GATE.after_start(fire_time)
                box["ended"] = True
                self._wake.set()

        def guarded() -> None:
            # A stop delivered after the body returned lands here, harmlessly.
            with contextlib.suppress(
                DurationLimitExceeded, AttemptStopped, WorkerStopping, RunCancelled
            ):
                body()

        # The job sees the supervising thread's trace context (its spans nest under
        # the execute span).
        job_context = contextvars.copy_context()
        start = self._monotonic()
        early = (epoch_ns(fire_time) - time.time_ns()) / 1e9 if fire_time else 0.0
        deadline = start + max(early, 0.0) + self._limit.total_seconds()
        next_beat = start + self._interval
        recorded = False  # the store has the body's start
        thread = self._threads.start(
            functools.partial(job_context.run, guarded), f"job-{self._run_id}"
        )
        while True:
            stop_at = min(deadline, next_beat, self.cancel.deadline or deadline)
            if self._wake.wait(max(0.0, stop_at - self._monotonic())):
                if not report or recorded or not self._start_pending(box):
                    break
                if self._wake.wait(START_REPORT_AFTER.total_seconds()) and box.get("ended"):
                    break  # a short body: its completion carries the start
                answer = self._record_start(box)
                if answer is None:
                    self._stop(thread, AttemptStopped)
                    return AttemptResult(
                        Outcome.SUPERSEDED, body_started_ns=box.get("started_ns", 0)
                    )
                recorded = answer
                continue
            now = self._monotonic()
            cancel_at = self.cancel.deadline
            if cancel_at is not None and now >= cancel_at:
                self._stop(thread, RunCancelled)
                return self._cancelled(box, recorded)
            if now >= deadline:
                self._stop(thread, DurationLimitExceeded)
                return AttemptResult(
                    Outcome.TIMED_OUT,
                    error=describe(
                        DurationLimitExceeded(f"exceeded the duration limit of {self._limit}")
                    ),
                    body_started_ns=box.get("started_ns", 0),
                    start_recorded=recorded,
                )
            if now >= next_beat:
                if self._send(force=True) is BeatResult.SUPERSEDED:
                    self._stop(thread, AttemptStopped)
                    return AttemptResult(
                        Outcome.SUPERSEDED, body_started_ns=box.get("started_ns", 0)
                    )
                next_beat = self._monotonic() + self._interval
        started_ns = box.get("started_ns", 0)
        with self._lock:
            forced, begun = self._forced, self._begun
            releasing = self._releasing
        if releasing and not begun:  # stopped before its fire time: nothing ran
            return self._released(0)
        if forced and not box.get("ended"):  # past the grace: stopped without its help
            self._stop(thread, WorkerStopping)
            return self._released(started_ns)
        if isinstance(box.get("error"), WorkerStopping):
            return self._released(started_ns)
        if self.cancel.is_set():  # what it returned is not kept
            return self._cancelled(box, recorded)
        # The last progress goes to the store before the outcome, so a retry of a
        # failed attempt resumes from it.
        if self._send(force=False) is BeatResult.SUPERSEDED:
            return AttemptResult(Outcome.SUPERSEDED, body_started_ns=started_ns)
        if self.cancel.is_set():  # that beat brought the cancel
            return self._cancelled(box, recorded)
        error = box.get("error")
        if isinstance(error, AttemptSuperseded | AttemptStopped):
            return AttemptResult(Outcome.SUPERSEDED, body_started_ns=started_ns)
        if isinstance(error, DurationLimitExceeded):
            return AttemptResult(
                Outcome.TIMED_OUT,
                error=describe(error),
                body_started_ns=started_ns,
                start_recorded=recorded,
            )
        if error is not None:
            return AttemptResult(
                Outcome.FAILED,
                error=describe(error),
                body_started_ns=started_ns,
                error_types=error_types(error),
                start_recorded=recorded,
            )
        result = box.get("result")
        if result is None:
            result = {}
        if not isinstance(result, Mapping):
            return AttemptResult(
                Outcome.FAILED,
                error=f"TypeError: a job returns a JSON object, got {type(result).__name__}",
                body_started_ns=started_ns,
                start_recorded=recorded,
            )
        try:
            json.dumps(dict(result), allow_nan=False)  # the store takes standard JSON only
        except (TypeError, ValueError) as exc:
            return AttemptResult(
                Outcome.FAILED,
                error=f"TypeError: the job's result is not JSON data: {exc}",
                body_started_ns=started_ns,
                start_recorded=recorded,
            )
        return AttemptResult(
            Outcome.SUCCEEDED,
            result=dict(result),
            body_started_ns=started_ns,
            start_recorded=recorded,
        )

    def _start_pending(self, box: dict[str, Any]) -> bool:
        """Whether the wake-up was the body's start, still running and unreported; the
        wake is then cleared, and set again if the body ended (or the worker's stop
        came) in between, so neither is missed."""
        with self._lock:
            pending = "started_ns" in box and not box.get("ended") and not self._forced
        if not pending:
            return False
        self._wake.clear()
        if box.get("ended") or self._forced:
            self._wake.set()
        return True

    def _record_start(self, box: dict[str, Any]) -> bool | None:
        """Tell the store when the body began; True when it took it, None when a newer
        attempt owns the run."""
        assert self._report_start is not None
        outcome = self._report_start(int(box["started_ns"]))
        if outcome is BeatResult.SUPERSEDED:
            return None
        return outcome is BeatResult.OK

    def _cancelled(self, box: dict[str, Any], recorded: bool) -> AttemptResult:
        return AttemptResult(
            Outcome.CANCELLED,
            error=self.cancel.reason or CANCELLED,
            body_started_ns=box.get("started_ns", 0),
            start_recorded=recorded,
        )

    def _released(self, started_ns: int) -> AttemptResult:
        """RELEASED, with the checkpoint the store does not have yet (its release
        carries it, instead of one more beat)."""
        with self._lock:
            checkpoint = self._checkpoint
        # The newest checkpoint goes with the hand-back even when a heartbeat took it
        # (that call may not have been answered yet).
        return AttemptResult(
            Outcome.RELEASED,
            body_started_ns=started_ns,
            checkpoint_json=json.dumps(checkpoint) if checkpoint is not None else "",
        )

    def _send(self, *, force: bool) -> BeatResult:
        """Beat now (``force``) or only when there is an unsent checkpoint."""
        with self._lock:
            version, checkpoint = self._version, self._checkpoint
        if version == self._sent and not force:
            return BeatResult.OK
        payload = json.dumps(checkpoint) if version != self._sent and checkpoint is not None else ""
        outcome = self._beat(payload)
        if outcome is BeatResult.OK:
            self._sent = version
        elif outcome is BeatResult.FAILED:
            log.warning("run %s: heartbeat not delivered; retrying next beat", self._run_id)
        return outcome

    def _stop(self, body: BodyTask, reason: type[Exception]) -> None:
        with self._lock:
            self._stopped = reason
        body.stop(reason)
