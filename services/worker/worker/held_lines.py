"""The lines a job process holds back, kept where they outlive it.

While more bodies are due at once, a job process holds back its ``started`` and
outcome lines (``worker.job_body.Channel``), so the bodies of an instant begin before
the worker's threads wake to read them. A held line would die with a process that a
body kills (``os._exit``, a segfault, the OOM killer), and its worker would take a run
whose body began, or even ended, for one that never began, and hand it to another
process to begin again: a second execution.

So every line the process holds back is also appended to a spill file of its own
(``Spill``), a write that wakes nobody, and the file is emptied each time the held
lines have gone down the pipe: it holds exactly what the pipe does not have yet. The
worker opens the file once the process is ready and unlinks it at once (the open file
lives on until both ends close it, so nothing is left behind when either is killed; a
process that exits cleanly removes its own if the worker never took it; the file of
one killed before its worker took it is removed by the next pool to start, ``sweep``).
When the process's pipe ends, its worker reads the spilled lines as if they had come
down the pipe (``SpillReader``): a body that began is known to have begun, and one
that ended, how it ended. A line written to the pipe just before the process died may
come twice; a run's supervisor takes the first.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import tempfile
import time
import weakref
from datetime import timedelta
from typing import Any

#: Where spills are made: memory when the machine has it (no disk write per line).
_SHM = "/dev/shm"
_PREFIX = "cronwave-held-"


def spill_path(pid: int) -> str:
    """The spill file of job process ``pid`` (both ends compute it alike)."""
    return os.path.join(_spill_dir(), f"{_PREFIX}{pid}")


def _spill_dir() -> str:
    return _SHM if os.access(_SHM, os.W_OK) else tempfile.gettempdir()


def sweep(older_than: timedelta) -> int:
    """Remove the spill files left by job processes killed before their worker took
    them; returns how many. A file lives only from its process's start to its
    worker's reading ``ready``, which a pool waits for at most its start timeout
    before it stops the process: one unchanged for longer (``older_than``) is
    nobody's, whichever worker, or pid namespace, its process belonged to."""
    cutoff = time.time() - older_than.total_seconds()
    removed = 0
    for path in glob.glob(os.path.join(_spill_dir(), f"{_PREFIX}*")):
        with contextlib.suppress(OSError):  # gone meanwhile, or another user's
            if os.stat(path).st_mtime < cutoff:
                os.unlink(path)
                removed += 1
    return removed


def forget(pid: int) -> None:
    """Remove job process ``pid``'s spill file by name, if its worker never took it
    (the process stops cleanly, or its pool gave up waiting for its ``ready``)."""
    with contextlib.suppress(OSError):
        os.unlink(spill_path(pid))


class Spill:
    """The job process's end (its writes are made under its channel's lock)."""

    def __init__(self) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC | os.O_CLOEXEC
        self._pid = os.getpid()
        self._fd = os.open(spill_path(self._pid), flags, 0o600)
        self._empty = True

    def add(self, line: str) -> None:
        """A line held back (ending in a newline)."""
        os.write(self._fd, line.encode())
        self._empty = False

    def clear(self) -> None:
        """The held lines went down the pipe."""
        if not self._empty:
            os.ftruncate(self._fd, 0)
            self._empty = True

    def remove(self) -> None:
        """At a clean exit: the file's name, if its worker never took it (it stopped
        the process before reading its ``ready``)."""
        forget(self._pid)


class SpillReader:
    """The worker's end, for one job process: opened (and unlinked) once the process
    is ready. Without the file (a job process that is not ours, as some tests start)
    there is nothing to read."""

    def __init__(self, pid: int) -> None:
        self._fd: int | None = None
        path = spill_path(pid)
        with contextlib.suppress(OSError):
            self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            os.unlink(path)
        self._closer = weakref.finalize(self, _close, self._fd)

    def messages(self) -> list[dict[str, Any]]:
        """The lines the process held and never wrote to its pipe, once it has ended
        (read once; the file is closed then). A line cut short by its death is left."""
        if self._fd is None:
            return []
        chunks = []
        offset = 0
        while chunk := os.pread(self._fd, 65536, offset):
            chunks.append(chunk)
            offset += len(chunk)
        self._closer()
        self._fd = None
        out = []
        for line in b"".join(chunks).splitlines():
            with contextlib.suppress(ValueError):
                message = json.loads(line)
                if isinstance(message, dict):
                    out.append(message)
        return out


def _close(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
