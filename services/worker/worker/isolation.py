"""One attempt whose body runs in a job process: the worker heartbeats for it, passes
its checkpoints on to the store, and kills it at its duration limit or when a newer
attempt has taken the run over.

Killing a process stops what an exception raised into a thread cannot: a body stuck
in a system call or in C code (``time.sleep(3600)``) or one that catches everything.
The process gets SIGTERM (its body sees ``JobStopped`` and its finally blocks run),
then SIGKILL after ``kill_grace``; the attempt's outcome is reported only once the
process is gone, so a timed-out body never writes after its run was closed.

No gRPC here: the store is reached through the ``beat`` callable.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from worker.job_process import JobProcess, JobProcessDied, JobProcessPool
from worker.supervisor import AttemptResult, BeatResult, Outcome
from worker.timing import epoch_ns

log = logging.getLogger("cronwave.worker")

#: A new checkpoint reaches the store within this time even when the heartbeat
#: interval is longer, so a resumed attempt repeats at most this much work.
CHECKPOINT_FLUSH = timedelta(seconds=1)


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
    ) -> None:
        self._pool = pool
        self._beat = beat
        self._interval = max(heartbeat_interval.total_seconds(), 0.01)
        self._flush = min(self._interval, CHECKPOINT_FLUSH.total_seconds())
        self._limit = duration_limit
        self._grace = kill_grace
        self._run_id = run_id
        self._monotonic = monotonic
        self._checkpoint: Any = None
        self._version = 0
        self._sent = 0

    def run(self, spec: Mapping[str, Any], fire_time: datetime) -> AttemptResult:
        """Hand ``spec`` (the run, JSON data) to a job process and see it through.

        The body starts at ``fire_time`` at the earliest (the job process waits for
        it); the duration limit counts from then."""
        proc = None
        while proc is None:
            # The run is ours while it waits for a process: keep its heartbeat going.
            try:
                proc = self._pool.acquire(wait=self._interval)
            except Exception as exc:
                return AttemptResult(
                    Outcome.FAILED,
                    error=f"JobProcessUnavailable: {exc}",
                    error_types=("JobProcessUnavailable",),
                )
            if proc is None and self._send(force=True) is BeatResult.SUPERSEDED:
                return AttemptResult(Outcome.SUPERSEDED)
        sent_ns = time.time_ns()
        start = self._monotonic()
        early = max(0.0, (epoch_ns(fire_time) - sent_ns) / 1e9)
        deadline = start + early + self._limit.total_seconds()
        next_beat = start + self._interval
        flush_at = 0.0  # when the newest unsent checkpoint must go out; 0 = none pending
        try:
            proc.send({"op": "run", **spec})
            while True:
                now = self._monotonic()
                if now >= deadline:
                    return self._timed_out(proc)
                if now >= next_beat or (flush_at and now >= flush_at):
                    if self._send(force=now >= next_beat) is BeatResult.SUPERSEDED:
                        return self._superseded(proc)
                    if now >= next_beat:
                        next_beat = self._monotonic() + self._interval
                    flush_at = 0.0 if self._version == self._sent else now + self._flush
                wake = min(deadline, next_beat, flush_at or deadline)
                message = proc.receive(max(0.0, wake - self._monotonic()))
                if message is None:
                    continue
                op = message.get("op")
                if op == "beat":
                    if message.get("checkpoint") is not None:
                        self._checkpoint = message["checkpoint"]
                        self._version += 1
                        if not flush_at:
                            flush_at = self._monotonic() + self._flush
                    continue
                if op in ("done", "error"):
                    return self._finished(proc, message, sent_ns, fire_time)
                log.warning("run %s: job process sent unknown op %r", self._run_id, op)
        except JobProcessDied as exc:
            self._pool.release(proc, reusable=False)
            return AttemptResult(
                Outcome.FAILED,
                error=f"JobProcessDied: {exc}",
                error_types=("JobProcessDied",),
            )

    def _finished(
        self, proc: JobProcess, message: Mapping[str, Any], sent_ns: int, fire_time: datetime
    ) -> AttemptResult:
        received_ns = time.time_ns()
        self._pool.release(proc, reusable=True)
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
        if message.get("op") == "done":
            result = message.get("result")
            return AttemptResult(
                Outcome.SUCCEEDED,
                result=dict(result) if isinstance(result, Mapping) else {},
                body_started_ns=started_ns,
                overhead_ns=overhead,
            )
        return AttemptResult(
            Outcome.FAILED,
            error=str(message.get("error") or "error"),
            error_types=tuple(str(t) for t in message.get("error_types") or ()),
            body_started_ns=started_ns,
            overhead_ns=overhead,
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
