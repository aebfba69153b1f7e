"""A job process's spill file (``worker.held_lines``) is not left behind when the
process dies before its worker took the file: the pool removes the file of a process it
gave up on, and a pool that starts removes what older ones left."""

from __future__ import annotations

import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from cronwave_core.errors import Unavailable
from tests.helpers import REPO, eventually
from tests.reliability.pools import open_pool
from worker.held_lines import spill_path
from worker.job_process import SPILL_SWEEP_MARGIN, JobProcessPool

# Pids no process here has: the files only need names of the spill files' form.
_NOBODY = 4_000_000_000 + os.getpid()


def _touch(path: str, age: timedelta) -> None:
    Path(path).write_text("")
    then = time.time() - age.total_seconds()
    os.utime(path, (then, then))


def test_a_starting_pool_removes_the_spill_files_nobody_took(
    tmp_path: Path, namespace: str
) -> None:
    # Given a spill file left long ago (its process killed before it was ready), and
    # one just made (a process of another worker, starting now)
    stale, fresh = spill_path(_NOBODY), spill_path(_NOBODY + 1)
    _touch(stale, timedelta(seconds=60) + 2 * SPILL_SWEEP_MARGIN)  # past the start timeout
    _touch(fresh, timedelta(0))
    try:
        # When a pool starts its processes
        with open_pool(tmp_path, namespace, processes=1):
            # Then the old file is gone and the young one is left to its owner
            assert not os.path.exists(stale)
            assert os.path.exists(fresh)
    finally:
        for path in (stale, fresh):
            if os.path.exists(path):
                os.unlink(path)


# A "job process" that makes its spill file, as a real one does first, writes its pid
# where the test reads it, then never reports ready.
_SILENT = """
import os, sys, time
sys.path.insert(0, {worker!r})
from worker.held_lines import Spill
Spill()
open({pid_file!r}, "w").write(str(os.getpid()))
time.sleep(60)
"""


def test_a_process_that_never_reported_ready_leaves_no_spill_file(tmp_path: Path) -> None:
    # Given a pool whose process makes its spill file and then says nothing
    pid_file = tmp_path / "pid"
    script = _SILENT.format(worker=str(REPO / "services" / "worker"), pid_file=str(pid_file))
    pool = JobProcessPool(
        warm=1,
        max_processes=1,
        argv=[sys.executable, "-c", script],
        start_timeout=timedelta(seconds=3),
    )
    try:
        pool.start(wait=False)
        eventually(
            lambda: pid_file.exists() and pid_file.read_text(),
            timeout=20,
            what="the process started",
        )
        path = spill_path(int(pid_file.read_text()))
        assert os.path.exists(path)  # the fault: a spill file made, no ready said

        # When the pool gives up on it after its start timeout
        with pytest.raises(Unavailable, match="did not start"):
            pool.wait_ready(1)
    finally:
        pool.close()
    # Then its spill file is gone with it
    eventually(lambda: not os.path.exists(path), timeout=10, what="its spill file removed")
