"""One attempt whose body runs in a job process: the worker heartbeats for it, passes
its checkpoints on to the store, and kills it at its duration limit or when a newer
attempt has taken the run over.

Killing a process stops what an exception raised into a thread cannot: a body stuck
in a system call or in C code (``time.sleep(3600)``) or one that catches everything.
The process gets SIGTERM (its body sees ``JobStopped`` and its finally blocks run),
then SIGKILL after ``kill_grace``; the attempt's outcome is reported only once the
process is gone, so a timed-out body never writes after its run was closed.

The worker's stop (``worker.draining``) asks the body to stop with SIGUSR1
(``release``): its next heartbeat keeps the checkpoint and raises ``WorkerStopping``,
and the process answers ``released``. Past the grace period (``force_release``) it is
stopped like a timed-out body. Either way the attempt is RELEASED once the body has
ended, with the newest checkpoint it reported.

A cancel (``cancel``, set by a beat's answer) reaches the body as a ``cancel`` line
naming its run (no signal, which could reach the next run queued on the process): its
``ctx.cancelled`` becomes True. A body still running when the cancel's grace has
passed is stopped like a timed-out one; the attempt is CANCELLED either way, and its
process is not reused. The body's start (the process's ``started``
line), its checkpoints and its progress are handed to ``report_start``, ``beat`` and
``report_progress`` as they come; none waits for the store (``worker.liveness`` sends
them with the worker's next heartbeat call), so a job process goes back to the pool the
moment its body ends.

No gRPC here: the store is reached through the ``beat`` callable.
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwave_core.domain.instants import epoch_ns
from cronwave_core.domain.progress import Progress
from cronwave_core.errors import InvalidArgument
from worker.cancellation import CANCELLED, CancelSignal
from worker.job_process import JobProcess, JobProcessDied, JobProcessPool
from worker.run_context import progress_from_message
from worker.supervisor import AttemptResult, BeatResult, Outcome

log = logging.getLogger("cronwave.worker")

#: While the worker stops, the supervising loop looks at least this often whether the
#: grace period is over.
_STOP_POLL_S = 0.1
#: A run queued behind another body and not begun this long after its fire time
#: moves to a process that has gone idle. It looks when the pool wakes it (a process
#: went idle or became ready, ``JobProcessPool.release``), and once at that instant
#: when such a wake came before it; it never polls: ten thousand runs queued at an
#: instant polling four times a second took the CPU their processes needed.
_MOVE_AFTER_S = 0.05
#: A run that never began is handed over at most this many times (its process died
#: or was stopped under it each time) before its attempt fails.
_MAX_HANDOVERS = 5


class ProcessSupervisor:
    """Runs one attempt in a job process from ``pool``."""

    def __init__(
        self,
        pool: JobProcessPool,
        beat: Callable[[str], BeatResult],
        *,
        heartbeat_interval: timedelta,
        duration_limit: timedelta,
        kill_grace: timedelta,
        run_id: str = "",
        monotonic: Callable[[], float] = time.monotonic,
        report_start: Callable[[int], BeatResult] | None = None,
        report_progress: Callable[[Progress], None] | None = None,
        cancel: CancelSignal | None = None,
        watch: Callable[[Callable[[], None] | None], None] | None = None,
    ) -> None:
        self._pool = pool
        self._watch = watch
        self._beat = beat
        self._report_start = report_start
        self._report_progress = report_progress
        self.cancel = cancel or CancelSignal(monotonic)
        self._told_cancel = False  # the cancel line sent
        self._started_ns = 0
        self._recorded = False  # the store has the body's start
        self._interval = max(heartbeat_interval.total_seconds(), 0.01)
        self._limit = duration_limit
        self._grace = kill_grace
        self._run_id = run_id
        self._monotonic = monotonic
        self._checkpoint: Any = None
        self._version = 0
        self._sent = 0
        self._lock = threading.Lock()  # the worker's stop comes from another thread
        self._proc: JobProcess | None = None  # the process the run was handed to
        self._releasing = False
        self._forced = False
        self._signalled = False  # the process was asked to stop: never reused

    # called from the worker's stop (worker.draining) ------------------------------
    def release(self) -> None:
        """Ask the body to stop at its next heartbeat (SIGUSR1 to its process)."""
        with self._lock:
            self._releasing = True
            proc = self._proc
            if proc is not None:
                self._signalled = True
        if proc is not None:
            _signal(proc, signal.SIGUSR1)

    def force_release(self) -> None:
        """Stop the body now: SIGTERM, then SIGKILL after the kill grace."""
        with self._lock:
            self._releasing = self._forced = True
            proc = self._proc
            if proc is not None:
                self._signalled = True
        if proc is not None:
            _signal(proc, signal.SIGTERM)

    def run(self, spec: Mapping[str, Any], fire_time: datetime) -> AttemptResult:
        """Hand ``spec`` (the run, JSON data) to a job process and see it through.

        The body starts at ``fire_time`` at the earliest (the job process waits for
        it); the duration limit counts from the body's start. With no process idle
        the run is queued on the busy one with the fewest runs
        (``JobProcessPool.acquire``): the runs of an instant are in their processes
        before it, and a run due now begins the moment the body ahead of it ends. One
        that has not begun when its process dies, or that moves to a process gone idle
        (its process is held up by a long body), is handed over again: nothing of its
        body ran."""
        why = ""
        for _ in range(_MAX_HANDOVERS):
            result = self._run_once(spec, fire_time)
            if isinstance(result, AttemptResult):
                return result
            why = result
        return AttemptResult(
            Outcome.FAILED,
            error=f"JobProcessDied: {why}",
            error_types=("JobProcessDied",),
        )

    def _run_once(self, spec: Mapping[str, Any], fire_time: datetime) -> AttemptResult | str:
        """One hand-over: the attempt's outcome, or why the run left its process
        without beginning (to be handed over again)."""
        proc = None
        while proc is None:
            if self._releasing:  # the worker stopped before a process was free
                return AttemptResult(Outcome.RELEASED)
            # The run is ours while it waits for a process: keep its heartbeat going.
            try:
                ahead = (fire_time - datetime.now(UTC)).total_seconds()
                proc = self._pool.acquire(
                    wait=self._interval, abandon=lambda: self._releasing, queue=True, ahead=ahead
                )
            except Exception as exc:
                if self._releasing:
                    return AttemptResult(Outcome.RELEASED)
                return AttemptResult(
                    Outcome.FAILED,
                    error=f"JobProcessUnavailable: {exc}",
                    error_types=("JobProcessUnavailable",),
                )
            waited = proc is None and not self._releasing  # a whole interval: beat
            if waited and self._send(force=True) is BeatResult.SUPERSEDED:
                return AttemptResult(Outcome.SUPERSEDED)
            if self.cancel.is_set():  # cancelled while it waited: nothing ran
                if proc is not None:
                    self._pool.release(proc, reusable=True)
                return AttemptResult(Outcome.CANCELLED, error=self.cancel.reason or CANCELLED)
        with self._lock:
            if self._releasing:
                self._pool.release(proc, reusable=True)  # it never saw the run
                return AttemptResult(Outcome.RELEASED)
            self._proc = proc
        ticket = proc.expect()
        try:
            return self._supervise(proc, ticket, spec, fire_time)
        finally:
            proc.forget(ticket)
            with self._lock:
                self._proc = None

    def _supervise(
        self, proc: JobProcess, ticket: int, spec: Mapping[str, Any], fire_time: datetime
    ) -> AttemptResult | str:
        sent_ns = time.time_ns()
        start = self._monotonic()
        early = max(0.0, (epoch_ns(fire_time) - sent_ns) / 1e9)
        # Until the body begins, the limit counts from the fire time (a run still
        # queued then moves rather than kill another run's body); then from its start.
        deadline = start + early + self._limit.total_seconds()
        # With ``watch``, what the store says of the attempt wakes this thread (a poke
        # of its ticket), so it looks at the lease on every wake and never polls it: a
        # run queued on its process seconds ahead of its fire time sleeps until then.
        # Without, it looks every heartbeat interval.
        poll = float("inf") if self._watch is not None else self._interval
        next_beat = start + poll
        move_at = start + early + _MOVE_AFTER_S  # a queued run not begun may move then
        begun = False
        woken_early = False  # woken before ``move_at``: look again at it
        withdrawing = ""  # why a skip was asked ("" while none was)
        superseded = False
        try:
            proc.send({"op": "run", **spec, "ticket": ticket})
            if self._watch is not None:
                self._watch(lambda: proc.poke(ticket))
            while True:
                now = self._monotonic()
                if self._forced:
                    return self._released(proc, started_ns=0, stop=True)
                cancel_at = self.cancel.deadline
                if begun:
                    if cancel_at is not None and now >= cancel_at:
                        return self._cancelled(proc, stop=True)
                    if now >= deadline:
                        return self._timed_out(proc)
                elif not withdrawing:
                    why = self._why_move(now, move_at, deadline, superseded)
                    if why:
                        withdrawing = why
                        proc.send({"op": "skip", "ticket": ticket})
                look = now >= next_beat or self._watch is not None
                if look and not superseded:  # what the store last said (no call is made)
                    if self._send(force=True) is BeatResult.SUPERSEDED:
                        if begun:
                            return self._superseded(proc)
                        superseded = True
                        continue
                    next_beat = self._monotonic() + poll
                self._tell_cancel(proc, ticket)
                wake = min(deadline, next_beat, cancel_at or deadline)
                if woken_early and not begun and not withdrawing and now < move_at:
                    wake = min(wake, move_at)
                if self._releasing:
                    wake = min(wake, now + _STOP_POLL_S)
                message = proc.receive(ticket, max(0.0, wake - self._monotonic()))
                if message is None:
                    woken_early = woken_early or self._monotonic() < move_at
                    continue
                op = message.get("op")
                if op == "started":
                    begun = True
                    deadline = self._monotonic() + self._limit.total_seconds()
                    self._started_ns = int(message.get("started_ns") or 0)
                    if superseded:
                        return self._superseded(proc)
                    # Handed on, not waited for: the next heartbeat call carries it.
                    if self._report_start is not None:
                        if self._report_start(self._started_ns) is BeatResult.SUPERSEDED:
                            return self._superseded(proc)
                        self._tell_cancel(proc, ticket)
                    continue
                if op == "skipped":  # out of the queue before it began
                    self._pool.release(proc, reusable=True)
                    return self._not_begun(superseded) or withdrawing
                if op == "beat":
                    if message.get("checkpoint") is not None:
                        self._checkpoint = message["checkpoint"]
                        self._version += 1
                        # Handed to the heartbeat at once; it reaches the store within
                        # the liveness's checkpoint flush (worker.liveness).
                        if self._send(force=False) is BeatResult.SUPERSEDED:
                            return self._superseded(proc)
                    continue
                if op == "progress":
                    self._progress(message)
                    continue
                if op in ("done", "error"):
                    return _with_spans(self._finished(proc, message, sent_ns, fire_time), message)
                if op == "released":
                    started_ns = int(message.get("started_ns") or 0)
                    return _with_spans(self._released(proc, started_ns, stop=False), message)
                log.warning("run %s: job process sent unknown op %r", self._run_id, op)
        except JobProcessDied as exc:
            if self._forced:  # the worker's stop killed it
                return self._released(proc, started_ns=0, stop=True)
            self._pool.release(proc, reusable=False)
            if not begun:  # stopped under the runs queued on it: this one never began
                return self._not_begun(superseded) or str(exc)
            return AttemptResult(
                Outcome.FAILED,
                error=f"JobProcessDied: {exc}",
                error_types=("JobProcessDied",),
            )

    def _why_move(self, now: float, move_at: float, deadline: float, superseded: bool) -> str:
        """Why a run queued and not begun should leave its process now ("" if not)."""
        if superseded:
            return "superseded"
        if self.cancel.is_set():
            return "cancelled"
        if now >= deadline:
            return "its process ran another body for the whole duration limit"
        if now >= move_at and self._pool.idle_count():
            return "another process was idle"
        return ""

    def _not_begun(self, superseded: bool) -> AttemptResult | None:
        """The outcome of a run that left its process before beginning, if it has one
        (superseded, cancelled); None: hand it over again."""
        if superseded:
            return AttemptResult(Outcome.SUPERSEDED)
        if self.cancel.is_set():
            return AttemptResult(Outcome.CANCELLED, error=self.cancel.reason or CANCELLED)
        return None

    def _progress(self, message: Mapping[str, Any]) -> None:
        """Hand the body's progress to the heartbeat (no call waits for it here)."""
        if self._report_progress is None:
            return
        try:
            self._report_progress(progress_from_message(message))
        except InvalidArgument as exc:  # the job's own values are checked in the job
            log.warning("run %s: job process sent a malformed progress: %s", self._run_id, exc)

    def _tell_cancel(self, proc: JobProcess, ticket: int) -> None:
        """Once a cancel is known, tell the body (its ``ctx.cancelled`` turns True);
        the line names the run, so no other run queued on the process sees it."""
        if self._told_cancel or not self._started_ns or not self.cancel.is_set():
            return  # a body not begun is told once it has (its flag is reset then)
        self._told_cancel = True
        proc.send({"op": "cancel", "ticket": ticket})

    def _cancelled(self, proc: JobProcess, *, stop: bool) -> AttemptResult:
        """CANCELLED once the body has ended (``stop``: it is made to)."""
        if stop:
            proc.stop(self._grace)
        self._pool.release(proc, reusable=False)
        return AttemptResult(
            Outcome.CANCELLED,
            error=self.cancel.reason or CANCELLED,
            body_started_ns=self._started_ns,
            start_recorded=self._recorded,
        )

    def _finished(
        self, proc: JobProcess, message: Mapping[str, Any], sent_ns: int, fire_time: datetime
    ) -> AttemptResult:
        if self.cancel.is_set():  # what it returned is not kept
            self._started_ns = int(message.get("started_ns") or self._started_ns)
            return self._cancelled(proc, stop=False)
        received_ns = time.time_ns()
        with self._lock:
            reusable = not self._signalled  # a stop signal may still be on its way
        self._pool.release(proc, reusable=reusable)
        started_ns = int(message.get("started_ns") or 0)
        ended_ns = int(message.get("ended_ns") or 0)
        # Hand-over (send to the body's start, not counting the wait for the fire
        # time) plus hand-back (the body's end to the result read here).
        overhead = 0
        if started_ns and ended_ns:
            handover = started_ns - max(sent_ns, epoch_ns(fire_time))
            overhead = max(handover, 0) + max(received_ns - ended_ns, 0)
        # The last progress goes to the store before the outcome, so a retry of a
        # failed attempt resumes from it.
        if self._send(force=False) is BeatResult.SUPERSEDED:
            return AttemptResult(Outcome.SUPERSEDED, body_started_ns=started_ns)
        if self.cancel.is_set():  # that beat brought the cancel
            return AttemptResult(
                Outcome.CANCELLED,
                error=self.cancel.reason or CANCELLED,
                body_started_ns=started_ns,
                start_recorded=self._recorded,
            )
        if message.get("op") == "done":
            result = message.get("result")
            return AttemptResult(
                Outcome.SUCCEEDED,
                result=dict(result) if isinstance(result, Mapping) else {},
                body_started_ns=started_ns,
                overhead_ns=overhead,
                start_recorded=self._recorded,
            )
        return AttemptResult(
            Outcome.FAILED,
            error=str(message.get("error") or "error"),
            error_types=tuple(str(t) for t in message.get("error_types") or ()),
            body_started_ns=started_ns,
            overhead_ns=overhead,
            start_recorded=self._recorded,
        )

    def _released(self, proc: JobProcess, started_ns: int, *, stop: bool) -> AttemptResult:
        """RELEASED once the body has ended (``stop``: it is made to), with the newest
        checkpoint it reported that the store does not have yet."""
        if stop:
            proc.stop(self._grace)
        self._pool.release(proc, reusable=False)
        # The newest checkpoint goes with the hand-back even when a heartbeat took it
        # (that call may not have been answered yet).
        return AttemptResult(
            Outcome.RELEASED,
            body_started_ns=started_ns,
            checkpoint_json=json.dumps(self._checkpoint) if self._version else "",
        )

    def _timed_out(self, proc: JobProcess) -> AttemptResult:
        proc.stop(self._grace)
        self._pool.release(proc, reusable=False)
        limit = self._limit.total_seconds()
        return AttemptResult(
            Outcome.TIMED_OUT,
            error=f"DurationLimitExceeded: exceeded the duration limit of {limit:g}s; "
            "the job process was killed",
            error_types=("DurationLimitExceeded",),
            body_started_ns=self._started_ns,
            start_recorded=self._recorded,
        )

    def _superseded(self, proc: JobProcess) -> AttemptResult:
        proc.stop(self._grace)
        self._pool.release(proc, reusable=False)
        return AttemptResult(Outcome.SUPERSEDED)

    def _send(self, *, force: bool) -> BeatResult:
        """Beat now (``force``) or only when there is an unsent checkpoint."""
        version = self._version
        if version == self._sent and not force:
            return BeatResult.OK
        payload = json.dumps(self._checkpoint) if version != self._sent else ""
        outcome = self._beat(payload)
        if outcome is BeatResult.OK:
            self._sent = version
        elif outcome is BeatResult.FAILED:
            log.warning("run %s: heartbeat not delivered; retrying next beat", self._run_id)
        return outcome


def _with_spans(result: AttemptResult, message: Mapping[str, Any]) -> AttemptResult:
    """``result``, with the spans the job process held of the body of a run not
    sampled (``worker.job_spans``) for the worker's keep rule."""
    spans = message.get("spans")
    if isinstance(spans, list) and spans:
        result.job_spans = spans
    return result


def _signal(proc: JobProcess, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # gone already: nothing to stop
        proc.popen.send_signal(signum)  # a no-op once it has been reaped
