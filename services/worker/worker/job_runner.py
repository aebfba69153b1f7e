"""A job process: ``python -m worker.job_runner``, started and owned by a worker.

It runs job bodies one at a time, so the worker can kill one that overruns its
duration limit even while it is stuck in a system call or in C code, which no
exception raised into a thread can stop. The protocol is JSON lines, data only:

- worker -> job process, on stdin: ``{"op": "run", "ticket": N, ...the run...}`` (any
  number queued), ``{"op": "skip", "ticket": N}`` (take a run not begun out of the
  queue) and ``{"op": "cancel", "ticket": N}`` (the running body's ``ctx.cancelled``);
- job process -> worker, on the stdout it was started with: ``{"op": "ready"}`` once,
  then per run, each line with its ticket: ``{"op": "started"}`` when its body begins,
  any number of ``{"op": "beat", "checkpoint": ...}`` and ``{"op": "progress", ...}``,
  and one ``{"op": "done", "result": ...}``, ``{"op": "error", "error": ...}``,
  ``{"op": "released"}`` (the worker is stopping) or ``{"op": "skipped"}``.

The job's own prints go to stderr (the worker's log), never into the protocol.

The process dies with its worker: PR_SET_PDEATHSIG on Linux, and a watchdog on the
parent pid everywhere. Both are set up here, before the job modules are imported
(which takes most of a start-up), so a process started just before its worker died
does not linger. This module imports nothing heavy for the same reason.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time

from cronwave_core.settings import WorkerSettings

PARENT_PID_VAR = "CRONWAVE_JOB_PARENT_PID"
_PR_SET_PDEATHSIG = 1
_WATCHDOG_INTERVAL_S = 0.5


def die_with_parent(parent_pid: int) -> None:
    """Exit when the worker that started this process is gone."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if not parent_pid:
        return
    if os.getppid() != parent_pid:
        os._exit(0)  # the worker died before the line above

    def watchdog() -> None:
        while True:
            time.sleep(_WATCHDOG_INTERVAL_S)
            if os.getppid() != parent_pid:
                os._exit(0)

    threading.Thread(target=watchdog, name="parent-watchdog", daemon=True).start()


def main(parent_pid: int | None = None) -> None:
    """Serve bodies; die with ``parent_pid`` (default: the worker,
    ``CRONWAVE_JOB_PARENT_PID``; a forked job process's parent is its fork server)."""
    die_with_parent(WorkerSettings.from_env().parent_pid if parent_pid is None else parent_pid)
    from worker.job_body import serve  # the job modules: the slow part of a start-up

    serve()


if __name__ == "__main__":
    main()
