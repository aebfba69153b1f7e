"""Runs claimed ahead of their fire time wait here, not in a consumer thread.

With the dispatch lead, a run's message arrives, and the run is claimed, before its
fire time. Holding it in the consumer's thread until then would take that thread from
other messages, so a burst of N runs due at one instant would need N consumer threads,
each polling the broker while idle. Instead the claimed run goes into a timer heap; a
moment before its fire time (``release_ahead``) it is handed to a thread of a pool
sized for bursts, which runs the attempt, and the body still starts at the fire time,
not before: it waits at the process's fire gate (``worker.timing.FireGate``), which
releases every body of an instant together. Idle pool threads block without polling.

Exactly once is unchanged: the run was claimed (its attempt token is this worker's)
before it entered the heap. Its message is acknowledged when the consumer's thread
returns, so a worker that dies while holding runs leaves them WAITING (claimed, the
body not started) with a heartbeat that lapses; the store hands them out again then,
as for a worker that dies mid-run. A held run's attempt beats while it waits (its
lease in the worker's liveness, ``worker.liveness``), as a running one does, however
long it is held; the run turns RUNNING when its body's start is reported (the next
beat after it, within the heartbeat interval or ``cancel_check``). A worker that
stops gracefully hands every run still held back instead (``stop``: each one's
``on_stop``, which gives the run back to the store and queues its message again).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

log = logging.getLogger("cronwave.worker")

#: Pool threads: runs released within the same moment that can start together.
DEFAULT_THREADS = 1024
#: With job processes a released run's thread waits, blocked, for its body's process
#: (``PROCESS_RELEASE_AHEAD``): the runs of a crowded instant each need one before it.
PROCESS_THREADS = 8192
#: How long before its release instant a run leaves the heap for a pool thread, so the
#: thread is running (and the attempt set up) when the instant comes.
DEFAULT_RELEASE_AHEAD = timedelta(seconds=2)
#: With job processes, a run leaves the heap as soon as it is this close: its attempt
#: is set up at once and its run queued on a job process, which starts it at its fire
#: time (``worker.job_body``), so the set-up of a thousand runs is long over by then.
PROCESS_RELEASE_AHEAD = timedelta(seconds=10)


class HeldRuns:
    """A timer heap of claimed runs and the pool that runs them when due."""

    def __init__(
        self,
        threads: int = DEFAULT_THREADS,
        release_ahead: timedelta = DEFAULT_RELEASE_AHEAD,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if threads < 1:
            raise ValueError("HeldRuns needs at least one thread")
        self.release_ahead = release_ahead
        self._now = now
        # (release instant, tie-break, run, on_stop)
        self._heap: list[tuple[datetime, int, Callable[[], None], Callable[[], None]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopping = False
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="held-run")
        self._timer = threading.Thread(target=self._release_loop, name="held-runs", daemon=True)
        self._timer.start()

    def hold(
        self,
        release_at: datetime,
        run: Callable[[], None],
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        """Run ``run()`` on a pool thread ``release_ahead`` before ``release_at``; if
        the worker stops first, ``on_stop()`` instead (default: ``run``)."""
        instead = on_stop or run
        with self._cond:
            if self._stopping:
                self._submit(instead)
                return
            entry = (release_at - self.release_ahead, next(self._seq), run, instead)
            heapq.heappush(self._heap, entry)
            self._cond.notify()

    def __len__(self) -> int:
        with self._cond:
            return len(self._heap)

    def stop(self) -> int:
        """Stop holding: every run still held gets its ``on_stop`` now, on a pool
        thread, and so does a run held from now on. Returns how many were held; does
        not wait for them (``join``)."""
        with self._cond:
            self._stopping = True
            due, self._heap = self._heap, []
            self._cond.notify()
        for entry in sorted(due, key=lambda entry: entry[:2]):
            self._submit(entry[3])
        return len(due)

    def join(self, timeout: timedelta) -> bool:
        """After ``stop``: wait up to ``timeout`` for the pool's threads to finish what
        they were given; True when they did."""
        waiter = threading.Thread(target=self._pool.shutdown, name="held-runs-stop", daemon=True)
        waiter.start()
        waiter.join(timeout.total_seconds())
        return not waiter.is_alive()

    def _release_loop(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    return
                if not self._heap:
                    self._cond.wait()
                    continue
                wait = (self._heap[0][0] - self._now()).total_seconds()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                run = heapq.heappop(self._heap)[2]
            self._submit(run)

    def _submit(self, run: Callable[[], None]) -> None:
        try:
            self._pool.submit(_logged, run)
        except RuntimeError:  # the pool has shut down: a late hold still runs
            threading.Thread(target=_logged, args=(run,), name="held-run", daemon=True).start()


def _logged(run: Callable[[], None]) -> None:
    try:
        run()
    except Exception:  # a held run has no consumer thread to report its failure
        log.exception("a held run failed")
