"""A worker's graceful stop, as the runs it handles see it.

On SIGTERM the worker stops taking messages, then hands back every run it holds, so
that another worker resumes each one at once instead of after its heartbeat lapses:

1. ``begin``: from now on a message that reaches the worker is put back on its queue
   unclaimed, and every attempt running is asked to stop (``Stoppable.release``): the
   job sees ``WorkerStopping`` at its next checkpoint (the checkpoint is kept), and a
   body still waiting for its fire time never starts;
2. ``drain`` waits up to the grace period for them; an attempt still running then is
   stopped without the job's help (``Stoppable.force_release``: its job process is
   killed, or the exception is raised into its thread);
3. each attempt that stopped ends RELEASED, and its run goes back to the store
   (``ReleaseRun``: PENDING, due now, checkpoint kept, the attempt's token void) with a
   new message on its queue; an attempt that finished meanwhile completes as usual.

A run counts as handled from the moment its message reaches the worker
(``enter``) until its attempt was completed or handed back (``leave``), so ``drain``
returns only when no run is left between a claim and its hand-back, or when its time is
up. No gRPC here: the hand-back is the caller's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Protocol

RUNNING, RELEASE, FORCE = 0, 1, 2


class Stoppable(Protocol):
    """What a supervisor of one attempt offers the worker's stop; both calls come from
    another thread, may come twice, and return at once."""

    def release(self) -> None:
        """Ask the body to stop at its next checkpoint."""

    def force_release(self) -> None:
        """The grace period is over: stop the body now."""


class AttemptStop:
    """One handled run's link to the worker's stop. Its supervisor ``attach``es once
    it exists; a stop asked for before then reaches it as it attaches."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._lock = threading.Lock()
        self._level = RUNNING
        self._target: Stoppable | None = None

    @property
    def requested(self) -> bool:
        """True once the worker asked this run back."""
        with self._lock:
            return self._level >= RELEASE

    def attach(self, target: Stoppable) -> None:
        with self._lock:
            self._target = target
            level = self._level
        _apply(target, RUNNING, level)

    def escalate(self, level: int) -> None:
        with self._lock:
            before = self._level
            if level <= before:
                return
            self._level = level
            target = self._target
        if target is not None:
            _apply(target, before, level)


def _apply(target: Stoppable, before: int, level: int) -> None:
    """The steps from ``before`` to ``level``, each once."""
    if before < RELEASE <= level:
        target.release()
    if before < FORCE <= level:
        target.force_release()


class Draining:
    """The runs a worker handles, and its stop."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # the handled runs changed
        self._room = threading.Condition(lock)  # room for one more run
        self._level = RUNNING
        self._handled: set[AttemptStop] = set()

    @property
    def stopping(self) -> bool:
        with self._cond:
            return self._level >= RELEASE

    def enter(self, run_id: str, limit: int | None = None) -> AttemptStop:
        """Count ``run_id`` as handled until ``leave``; once the worker is stopping
        the run is asked back as soon as it enters (``AttemptStop.requested``). With
        ``limit``, first wait until fewer than that many runs are handled, or the
        worker is stopping (the message then goes back on its queue): a consumer
        thread enters so before it claims, and a worker never holds more runs than
        it keeps alive (``CRONWAVE_WORKER_MAX_RUNS``). A ``leave`` makes room."""
        stop = AttemptStop(run_id)
        with self._cond:
            while limit is not None and len(self._handled) >= limit and self._level < RELEASE:
                self._room.wait()
            self._handled.add(stop)
            level = self._level
        stop.escalate(level)
        return stop

    def leave(self, stop: AttemptStop) -> None:
        with self._cond:
            self._handled.discard(stop)
            self._cond.notify_all()
            self._room.notify()

    def handled(self) -> list[str]:
        """The runs handled now, by id."""
        with self._cond:
            return sorted(stop.run_id for stop in self._handled)

    def begin(self) -> None:
        """Stop taking runs and ask every running attempt to stop."""
        self._escalate(RELEASE)

    def drain(self, grace: timedelta, force_wait: timedelta) -> list[str]:
        """``begin``, wait up to ``grace`` for every handled run to be done with, stop
        the attempts still running, and wait up to ``force_wait`` more for their
        hand-backs. Returns the runs still handled then (empty: all done)."""
        self.begin()
        if not self._wait_idle(grace):
            self._escalate(FORCE)
            self._wait_idle(force_wait)
        return self.handled()

    def _escalate(self, level: int) -> None:
        with self._cond:
            self._level = max(self._level, level)
            handled = list(self._handled)
            self._room.notify_all()  # a run taken now goes back on its queue
        for stop in handled:
            stop.escalate(level)

    def _wait_idle(self, timeout: timedelta) -> bool:
        deadline = self._monotonic() + timeout.total_seconds()
        with self._cond:
            while self._handled:
                left = deadline - self._monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True
