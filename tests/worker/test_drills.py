"""The worker's pause drill holds: the thread that pauses the process goes on only
after the process has been resumed, however late the kernel gets round to stopping it.

A SIGSTOP a process sends itself is taken by one thread the kernel picks (the main
thread, when idle), which then stops the others; until that thread runs, the sender
runs on. Here the main thread is made the last to get a CPU (SCHED_IDLE, on a core a
busy process holds), as a loaded machine makes it, and the sending thread writes a
mark the moment the pause returns: the mark must not appear while the process is
stopped, and must appear once it is resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.processes import ProcessTable, group_stopped
from tests.helpers import eventually

pytestmark = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="needs two cores: one for each thread"
)

# The pausing thread on one core; the main thread, which the kernel hands the SIGSTOP,
# on the other, at idle priority behind a busy process.
_PAUSER = """
import os, sys, threading
from pathlib import Path
from worker.drills import GroupPause

main_core, pauser_core, mark = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
group = GroupPause()
os.sched_setaffinity(0, {main_core})
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))

def pause() -> None:
    os.sched_setaffinity(0, {pauser_core})
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    paused = group.pause()
    partial = mark.with_suffix('.partial')  # the mark appears whole, never empty
    partial.write_text(str(paused.total_seconds()))
    partial.rename(mark)

threading.Thread(target=pause).start()
threading.Event().wait(120)
"""
_HOG = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"


@pytest.fixture
def table() -> Iterator[ProcessTable]:
    table = ProcessTable("the pause drill's processes")
    yield table
    table.close([table.kill])  # the busy process never ends by itself


def test_the_pausing_thread_goes_on_only_after_the_process_is_resumed(
    table: ProcessTable, tmp_path: Path
) -> None:
    main_core, pauser_core = sorted(os.sched_getaffinity(0))[:2]
    table.spawn([sys.executable, "-c", _HOG, str(main_core)])
    mark = tmp_path / "resumed"
    # Given a multi-threaded process whose main thread is the last to get a CPU
    proc = table.spawn(
        [sys.executable, "-c", _PAUSER, str(main_core), str(pauser_core), str(mark)],
        stderr=subprocess.PIPE,
    )

    # When a thread of it pauses the process group
    eventually(
        lambda: group_stopped(proc.pid) or proc.poll() is not None,
        timeout=30,
        what="every thread of the process stopped",
    )
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""

    # Then nothing after the pause runs while the process is stopped ...
    for _ in range(20):  # a window of 20 x 50 ms in which the pause must hold
        assert group_stopped(proc.pid)
        assert not mark.exists(), "the pausing thread went on before the process was resumed"
        time.sleep(0.05)
    # ... and it goes on once resumed, having been paused all that time
    os.killpg(proc.pid, signal.SIGCONT)
    eventually(mark.exists, timeout=30, what="the pausing thread resumed")
    assert float(mark.read_text()) >= 0.5
