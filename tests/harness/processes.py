"""Every process a test starts, by pid, and every process those start in turn.

A process is started in a session of its own, so it leads a process group; the job
processes a worker forks stay in the worker's group even after the worker died and
they were handed to init. ``ProcessTable`` records each pid it starts together with
the process's start time, so that a pid the kernel later gives to an unrelated process
is not taken for one of ours, and finds at any moment every live process that is one
of them, a member of one of their groups, or a descendant of either.

A fixture that starts processes owns one table and ends with ``close(stops)``: every
stop is run even when an earlier one raises, then whatever is still alive is killed and
reported as a failure, then the stops' own errors are raised.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cronwave_core.forked import ForkedProcess

#: How long processes that were told to stop may take to be gone (a job process
#: notices its worker's death on its next poll of the parent).
SETTLE = 10.0


@dataclass(frozen=True)
class ProcStat:
    """One line of ``/proc/<pid>/stat``, the fields the table reads."""

    pid: int
    state: str
    ppid: int
    pgrp: int
    start: int  # clock ticks after boot: with the pid, names one process for good

    @property
    def running(self) -> bool:
        return self.state not in ("Z", "X")


def read_stat(pid: int, thread: int | None = None) -> ProcStat | None:
    """The process's line, or one of its threads' (``/proc/<pid>/task/<thread>``)."""
    path = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    # The command name is in parentheses and may itself hold spaces or parentheses.
    fields = text[text.rindex(")") + 2 :].split()
    return ProcStat(pid, fields[0], int(fields[1]), int(fields[2]), int(fields[19]))


def group_stopped(pgid: int) -> bool:
    """Whether every thread of every live process of group ``pgid`` is stopped (state
    ``T``, or ``t`` under a tracer): a pause that holds, not one that is only asked for.
    A group with no live member is not stopped."""
    members = [stat.pid for stat in process_list().values() if stat.pgrp == pgid and stat.running]
    states = []
    for pid in members:
        with contextlib.suppress(OSError):  # gone meanwhile
            threads = [read_stat(pid, int(tid)) for tid in os.listdir(f"/proc/{pid}/task")]
            states += [stat.state for stat in threads if stat is not None]
    return bool(states) and all(state in "Tt" for state in states)


def process_list() -> dict[int, ProcStat]:
    """Every process of the machine now."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := read_stat(int(entry))) is not None:
            table[stat.pid] = stat
    return table


def describe(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"{pid} (gone)"
    return f"{pid} ({' '.join(a.decode(errors='replace') for a in argv if a)[:120]})"


def raise_all(errors: Sequence[BaseException], what: str) -> None:
    """Raise ``errors``: nothing when there are none, the one, or a group of them."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise BaseExceptionGroup(what, list(errors))


def run_all(stops: Iterable[Callable[[], object]]) -> list[BaseException]:
    """Call every one of ``stops``, whatever the earlier ones raise; what they raised."""
    errors: list[BaseException] = []
    for stop in stops:
        try:
            stop()
        except Exception as exc:
            errors.append(exc)
    return errors


P = TypeVar("P", bound="subprocess.Popen[Any] | ForkedProcess")


class ProcessTable:
    """The processes one fixture started, and everything they started."""

    def __init__(self, what: str = "processes", settle: float = SETTLE) -> None:
        self.what = what
        self.settle = settle  # how long stopped processes may take to be gone
        self._roots: dict[int, int | None] = {}  # pid -> start time (None: gone at once)
        self._popens: list[subprocess.Popen[Any] | ForkedProcess] = []

    # recording -------------------------------------------------------------------
    def track(self, popen: P) -> P:
        """Record a process started elsewhere (it should lead its own session), or
        forked from the fork server (``cronwave_core.forked``)."""
        stat = read_stat(popen.pid)
        self._roots[popen.pid] = stat.start if stat is not None else None
        self._popens.append(popen)
        return popen

    def spawn(self, argv: Sequence[str], **popen_kwargs: Any) -> subprocess.Popen[Any]:
        """``subprocess.Popen(argv, ...)`` in a session of its own, recorded."""
        popen_kwargs.setdefault("start_new_session", True)
        return self.track(subprocess.Popen(list(argv), **popen_kwargs))

    @property
    def pids(self) -> list[int]:
        """Every pid this table started, alive or not."""
        return list(self._roots)

    # finding ---------------------------------------------------------------------
    def live(self) -> list[int]:
        """Every running process that is ours: a recorded one, a member of its process
        group, or a descendant of either."""
        table = process_list()
        roots = {
            pid for pid, start in self._roots.items() if pid in table and table[pid].start == start
        }
        # A group whose leader is gone is still ours while it has members: the kernel
        # gives no new process a pid that a live group still bears.
        groups = roots | {pid for pid in self._roots if pid not in table}
        ours = roots | {pid for pid, stat in table.items() if stat.pgrp in groups}
        children: dict[int, list[int]] = {}
        for stat in table.values():
            children.setdefault(stat.ppid, []).append(stat.pid)
        stack = list(ours)
        while stack:
            for child in children.get(stack.pop(), []):
                if child not in ours:
                    ours.add(child)
                    stack.append(child)
        return sorted(pid for pid in ours if table[pid].running)

    # ending ----------------------------------------------------------------------
    def kill(self) -> None:
        """SIGKILL every live process of ours, and reap the ones this process started."""
        for _ in range(5):  # a process forking while it is killed leaves a new child
            live = self.live()
            if not live:
                break
            for pid in live:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            self._reap(timeout=2.0)
        self._reap(timeout=5.0)

    def _reap(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for popen in self._popens:
            if popen.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    popen.wait(timeout=max(deadline - time.monotonic(), 0.01))
        _wait_gone(self.live, deadline)

    def assert_none_left(self, settle: float | None = None) -> None:
        """Fail, naming them, when processes of ours are still running ``settle``
        seconds from now (they are killed first, so none outlives the failure)."""
        deadline = time.monotonic() + (self.settle if settle is None else settle)
        left = _wait_gone(self.live, deadline)
        if left:
            named = [describe(pid) for pid in left]
            self.kill()
            raise AssertionError(f"{self.what} left running: {named}")

    def close(self, stops: Iterable[Callable[[], object]] = ()) -> None:
        """Run every stop, then check that nothing of ours is left (killing what is),
        then raise what failed: the stops' errors and the leftovers together."""
        errors = run_all(stops)
        try:
            self.assert_none_left()
        except AssertionError as exc:
            errors.append(exc)
        raise_all(errors, f"stopping {self.what}")


def _wait_gone(live: Callable[[], list[int]], deadline: float) -> list[int]:
    """Wait until ``live()`` finds nothing or ``deadline`` passes; what it last found.
    Each look reads the whole process table, so the looks back off from 20 ms to
    200 ms instead of keeping a core busy while a suite shuts down."""
    pause = 0.02
    while (left := live()) and time.monotonic() < deadline:
        time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
        pause = min(pause * 2, 0.2)
    return left


def job_processes(namespace: str) -> list[int]:
    """Pids of job processes started for ``namespace`` that are still alive, whoever
    started them (a worker process, or a pool inside the test's own process).

    A job process started as a new interpreter has ``worker.job_runner`` in its
    command line and the namespace in its environment. One forked from its worker's
    fork server names itself (``cronwave-job``) and has the server's command line and
    environment: the server's is its worker's, and a pool inside this process has
    a fork server started by this process."""
    table = process_list()
    marker = f"CRONWAVE_NAMESPACE={namespace}".encode()

    def environ(pid: int) -> list[bytes]:
        try:
            return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            return []

    found = []
    for pid, stat in table.items():
        if not stat.running:
            continue
        if _forked_job(pid):
            server = table.get(stat.ppid)
            ours = server is not None and server.ppid == os.getpid()
            if ours or marker in environ(stat.ppid):
                found.append(pid)
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        fresh = b"worker.job_runner" in cmdline and b"multiprocessing.forkserver" not in cmdline
        if fresh and marker in environ(pid):
            found.append(pid)
    return found


def _forked_job(pid: int) -> bool:
    """A job process forked from its worker's fork server names itself (its command
    line is the server's)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "cronwave-job"
    except OSError:
        return False
