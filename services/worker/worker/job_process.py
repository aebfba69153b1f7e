"""The worker's side of its job processes: one process per running job body, kept
warm in a pool so that starting a run costs a pipe write, not a Python start-up.

A job process that finished a run cleanly goes back to the pool; one that was
stopped, died, or ran many jobs is retired and replaced in the background.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from cronwave_core.errors import CronwaveError, Unavailable
from cronwave_core.forked import ForkedProcess
from worker import held_lines
from worker.held_lines import SpillReader
from worker.job_forks import fork_job_process
from worker.job_runner import PARENT_PID_VAR

log = logging.getLogger("cronwave.worker")

#: A process is retired after this many runs, so what a job leaks does not pile up.
MAX_RUNS_PER_PROCESS = 1000
#: At most this many runs are queued on one process (the running one included).
MAX_QUEUED = 1024
#: A run due more than this many seconds ahead waits for a process on its way rather
#: than queue past its share (``JobProcessPool.acquire``).
FAIR_AHEAD = 1.0
_READ_CHUNK = 65536
#: A spill file unchanged this long past a pool's start timeout is nobody's.
SPILL_SWEEP_MARGIN = timedelta(seconds=30)


class JobProcessDied(CronwaveError):
    """The job process exited (or closed its pipe) in the middle of a run: killed by
    the OOM killer, a segfault in C code, or ``os._exit`` in the job."""


def job_process_argv() -> list[str]:
    # -P: the worker's working directory must not shadow a module of ours.
    return [sys.executable, "-P", "-m", "worker.job_runner"]


class JobProcess:
    """One job process and the pipes to it.

    Several runs may be queued on it at once (``worker.job_body``): each hand-over gets
    a ticket (``expect``), every line the process writes about a run carries it, and
    a reader thread sorts the lines into each ticket's inbox (``receive``)."""

    def __init__(self, popen: subprocess.Popen[bytes] | ForkedProcess) -> None:
        self.popen = popen
        self.runs = 0
        self.assigned = 0  # runs handed over and not given back (``JobProcessPool``)
        self.retiring = False  # takes no more runs; retired once the last is given back
        self._buffer = b""
        self._lines: deque[bytes] = deque()
        self._eof = False  # its pipe ended and what it held back is sorted (``_read_loop``)
        self._pipe_ended = False
        self._tickets = itertools.count(1)
        # One lock, and a condition per ticket on it: a line wakes only its run's
        # supervisor, not the hundreds queued on the same process.
        self._inbox_lock = threading.Lock()
        self._inboxes: dict[int, _Inbox] = {}
        self._reader: threading.Thread | None = None
        self._spill: SpillReader | None = None  # its held lines, once it is ready

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None and not self._eof

    def send(self, message: Mapping[str, Any]) -> None:
        """Write one protocol line; ``JobProcessDied`` if the process is gone."""
        assert self.popen.stdin is not None
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        try:
            self.popen.stdin.write(data)
            self.popen.stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            raise JobProcessDied(f"job process {self.pid} {self.exit_description()}") from exc

    def expect(self) -> int:
        """A new ticket, whose lines ``receive`` returns from now on."""
        ticket = next(self._tickets)
        with self._inbox_lock:
            self._inboxes[ticket] = _Inbox(self._inbox_lock)
        return ticket

    def forget(self, ticket: int) -> None:
        """Done with ``ticket``: later lines about it are dropped."""
        with self._inbox_lock:
            self._inboxes.pop(ticket, None)

    def start_reading(self) -> None:
        """Sort the process's lines into the tickets' inboxes from now on (after its
        ``ready``, which it sends once its spill file is open), and at the end of its
        pipe the lines it held back and never wrote (``worker.held_lines``)."""
        self._spill = SpillReader(self.pid)
        self._reader = threading.Thread(
            target=self._read_loop, name=f"job-{self.pid}-lines", daemon=True
        )
        self._reader.start()

    def receive(self, ticket: int, timeout: float) -> dict[str, Any] | None:
        """The next message about ``ticket``, or None when none arrives within
        ``timeout`` seconds; ``JobProcessDied`` once the process has closed its pipe
        and nothing about ``ticket`` is left."""
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._inbox_lock:
            while True:
                inbox = self._inboxes.get(ticket)
                if inbox is not None and inbox.lines:
                    return inbox.lines.popleft()
                if inbox is not None and inbox.poked:
                    inbox.poked = False
                    return None
                if self._eof:
                    break
                left = deadline - time.monotonic()
                if left <= 0 or inbox is None:
                    return None
                inbox.arrived.wait(left)
        raise JobProcessDied(f"job process {self.pid} {self.exit_description()}")

    def poke(self, ticket: int) -> None:
        """Wake the supervisor of ``ticket`` as if its wait had run out (what the store
        said of its attempt changed); nothing once the ticket is forgotten."""
        with self._inbox_lock:
            inbox = self._inboxes.get(ticket)
            if inbox is not None:
                inbox.poked = True
                inbox.arrived.notify()

    def poke_last(self) -> None:
        """Wake the supervisor of the run handed over last (the back of the queue),
        as if its wait had run out: a process has gone idle, and a run queued here
        and not begun may move to it at once rather than at its next look."""
        with self._inbox_lock:
            if len(self._inboxes) < 2:  # none queued behind the body running
                return
            inbox = self._inboxes[max(self._inboxes)]
            inbox.poked = True
            inbox.arrived.notify()

    def _read_loop(self) -> None:
        while True:
            try:
                message = self.read_message(None)
            except JobProcessDied as exc:
                if not self._pipe_ended:  # a line that is not protocol: stop trusting it
                    log.error("%s", exc)
                elif self._spill is not None:  # what it held back, before its end is known
                    self._sort(self._spill.messages())
                break
            if message is not None:
                self._sort([message])
        with self._inbox_lock:
            self._eof = True
            for inbox in self._inboxes.values():
                inbox.arrived.notify()
        if self.popen.stdout is not None:
            with contextlib.suppress(OSError):
                self.popen.stdout.close()

    def _sort(self, messages: list[dict[str, Any]]) -> None:
        """Each message into its ticket's inbox (those of forgotten tickets dropped)."""
        with self._inbox_lock:
            for message in messages:
                ticket = message.get("ticket")
                inbox = self._inboxes.get(ticket) if isinstance(ticket, int) else None
                if inbox is not None:
                    inbox.lines.append(message)
                    inbox.arrived.notify()

    def read_message(self, timeout: float | None) -> dict[str, Any] | None:
        """The next protocol line, whatever it is about; None when none arrives within
        ``timeout`` seconds (None: wait); ``JobProcessDied`` at end of file. Only one
        thread reads: the pool's until ``ready``, then the reader (``start_reading``)."""
        assert self.popen.stdout is not None
        fd = self.popen.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        while not self._lines:
            if self._pipe_ended:
                raise JobProcessDied(f"job process {self.pid} {self.exit_description()}")
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except OSError:  # the pipe was closed under us: the process is stopped
                chunk = b""
            if not chunk:
                self._pipe_ended = True
                continue
            self._buffer += chunk
            *complete, self._buffer = self._buffer.split(b"\n")
            self._lines.extend(line for line in complete if line.strip())
        line = self._lines.popleft()
        try:
            message = json.loads(line)
        except ValueError as exc:
            raise JobProcessDied(
                f"job process {self.pid} wrote a line that is not JSON: {line[:200]!r}"
            ) from exc
        if not isinstance(message, dict):
            raise JobProcessDied(f"job process {self.pid} wrote {line[:200]!r}, not an object")
        return message

    def exit_description(self) -> str:
        """How the process ended, e.g. "was killed by SIGKILL" or "exited with code 1"."""
        try:
            code = self.popen.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "closed its pipe but is still running"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"was killed by {name}"
        return f"exited with code {code}"

    def stop(self, grace: timedelta) -> None:
        """SIGTERM (the body gets ``JobStopped``), then SIGKILL after ``grace``; returns
        once the process is gone."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace.total_seconds())
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.popen.kill()
                self.popen.wait(timeout=10)
        self._close_pipes()

    def retire(self) -> None:
        """Let an idle process exit by closing its stdin; kill it if it lingers."""
        if self.popen.stdin is not None:
            with contextlib.suppress(OSError):
                self.popen.stdin.close()
        try:
            self.popen.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout=10)
        self._close_pipes()

    def _close_pipes(self) -> None:
        """Close stdin, and stdout unless the reader thread reads it: the reader closes
        it at end of file (closing it under the reader's ``select`` could hand the
        number to another file)."""
        streams = [self.popen.stdin]
        if self._reader is None:
            streams.append(self.popen.stdout)
        for stream in streams:
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


class _Inbox:
    """The lines about one ticket not read yet, and the condition its reader waits on
    (on the process's one inbox lock)."""

    __slots__ = ("arrived", "lines", "poked")

    def __init__(self, lock: threading.Lock) -> None:
        self.lines: deque[dict[str, Any]] = deque()
        self.arrived = threading.Condition(lock)
        self.poked = False  # woken without a line (``JobProcess.poke_last``)


class JobProcessPool:
    """The job processes of one worker: at most ``max_processes`` at a time.

    ``warm`` processes are started with the worker and kept ready: each one taken is
    replaced in the background, and one released after a clean run stays ready, so the
    pool grows to the concurrency the worker uses, up to ``max_processes``; past that a
    run waits for a process to come back (the worker's capacity for job bodies).
    A run may instead be queued on a busy process (``acquire(queue=True)``, at most
    ``MAX_QUEUED`` a process): the bodies of an instant are then in their processes
    before it, and each process starts its next body the moment one ends, whatever its
    worker is busy with.
    At most ``parallel_starts`` processes start at once (a start is CPU-bound: more at
    a time only slows them all). Each is forked by the pool's own thread, which lives
    as long as the worker, because Linux ties PR_SET_PDEATHSIG to the thread that
    forked.
    """

    def __init__(
        self,
        *,
        warm: int,
        max_processes: int,
        argv: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        start_timeout: timedelta = timedelta(seconds=60),
        parallel_starts: int | None = None,
    ) -> None:
        self.max_processes = max(max_processes, 1)
        self.warm = min(max(warm, 0), self.max_processes)
        # None: forked from the fork server (``worker.job_forks``), as a fresh
        # ``job_process_argv()`` would start; else a new interpreter running ``argv``.
        self.argv = list(argv) if argv else None
        self.env = {**(os.environ if env is None else env), PARENT_PID_VAR: str(os.getpid())}
        self.start_timeout = start_timeout
        self.parallel_starts = max(parallel_starts or os.cpu_count() or 1, 1)
        mutex = threading.Lock()
        self._lock = threading.Condition(mutex)  # the pool's state; the spawner waits here
        # Runs waiting for a process wait here, each woken alone (the longest waiting
        # first) when one becomes free: with hundreds waiting at a burst, waking them
        # all for every process handed back would cost more than the bodies.
        self._free = threading.Condition(mutex)  # for an idle process
        self._slot = threading.Condition(mutex)  # for a place in a process's queue
        self._ready: list[JobProcess] = []  # ready and taking runs, idle or not
        self._live = 0  # processes that exist or are asked for: at most max_processes
        self._wanted = 0  # starts asked of the spawner, not yet forked
        self._starting = 0  # forked, not yet ready
        self._failures = 0
        self._last_error = ""
        self._closed = False
        self._spawner = threading.Thread(target=self._spawn_loop, name="job-spawner", daemon=True)

    def start(self, wait: bool = True) -> None:
        """Start the warm processes; with ``wait``, until they are ready (or fail).
        First the spill files that processes killed before their worker took them left
        behind (``held_lines.sweep``) go."""
        removed = held_lines.sweep(older_than=self.start_timeout + SPILL_SWEEP_MARGIN)
        if removed:
            log.info("removed %d spill files of job processes gone before they were ready", removed)
        self._spawner.start()
        with self._lock:
            for _ in range(self.warm):
                self._ask()
        if wait:
            self.wait_ready(self.warm)

    def wait_ready(self, count: int) -> None:
        """Block until ``count`` processes are ready; ``Unavailable`` when none can
        start (the error of the last attempt says why)."""
        deadline = time.monotonic() + self.start_timeout.total_seconds()
        with self._lock:
            failures = self._failures
            while self._idle() < count and time.monotonic() < deadline:
                if self._failures > failures and not (self._wanted or self._starting):
                    break
                self._lock.wait(0.1)
            if self._idle() < count:
                raise Unavailable(f"job processes did not start: {self._last_error or 'timed out'}")

    def acquire(
        self,
        wait: float | None = None,
        abandon: Callable[[], bool] = lambda: False,
        *,
        queue: bool = False,
        ahead: float = 0.0,
    ) -> JobProcess | None:
        """A ready job process: an idle one, else one started now, else (at
        ``max_processes``) the next one released; with ``queue``, the ready process
        with the fewest runs queued when none is idle (a run due more than
        ``FAIR_AHEAD`` seconds ``ahead`` waits for a process on its way rather than
        queue past its share). None when ``wait`` seconds pass
        first, or within half a second of ``abandon()`` turning true (the worker is
        stopping); ``Unavailable`` when processes cannot start or the pool is closed.
        Each process acquired is given back with ``release``."""
        deadline = time.monotonic() + (
            self.start_timeout.total_seconds() if wait is None else max(wait, 0.0)
        )
        waiting = self._slot if queue else self._free
        with self._lock:
            asked = False
            failures = self._failures
            while True:
                if self._closed:
                    raise Unavailable("the job process pool is closed (the worker is stopping)")
                if abandon():
                    return None
                proc = self._pick(queue, fair=ahead > FAIR_AHEAD)
                if proc is not None:
                    proc.assigned += 1
                    if proc.assigned == 1:
                        self._refill()
                    return proc
                if not asked and self._live < self.max_processes:
                    self._ask()
                    asked = True
                left = deadline - time.monotonic()
                if self._failures > failures and not (self._wanted or self._starting):
                    raise Unavailable(f"job processes do not start: {self._last_error}")
                if left <= 0:
                    if wait is not None:
                        return None
                    raise Unavailable(
                        "no job process became ready within "
                        f"{self.start_timeout.total_seconds():g}s: "
                        f"{self._last_error or f'all {self.max_processes} busy'}"
                    )
                waiting.wait(min(left, 0.5))

    def release(self, proc: JobProcess, *, reusable: bool) -> None:
        """Give ``proc`` back after a run; it is retired unless ``reusable``, once the
        runs queued on it are given back too. A process gone idle wakes a run queued
        on the busiest one, which moves to it if it is due (``ProcessSupervisor``)."""
        proc.runs += 1
        busiest: JobProcess | None = None
        with self._lock:
            proc.assigned -= 1
            if (
                not reusable
                or self._closed
                or not proc.alive()
                or proc.runs >= MAX_RUNS_PER_PROCESS
            ):
                proc.retiring = True
            if not proc.retiring:
                if proc.assigned == 0:
                    self._free.notify()
                    busiest = self._busiest()
                self._slot.notify()
            else:
                if proc in self._ready:
                    self._ready.remove(proc)
                if proc.assigned > 0:
                    return  # its last run's release retires it
                self._live -= 1
                self._refill()
                self._lock.notify_all()
        if busiest is not None:
            busiest.poke_last()  # outside the pool's lock: it takes the process's own
            return
        if proc.retiring:
            threading.Thread(target=proc.retire, name="job-retire", daemon=True).start()

    def prepare(self, count: int) -> None:
        """Have ``count`` processes (at most ``max_processes``) started or starting:
        the worker knows ahead how many bodies an instant needs, and a process started
        at the instant would cost the burst its start-up."""
        with self._lock:
            while not self._closed and self._live < min(count, self.max_processes):
                self._ask()

    def idle_count(self) -> int:
        with self._lock:
            return self._idle()

    def queued_count(self) -> int:
        """Runs handed to the ready processes and not given back (running or queued)."""
        with self._lock:
            return sum(proc.assigned for proc in self._ready)

    def close(self) -> None:
        """Retire every idle process; processes still running a job are stopped by
        their supervisors."""
        with self._lock:
            self._closed = True
            idle = [proc for proc in self._ready if proc.assigned == 0]
            for proc in self._ready:
                proc.retiring = True
            self._ready.clear()
            self._live -= len(idle)
            self._lock.notify_all()
            self._free.notify_all()
            self._slot.notify_all()
        for proc in idle:
            proc.retire()

    def _idle(self) -> int:
        """Ready processes with no run (lock held)."""
        return sum(1 for proc in self._ready if proc.assigned == 0)

    def _busiest(self) -> JobProcess | None:
        """The ready process with the most runs queued behind its body, if any has
        one (lock held)."""
        busiest = max(self._ready, key=lambda proc: proc.assigned, default=None)
        return busiest if busiest is not None and busiest.assigned > 1 else None

    def _pick(self, queue: bool, fair: bool = False) -> JobProcess | None:
        """An idle process, else with ``queue`` the one with the fewest runs queued
        and room for one more (lock held). Processes found dead leave the pool."""
        best: JobProcess | None = None
        for proc in list(self._ready):
            if not proc.alive():
                self._ready.remove(proc)
                proc.retiring = True
                if proc.assigned == 0:  # else its runs' releases retire it
                    self._live -= 1
                    threading.Thread(target=proc.retire, name="job-retire", daemon=True).start()
                continue
            if proc.assigned == 0:
                return proc
            if (
                queue
                and proc.assigned < MAX_QUEUED
                and (best is None or proc.assigned < best.assigned)
            ):
                best = proc
        coming = self._wanted + self._starting
        if best is not None and coming and fair:
            # Processes on their way take their share first: queued on the few ready
            # ones, the runs of an instant claimed while the pool grows would begin
            # one after another there while the new processes stood idle. Only for
            # runs due well ahead: a run due now queues at once (a process replacing
            # one retired under a steady load is no reason to wait).
            total = sum(proc.assigned for proc in self._ready)
            share = -(-(total + 1) // (len(self._ready) + coming))
            if best.assigned >= share:
                return None
        return best

    # ----------------------------------------------------------------------------------
    def _ask(self) -> None:
        """One more process (lock held)."""
        self._live += 1
        self._wanted += 1
        self._lock.notify_all()

    def _refill(self) -> None:
        """Ask for a replacement when fewer than ``warm`` are ready or coming (lock
        held)."""
        coming = self._idle() + self._wanted + self._starting
        if not self._closed and coming < self.warm and self._live < self.max_processes:
            self._ask()

    def _spawn_loop(self) -> None:
        while True:
            with self._lock:
                while not self._closed and (
                    not self._wanted or self._starting >= self.parallel_starts
                ):
                    self._lock.wait()
                if self._closed:
                    return
                self._wanted -= 1
                self._starting += 1
            try:
                popen = self._start_one()
            except Exception as exc:  # OSError; the fork server's own errors besides
                self._failed(f"cannot start {self.argv or job_process_argv()!r}: {exc}")
                time.sleep(1.0)  # do not spin on a broken start-up
                continue
            threading.Thread(
                target=self._await_ready, args=(JobProcess(popen),), name="job-start", daemon=True
            ).start()

    def _start_one(self) -> subprocess.Popen[bytes] | ForkedProcess:
        if self.argv is None:
            return fork_job_process(self.env)
        return subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,  # the worker's own stderr: its log
            env=self.env,
            close_fds=True,
        )

    def _await_ready(self, proc: JobProcess) -> None:
        try:
            hello = proc.read_message(self.start_timeout.total_seconds())
        except JobProcessDied as exc:
            hello = {"error": str(exc)}
        if hello is None or hello.get("op") != "ready":
            proc.stop(timedelta(0))
            held_lines.forget(proc.pid)  # its spill, if it had made one
            self._failed(f"job process {proc.pid} did not report ready: {hello!r}")
            return
        with self._lock:
            self._starting -= 1
            closed = self._closed
            if closed:
                self._live -= 1
            else:
                proc.start_reading()
                self._ready.append(proc)
            busiest = None if closed else self._busiest()
            self._lock.notify_all()
            self._free.notify()
            self._slot.notify_all()  # the runs waiting to queue on it
        if closed:
            proc.retire()
        elif busiest is not None:
            busiest.poke_last()  # a run queued there and due may move to it

    def _failed(self, error: str) -> None:
        log.error("job process did not start: %s", error)
        with self._lock:
            self._starting -= 1
            self._live -= 1
            self._failures += 1
            self._last_error = error
            self._lock.notify_all()
            self._free.notify_all()
            self._slot.notify_all()
