"""The worker's side of its job processes: one process per running job body, kept
warm in a pool so that starting a run costs a pipe write, not a Python start-up.

A job process that finished a run cleanly goes back to the pool; one that was
stopped, died, or ran many jobs is retired and replaced in the background.
"""

from __future__ import annotations

import contextlib
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
from worker.job_forks import fork_job_process
from worker.job_runner import PARENT_PID_VAR

log = logging.getLogger("cronwave.worker")

#: A process is retired after this many runs, so what a job leaks does not pile up.
MAX_RUNS_PER_PROCESS = 1000
_READ_CHUNK = 65536


class JobProcessDied(CronwaveError):
    """The job process exited (or closed its pipe) in the middle of a run: killed by
    the OOM killer, a segfault in C code, or ``os._exit`` in the job."""


def job_process_argv() -> list[str]:
    # -P: the worker's working directory must not shadow a module of ours.
    return [sys.executable, "-P", "-m", "worker.job_runner"]


class JobProcess:
    """One ``python -m worker.job_runner`` and the pipes to it."""

    def __init__(self, popen: subprocess.Popen[bytes] | ForkedProcess) -> None:
        self.popen = popen
        self.runs = 0
        self._buffer = b""
        self._lines: deque[bytes] = deque()
        self._eof = False

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

    def receive(self, timeout: float) -> dict[str, Any] | None:
        """The next protocol message, or None when none arrives within ``timeout``
        seconds; ``JobProcessDied`` at end of file."""
        assert self.popen.stdout is not None
        fd = self.popen.stdout.fileno()
        deadline = time.monotonic() + max(timeout, 0.0)
        while not self._lines:
            if self._eof:
                raise JobProcessDied(f"job process {self.pid} {self.exit_description()}")
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0.0))
            if not ready:
                return None
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                self._eof = True
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
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


class JobProcessPool:
    """The job processes of one worker: at most ``max_processes`` at a time.

    ``warm`` processes are started with the worker and kept ready: each one taken is
    replaced in the background, and one released after a clean run stays ready, so the
    pool grows to the concurrency the worker uses, up to ``max_processes``; past that a
    run waits for a process to come back (the worker's capacity for job bodies).
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
        self._free = threading.Condition(mutex)
        self._idle: deque[JobProcess] = deque()
        self._live = 0  # processes that exist or are asked for: at most max_processes
        self._wanted = 0  # starts asked of the spawner, not yet forked
        self._starting = 0  # forked, not yet ready
        self._failures = 0
        self._last_error = ""
        self._closed = False
        self._spawner = threading.Thread(target=self._spawn_loop, name="job-spawner", daemon=True)

    def start(self, wait: bool = True) -> None:
        """Start the warm processes; with ``wait``, until they are ready (or fail)."""
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
            while len(self._idle) < count and time.monotonic() < deadline:
                if self._failures > failures and not (self._wanted or self._starting):
                    break
                self._lock.wait(0.1)
            if len(self._idle) < count:
                raise Unavailable(f"job processes did not start: {self._last_error or 'timed out'}")

    def acquire(
        self, wait: float | None = None, abandon: Callable[[], bool] = lambda: False
    ) -> JobProcess | None:
        """A ready job process: a warm one, else one started now, else (at
        ``max_processes``) the next one released. None when ``wait`` seconds pass
        first, or within half a second of ``abandon()`` turning true (the worker is
        stopping); ``Unavailable`` when processes cannot start or the pool is closed."""
        deadline = time.monotonic() + (
            self.start_timeout.total_seconds() if wait is None else max(wait, 0.0)
        )
        with self._lock:
            asked = False
            failures = self._failures
            while True:
                if self._closed:
                    raise Unavailable("the job process pool is closed (the worker is stopping)")
                if abandon():
                    return None
                while self._idle:
                    proc = self._idle.popleft()
                    if proc.alive():
                        self._refill()
                        return proc
                    self._live -= 1  # died while idle
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
                self._free.wait(min(left, 0.5))

    def release(self, proc: JobProcess, *, reusable: bool) -> None:
        """Give ``proc`` back after a run; it is retired unless ``reusable``."""
        proc.runs += 1
        with self._lock:
            keep = (
                reusable and not self._closed and proc.alive() and proc.runs < MAX_RUNS_PER_PROCESS
            )
            if keep:
                self._idle.append(proc)
                self._free.notify()
                return
            self._live -= 1
            self._refill()
            self._lock.notify_all()
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
            return len(self._idle)

    def close(self) -> None:
        """Retire every idle process; processes still running a job are stopped by
        their supervisors."""
        with self._lock:
            self._closed = True
            idle = list(self._idle)
            self._idle.clear()
            self._live -= len(idle)
            self._lock.notify_all()
            self._free.notify_all()
        for proc in idle:
            proc.retire()

    # ----------------------------------------------------------------------------------
    def _ask(self) -> None:
        """One more process (lock held)."""
        self._live += 1
        self._wanted += 1
        self._lock.notify_all()

    def _refill(self) -> None:
        """Ask for a replacement when fewer than ``warm`` are ready or coming (lock
        held)."""
        coming = len(self._idle) + self._wanted + self._starting
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
            hello = proc.receive(self.start_timeout.total_seconds())
        except JobProcessDied as exc:
            hello = {"error": str(exc)}
        if hello is None or hello.get("op") != "ready":
            proc.stop(timedelta(0))
            self._failed(f"job process {proc.pid} did not report ready: {hello!r}")
            return
        with self._lock:
            self._starting -= 1
            closed = self._closed
            if closed:
                self._live -= 1
            else:
                self._idle.append(proc)
            self._lock.notify_all()
            self._free.notify()
        if closed:
            proc.retire()

    def _failed(self, error: str) -> None:
        log.error("job process did not start: %s", error)
        with self._lock:
            self._starting -= 1
            self._live -= 1
            self._failures += 1
            self._last_error = error
            self._lock.notify_all()
            self._free.notify_all()
