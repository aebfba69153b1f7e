"""The inside of a job process (see ``worker.job_runner``, its entry point): it runs
job bodies one at a time and speaks the JSON-lines protocol with its worker.

The worker may queue several runs on one process (the bodies of an instant, handed
over before it): a reader thread takes every line off stdin as it comes, and the
bodies run earliest fire time first, each at its fire time at the earliest.
Every line the process writes about a run carries that run's ``ticket`` (the worker's
number for the hand-over), so the worker can tell the runs of one process apart.
``{"op": "skip", "ticket": N}`` takes a run that has not begun out of the queue (the
process answers ``skipped``; a run already begun goes on, and its ``started`` says
so), and ``{"op": "cancel", "ticket": N}`` sets the running body's ``ctx.cancelled``.

SIGTERM raises ``JobStopped`` in the body (finally blocks run); the worker sends
SIGKILL after a grace period. SIGUSR1 says the worker is stopping: the body's next
heartbeat sends its checkpoint and raises ``WorkerStopping``, every run still queued
or waiting for its fire time does not start, and the process answers ``released`` for
each. SIGUSR2 sets the running body's ``ctx.cancelled`` too (the worker sends the
``cancel`` line instead: a signal could land on the next run queued).

The process writes ``{"op": "started"}`` when a body begins, so its worker can tell
the store while the body runs. While more runs are due at once, a body's ``started``
and outcome lines are held back up to ``REPORT_HOLD_S`` (100 ms), so the bodies of a
burst begin before the worker's threads wake to handle their reports (``Channel``).
A held line is also kept in the process's spill file (``worker.held_lines``), which
its worker reads if the process dies: a body that began, or ended, under a held line
is known to have, and is never handed to another process.
The outcome line of a run not sampled carries the spans the process held of its body
(``"spans"``, ``worker.job_spans``).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import IO, Any

from cronwave import WorkerStopping
from cronwave_core.domain.instants import epoch_ns, wait_until_fire_time
from cronwave_core.domain.progress import Progress
from cronwave_core.limits import DEFAULT_LIMITS
from cronwave_core.settings import TelemetrySettings, WorkerSettings
from cronwave_core.telemetry.deferred import DeferredSpans
from cronwave_core.telemetry.propagation import extracted_context
from cronwave_core.telemetry.tracing import init_tracing
from worker.held_lines import Spill
from worker.job_spans import HeldSpans
from worker.jobs import Registry, default_registry
from worker.log_format import configure_logging
from worker.run_context import CheckpointData, body_span, job_context, progress_message
from worker.supervisor import describe, error_types

log = logging.getLogger("cronwave.job_runner")


class JobStopped(BaseException):
    """The worker stopped this attempt (duration limit, or a newer attempt took over).
    A ``BaseException``, so a job's ``except Exception`` does not swallow it."""


class _StopRequest:
    """Set by SIGUSR1, read by the body's thread (a plain flag: a signal handler must
    not take a lock the interrupted code may hold). Never cleared: a process asked to
    stop is not given another run."""

    requested = False


STOP = _StopRequest()


class _CancelRequest:
    """Set by the running body's ``cancel`` line (or SIGUSR2, by hand), read by
    ``ctx.cancelled``. Cleared when a run begins: a cancel names its run, so none
    reaches the next one."""

    requested = False


CANCEL = _CancelRequest()


def _is_cancelled() -> bool:
    return CANCEL.requested


#: A body waiting for its fire time looks at the stop request this often.
_WAIT_SLICE_S = 0.05


def _check_stop() -> None:
    if STOP.requested:
        raise WorkerStopping()


def _wait_sleep(seconds: float) -> None:
    """``time.sleep`` in slices, for the wait until the fire time: a stop request
    ends the wait (``WorkerStopping``)."""
    _check_stop()
    time.sleep(min(seconds, _WAIT_SLICE_S))


#: The exit code of a job process whose worker went away under it.
WORKER_GONE = 3


#: While runs due now wait in the queue, a body's ``started`` and outcome lines are
#: held back at most this long (see ``Channel``).
REPORT_HOLD_S = 0.1


class _Out:
    """The protocol's one stream, shared by every run's channel: one writer at a time,
    and the lines held back (``Channel.send(..., hold=True)``) until they are flushed."""

    def __init__(self, stream: IO[str], spill: Spill | None = None) -> None:
        self.stream = stream
        self.spill = spill  # a copy of the held lines, which outlives the process
        self.lock = threading.Lock()
        self.held: list[str] = []
        self.held_since = 0.0  # monotonic; 0.0: nothing held
        self.wake = threading.Condition(self.lock)


class Channel:
    """The protocol's write end: one JSON object per line, from any thread.

    Lines sent with ``hold=True`` (a body's ``started`` and its outcome, while more
    runs are due at once) wait until ``flush``, any line sent without it, or
    ``REPORT_HOLD_S`` after the first of them (``keep_flushing``'s thread). At the
    instant of a burst each line wakes the worker's threads, which then take the
    cores from the job processes whose bodies are due: held back, the bodies of the
    instant begin first and their reports follow within a moment. With ``spill``, each
    held line is also kept there until it has gone down the pipe (``worker.held_lines``)."""

    def __init__(
        self, stream: IO[str] | _Out, ticket: object = None, spill: Spill | None = None
    ) -> None:
        self._out = stream if isinstance(stream, _Out) else _Out(stream, spill)
        self._ticket = ticket

    def for_ticket(self, ticket: object) -> Channel:
        """This channel, each line marked with ``ticket`` (one run's)."""
        return Channel(self._out, ticket)

    def send(self, message: Mapping[str, Any], *, hold: bool = False) -> None:
        if self._ticket is not None:
            message = {**message, "ticket": self._ticket}
        # Standard JSON only (no NaN): results and checkpoints go on to the store.
        line = json.dumps(message, separators=(",", ":"), allow_nan=False) + "\n"
        out = self._out
        with out.lock:
            out.held.append(line)
            if hold:
                if out.spill is not None:  # before the body that follows may kill us
                    out.spill.add(line)
                if not out.held_since:
                    out.held_since = time.monotonic()
                    out.wake.notify()
                return
            self._write_held()

    def flush(self) -> None:
        """Write every line held back."""
        with self._out.lock:
            if self._out.held:
                self._write_held()

    def keep_flushing(self) -> None:
        """Write held lines once they are ``REPORT_HOLD_S`` old; runs for ever (a
        daemon thread's target)."""
        out = self._out
        with out.lock:
            while True:
                if not out.held_since:
                    out.wake.wait()
                    continue
                left = out.held_since + REPORT_HOLD_S - time.monotonic()
                if left > 0:
                    out.wake.wait(left)
                    continue
                self._write_held()

    def _write_held(self) -> None:
        out = self._out  # its lock is held
        try:
            out.stream.write("".join(out.held))
            out.stream.flush()
        except BrokenPipeError:
            # The worker is gone (killed): end as if killed with it, writing
            # nothing more (the body's span would hang under a worker's span that
            # was never recorded). Its death reaches a forked process through the
            # fork server a moment later; a write may come first.
            os._exit(WORKER_GONE)
        out.held.clear()
        out.held_since = 0.0
        if out.spill is not None:
            out.spill.clear()  # the pipe has them now


class RunQueue:
    """The runs handed to this process and not begun, earliest fire time first; filled
    by the reader thread (``read_runs``), emptied by the bodies' thread (``next``),
    which takes a run when its fire time is near, so a run handed over later but due
    sooner goes first."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._cond = threading.Condition()
        self._runs: list[tuple[int, int, dict[str, Any]]] = []  # a heap: fire ns, order
        self._order = itertools.count()
        self._closed = False
        self._current: object = None  # the ticket of the body running now

    def read_runs(self, lines: IO[str]) -> None:
        """Take every line off ``lines`` until it closes (the worker is done with this
        process, or gone)."""
        try:
            for line in lines:
                if line.strip():
                    self.take(json.loads(line))
        except (OSError, ValueError):  # a broken pipe or a torn line: the worker is gone
            pass
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def take(self, message: dict[str, Any]) -> None:
        """Take one line from the worker (``read_runs``' thread)."""
        op = message.get("op")
        with self._cond:
            if op == "run":
                heapq.heappush(self._runs, (_fire_ns(message), next(self._order), message))
                self._cond.notify_all()
                return
            ticket = message.get("ticket")
            if op == "cancel" and ticket == self._current:
                CANCEL.requested = True
                return
            if op != "skip":
                return
            for entry in self._runs:
                if entry[2].get("ticket") == ticket:
                    self._runs.remove(entry)
                    heapq.heapify(self._runs)
                    break
            else:
                return  # begun already (its ``started`` says so) or over
        self._channel.send({"op": "skipped", "ticket": ticket})

    def due(self) -> bool:
        """Whether a run waiting here is due now (its body would begin at once)."""
        with self._cond:
            return bool(self._runs) and self._runs[0][0] <= time.time_ns() + _TAKE_AHEAD_NS

    def next(self) -> dict[str, Any] | None:
        """The next run to begin, once its fire time is near (at once when the worker
        is stopping: it answers ``released``); None once stdin has closed and none is
        left."""
        with self._cond:
            while True:
                if not self._runs:
                    self._channel.flush()  # nothing due follows: the reports go now
                    if self._closed:
                        return None
                    self._cond.wait()
                    continue
                left = (self._runs[0][0] - time.time_ns()) / 1e9 - _TAKE_AHEAD_S
                if left <= 0 or STOP.requested:
                    break
                self._channel.flush()
                # A signal handler may not notify: look at the stop flag now and then.
                self._cond.wait(min(left, _WAIT_SLICE_S))
            spec = heapq.heappop(self._runs)[2]
            self._current = spec.get("ticket")
            CANCEL.requested = False
            return spec


#: A queued run is taken this long before its fire time; the body's own wait
#: (``wait_until_fire_time``) does the last stretch precisely.
_TAKE_AHEAD_S = 0.02
_TAKE_AHEAD_NS = int(_TAKE_AHEAD_S * 1e9)


def _fire_ns(spec: Mapping[str, Any]) -> int:
    """The run's fire time in ns since the epoch (0 when unreadable: ``run_one``
    reports why it cannot run)."""
    try:
        return epoch_ns(datetime.fromisoformat(str(spec["fire_time"])))
    except (KeyError, ValueError, TypeError):
        return 0


def run_one(
    spec: Mapping[str, Any],
    registry: Registry,
    channel: Channel,
    held: HeldSpans | None = None,
    more_due: Callable[[], bool] = lambda: False,
) -> None:
    """Run the body ``spec`` names and report its outcome on ``channel``, each line
    with the run's ticket; its ``started`` and outcome lines are held back a moment
    while ``more_due()`` (see ``Channel``)."""
    started_ns = 0
    carrier = dict(spec.get("trace") or {})
    spans = held or HeldSpans(None)  # of a run not sampled: handed over with its outcome
    channel = channel.for_ticket(spec.get("ticket"))
    try:
        job_type = registry.get(str(spec["job_type"]))
        fire_time = datetime.fromisoformat(str(spec["fire_time"]))

        def on_heartbeat(checkpoint: CheckpointData | None) -> None:
            channel.send({"op": "beat", "checkpoint": checkpoint})
            _check_stop()  # after the beat: the checkpoint goes with the run

        def on_progress(progress: Progress) -> None:
            channel.send({"op": "progress", **progress_message(progress)})

        with extracted_context(dict(spec.get("trace") or {})):
            ctx = job_context(
                run_id=str(spec["run_id"]),
                schedule_id=str(spec.get("schedule_id", "")),
                fire_time=fire_time,
                attempt=int(spec.get("attempt", 0)),
                payload=dict(spec.get("payload") or {}),
                checkpoint=dict(spec.get("checkpoint") or {}),
                checkpoint_bytes=int(
                    spec.get("checkpoint_bytes") or DEFAULT_LIMITS.checkpoint_bytes
                ),
                job_type=job_type.name,
                on_heartbeat=on_heartbeat,
                is_cancelled=_is_cancelled,
                on_progress=on_progress,
            )
            started_ns = wait_until_fire_time(fire_time, sleep=_wait_sleep)
            _check_stop()
            channel.send({"op": "started", "started_ns": started_ns}, hold=more_due())
            with body_span(ctx, started_ns):
                result = job_type.fn(ctx)
        ended_ns = time.time_ns()
        if result is None:
            result = {}
        if not isinstance(result, Mapping):
            raise TypeError(f"a job returns a JSON object, got {type(result).__name__}")
        try:
            line = {"op": "done", "result": dict(result), "started_ns": started_ns}
            outcome = {**line, "ended_ns": ended_ns, **spans.outcome(carrier)}
            channel.send(outcome, hold=more_due())
        except (TypeError, ValueError) as exc:
            raise TypeError(f"the job's result is not JSON data: {exc}") from exc
    except JobStopped:
        spans.keep(carrier)  # its worker stopped it: such a run's spans are kept
        raise
    except WorkerStopping:
        released = {"op": "released", "started_ns": started_ns, "ended_ns": time.time_ns()}
        channel.send({**released, **spans.outcome(carrier)})
    except Exception as exc:  # everything the job raised is its outcome
        channel.send(
            {
                "op": "error",
                "error": describe(exc),
                "error_types": list(error_types(exc)),
                "started_ns": started_ns,
                "ended_ns": time.time_ns(),
                **spans.outcome(carrier),
            },
            hold=more_due(),
        )


def _on_sigterm(_signum: int, _frame: Any) -> None:
    raise JobStopped("stopped by the worker")


def _on_sigusr1(_signum: int, _frame: Any) -> None:
    STOP.requested = True


def _on_sigusr2(_signum: int, _frame: Any) -> None:
    CANCEL.requested = True


def serve() -> None:
    """Run bodies until stdin closes. The protocol keeps the original stdout and
    stdin; the job gets stderr and nothing."""
    proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout = sys.stderr

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the worker's
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGUSR1, _on_sigusr1)
    configure_logging(job_process=True)
    signal.signal(signal.SIGUSR2, _on_sigusr2)
    telemetry = TelemetrySettings.from_env()
    # A run not sampled: its spans are held until its worker's keep rule decides them.
    deferred = DeferredSpans() if telemetry.tracing else None
    provider = init_tracing("worker", telemetry, deferred)
    held = HeldSpans(deferred)
    registry = default_registry(WorkerSettings.from_env())
    spill = Spill()  # before ``ready``: the worker opens it then
    channel = Channel(proto_out, spill=spill)
    queue = RunQueue(channel)
    reader = threading.Thread(target=queue.read_runs, args=(proto_in,), name="runs", daemon=True)
    flusher = threading.Thread(target=channel.keep_flushing, name="reports", daemon=True)
    try:
        channel.send({"op": "ready", "pid": os.getpid()})
        reader.start()
        flusher.start()
        while (spec := queue.next()) is not None:
            run_one(spec, registry, channel, held, queue.due)
            provider.force_flush()  # the body's spans, before this process may be killed
    except (JobStopped, BrokenPipeError):
        pass
    finally:
        spill.remove()
        channel.flush()  # the reports held back of bodies that ended
        for job_type in registry:
            dispose = getattr(job_type.fn, "dispose", None)
            if callable(dispose):
                with contextlib.suppress(Exception):
                    dispose()
        provider.shutdown()
