"""Threads for job bodies run in the worker's own process, kept for reuse.

Starting a thread for every attempt costs an OS thread and a Python thread state each
time; at hundreds of runs a second that is a visible share of the worker's CPU. Here a
thread that finished a body waits, idle, for the next one (up to ``keep_idle`` of
them, each for at most ``idle_timeout``).

A body is stopped (its duration limit passed, or a newer attempt took the run over)
by an exception raised asynchronously in its thread. Such an exception lands between
two Python instructions, possibly after the body returned, so a thread whose body
was stopped is never reused: the stop and the body's end are settled under the
task's lock, and the thread retires, swallowing a stop still on its way.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from dramatiq.threading import raise_thread_exception

#: Idle threads kept for reuse, at most.
KEEP_IDLE = 256
#: An idle thread not given a body for this long ends.
IDLE_TIMEOUT = 30.0


class BodyTask:
    """One body handed to ``BodyThreads``; ``stop`` it to interrupt it."""

    __slots__ = ("done", "fn", "ident", "lock", "name", "stopped")

    def __init__(self, fn: Callable[[], None], name: str) -> None:
        self.fn = fn
        self.name = name
        self.lock = threading.Lock()
        self.ident: int | None = None  # the thread running it, once it runs
        self.done = False
        self.stopped = False

    def stop(self, reason: type[BaseException]) -> None:
        """Raise ``reason`` in the body's thread if the body is still running; a body
        that has not begun will not run. No effect once the body has ended."""
        with self.lock:
            if self.done or self.stopped:
                return
            self.stopped = True
            if self.ident is not None:
                raise_thread_exception(self.ident, reason)


class _Idle:
    """An idle thread's slot: a body is handed over by setting ``task`` and
    releasing ``ready``."""

    __slots__ = ("ready", "task")

    def __init__(self) -> None:
        self.ready = threading.Lock()
        self.ready.acquire()
        self.task: BodyTask | None = None


class BodyThreads:
    """Runs bodies on daemon threads, reusing idle ones."""

    def __init__(self, keep_idle: int = KEEP_IDLE, idle_timeout: float = IDLE_TIMEOUT) -> None:
        self._keep_idle = keep_idle
        self._idle_timeout = idle_timeout
        self._lock = threading.Lock()
        self._idle: list[_Idle] = []
        self.started_threads = 0  # threads started so far (for tests and status)

    def start(self, fn: Callable[[], None], name: str) -> BodyTask:
        """Run ``fn()`` on an idle thread, or a new one."""
        task = BodyTask(fn, name)
        with self._lock:
            slot = self._idle.pop() if self._idle else None
            if slot is None:
                self.started_threads += 1
        if slot is not None:
            slot.task = task
            slot.ready.release()
        else:
            threading.Thread(target=self._serve, args=(task,), name=name, daemon=True).start()
        return task

    def idle(self) -> int:
        with self._lock:
            return len(self._idle)

    def _serve(self, task: BodyTask | None) -> None:
        # A stop that arrives after its body ended lands here, and the thread retires.
        with contextlib.suppress(BaseException):
            while task is not None:
                with task.lock:
                    if task.stopped:  # stopped before it began
                        task.done = True
                        return
                    task.ident = threading.get_ident()
                threading.current_thread().name = task.name
                # The body is wrapped by its caller, which keeps its outcome; nothing
                # it raises is this thread's concern.
                with contextlib.suppress(BaseException):
                    task.fn()
                with task.lock:
                    task.done = True
                    if task.stopped:
                        return
                task = self._next()

    def _next(self) -> BodyTask | None:
        """Wait, idle, for the next body; None when there are enough idle threads
        already or none came in time."""
        slot = _Idle()
        with self._lock:
            if len(self._idle) >= self._keep_idle:
                return None
            self._idle.append(slot)
        if slot.ready.acquire(timeout=self._idle_timeout):
            return slot.task
        with self._lock:
            if slot in self._idle:
                self._idle.remove(slot)
                return None
        # Handed a body just as the wait ended: it is released at once.
        slot.ready.acquire()
        return slot.task


#: The worker process's body threads.
BODIES = BodyThreads()
