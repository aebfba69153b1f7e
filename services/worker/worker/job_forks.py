"""Job processes forked from a server that imported the job runner's libraries once.

A job process started as a new interpreter (``python -P -m worker.job_runner``) costs
about 0.19 s of CPU before it is ready, nearly all of it imports (the settings,
OpenTelemetry, the job context); a worker preparing 16 processes for an instant spends
3 s of a core on them, and on a busy host they are not ready when the instant comes.
Forked from multiprocessing's fork server, which imported those libraries once
(``PRELOAD``), a process is ready in about a tenth of that: what is left is its own
set-up (logging, tracing) and the job modules, which are imported in each process,
never in the server, so no job's import-time state (a connection, a thread) is shared.

The fork server never starts a thread or opens a connection. It is started by the
pool's first process, with the worker's environment, and exits when the worker does
(its end of a pipe closes); its children die with it (``die_with_parent``). Each child
gets the worker's pipes as stdin and stdout, the worker's stderr, the pool's
environment, and ``sys.path`` as ``python -P`` would build it.

The child is tracked as the suite tracks a forked service (``cronwave_core.forked.
ForkedProcess``), with the pipes as its stdin and stdout.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import multiprocessing.connection
import os
import sys
import threading
from collections.abc import Mapping
from multiprocessing import popen_forkserver, spawn
from typing import Any

from cronwave_core.forked import ForkedProcess, set_python_path

#: What the fork server imports once: everything ``worker.job_body`` needs.
PRELOAD = (
    "worker.job_runner",
    "worker.job_body",
    "opentelemetry.sdk.trace.export",
    "cronwave_core.heap_preloaded",  # last: freezes what the others built (shared for good)
)
#: The name a forked job process gives itself (/proc/PID/comm): its command line is
#: the fork server's.
PROCESS_NAME = b"cronwave-job"
_PR_SET_NAME = 15

_lock = threading.Lock()
_started = False


def _fork_server() -> None:
    global _started
    with _lock:
        if not _started:
            multiprocessing.get_context("forkserver").set_forkserver_preload(list(PRELOAD))
            _started = True


class _Popen(popen_forkserver.Popen):
    """The fork server's start of a child, except that the child does not import this
    process's main script again, as multiprocessing would have it do: the worker's
    is a console script (``worker``, ``cronwave worker``) whose imports are the worker
    itself, and a job process runs the job runner alone."""

    def _launch(self, process_obj: Any) -> None:
        with _launching:
            spawn.get_preparation_data = _without_main
            try:
                super()._launch(process_obj)  # type: ignore[misc]
            finally:
                spawn.get_preparation_data = _preparation_data


_launching = threading.Lock()
_preparation_data = spawn.get_preparation_data


def _without_main(name: str) -> dict[str, Any]:
    data: dict[str, Any] = _preparation_data(name)
    data.pop("init_main_from_name", None)
    data.pop("init_main_from_path", None)
    return data


class _JobProcess(multiprocessing.context.ForkServerProcess):
    @staticmethod
    def _Popen(process_obj: Any) -> _Popen:
        return _Popen(process_obj)


def fork_job_process(env: Mapping[str, str]) -> ForkedProcess:
    """A job process with ``env``, forked from the fork server, its stdin and stdout
    pipes to this process."""
    _fork_server()
    child_in, to_child = os.pipe()
    from_child, child_out = os.pipe()
    try:
        process = _JobProcess(
            target=_serve,
            args=(_Fd(child_in), _Fd(child_out), dict(env), os.getcwd()),
            name="cronwave-job",
            daemon=False,
        )
        process.start()
    except BaseException:
        for fd in (to_child, from_child):
            os.close(fd)
        raise
    finally:
        os.close(child_in)
        os.close(child_out)
    # The pool stops what it starts; multiprocessing would otherwise wait for it when
    # the worker exits.
    multiprocessing.process._children.discard(process)  # type: ignore[attr-defined]
    args = ["worker.job_runner", "(forked)"]
    return ForkedProcess(process, args, os.fdopen(to_child, "wb"), os.fdopen(from_child, "rb"))


class _Fd:
    """A file descriptor handed to the forked child (passed with the fork request)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        from multiprocessing.reduction import DupFd

        return (_detach, (DupFd(self.fd),))


def _detach(dup: Any) -> int:
    return int(dup.detach())


def _serve(stdin: int, stdout: int, env: dict[str, str], cwd: str) -> None:
    """In the child: what ``python -P -m worker.job_runner`` with these pipes and
    ``env`` would set up, then the job runner."""
    os.dup2(stdin, 0)
    os.dup2(stdout, 1)
    for fd in (stdin, stdout):
        if fd > 2:
            os.close(fd)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(_PR_SET_NAME, PROCESS_NAME, 0, 0, 0)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the process's own)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    set_python_path(env, cwd)
    from worker.job_runner import main

    os.environ.clear()
    os.environ.update(env)  # CRONWAVE_JOB_PARENT_PID: still the worker (jobs may ask)
    os.chdir(cwd)
    sys.argv = [sys.executable]
    main(parent_pid=os.getppid())  # the fork server, which exits when the worker does
