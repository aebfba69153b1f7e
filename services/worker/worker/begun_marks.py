"""Which bodies a job process began, readable after the process died.

A body that kills its process (``os._exit``, a segfault, the OOM killer) may do so
before the process's ``started`` line reached its worker: that line can be held back
while more bodies are due at once (``worker.job_body.Channel``), and a held line dies
with the process. The worker would then take the run for one that never began, and
hand it to another process to begin again: a second execution.

So before each body begins, the process appends its run's ticket to a file of its own
(``mark``): a write to an open file, which wakes nobody and outlives the writer. The
worker opens that file once the process is ready and unlinks it at once (the open
file lives on until both ends close it; nothing is left behind when either is
killed; a process that exits cleanly removes its own if the worker never took it),
and reads it only when the process has died with runs on it (``began``). A
ticket found there began, whether or not its ``started`` line came: its run is not
handed over.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import weakref

#: Where the marks are made: memory when the machine has it (no disk write per body).
_SHM = "/dev/shm"


def marks_path(pid: int) -> str:
    """The marks file of job process ``pid`` (both ends compute it alike)."""
    base = _SHM if os.access(_SHM, os.W_OK) else tempfile.gettempdir()
    return os.path.join(base, f"cronwave-begun-{pid}")


class Marks:
    """The job process's end: ``mark(ticket)`` before each body begins."""

    def __init__(self) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC | os.O_CLOEXEC
        self._fd = os.open(marks_path(os.getpid()), flags, 0o600)

    def mark(self, ticket: object) -> None:
        os.write(self._fd, f"{ticket}\n".encode())

    def remove(self) -> None:
        """At a clean exit: the file's name, if its worker never took it (it stopped
        the process before reading its ``ready``)."""
        with contextlib.suppress(OSError):
            os.unlink(marks_path(os.getpid()))


class BegunRecord:
    """The worker's end, for one job process: opened (and unlinked) once the process
    is ready. Without the file (a job process that is not ours, as some tests start),
    ``began`` knows of nothing, and a run is handed over as its lines say."""

    def __init__(self, pid: int) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._known: set[str] | None = None  # read once the process is gone
        path = marks_path(pid)
        with contextlib.suppress(OSError):
            self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            os.unlink(path)
        # Closed once read after the process ended, else with this record.
        self._closer = weakref.finalize(self, _close, self._fd)

    def began(self, ticket: int, *, gone: bool) -> bool:
        """Whether the body of ``ticket`` began; ``gone``: the process has ended, so
        the record is complete (it is then read once and closed)."""
        with self._lock:
            known = self._known if self._known is not None else self._read()
            if gone and self._known is None:
                self._known = known
                self._close()
        return str(ticket) in known

    def _read(self) -> set[str]:
        if self._fd is None:
            return set()
        chunks = []
        offset = 0
        while chunk := os.pread(self._fd, 65536, offset):
            chunks.append(chunk)
            offset += len(chunk)
        return set(b"".join(chunks).decode(errors="replace").split())

    def _close(self) -> None:
        self._closer()
        self._fd = None


def _close(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
