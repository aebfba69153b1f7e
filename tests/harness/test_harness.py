"""The leak guard on real processes: a process group with a child, a stop that fails,
an orphaned child whose parent was killed, and what is not ours left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cronwave_core.suite import Proc, SuiteConfig
from tests.harness.processes import ProcessTable, read_stat
from tests.harness.suites import TrackedSuite
from tests.helpers import eventually

# A parent that starts a sleeping child (in its own process group, as a worker starts
# its job processes), prints the child's pid, and sleeps.
PARENT = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(120)\n"
)


def running(pid: int) -> bool:
    stat = read_stat(pid)
    return stat is not None and stat.running


def start_parent(table: ProcessTable) -> tuple[subprocess.Popen[str], int]:
    parent = table.spawn(
        [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    )
    assert parent.stdout is not None
    return parent, int(parent.stdout.readline())


def stop(popen: subprocess.Popen[str]) -> None:
    """Stop only the top-level process, as a stop that forgets the children would."""
    popen.terminate()
    popen.wait(timeout=10)


@pytest.fixture
def table() -> Iterator[ProcessTable]:
    table = ProcessTable("the harness test's processes", settle=1.0)
    try:
        yield table
    finally:
        table.kill()  # whatever a failing test left: no process outlives it


def test_the_table_finds_a_process_and_the_child_it_started(table: ProcessTable) -> None:
    # Given a parent that started a child
    parent, child = start_parent(table)
    # Then both are the table's, and only the parent was recorded
    assert table.live() == sorted([parent.pid, child])
    assert table.pids == [parent.pid]


def test_a_failing_stop_leaves_no_process_of_any_stop_behind(table: ProcessTable) -> None:
    # Given two parents, each with a child
    first, first_child = start_parent(table)
    second, second_child = start_parent(table)
    called = []

    def failing_stop() -> None:
        called.append("first")
        raise RuntimeError("the first stop failed")

    def second_stop() -> None:
        called.append("second")
        stop(second)

    # When the first stop raises and the second stops only its top-level process
    with pytest.raises(BaseExceptionGroup) as caught:
        table.close([failing_stop, second_stop])

    # Then the second stop still ran, and both the stop's error and the leftovers fail
    assert called == ["first", "second"]
    errors = caught.value.exceptions
    assert [type(e) for e in errors] == [RuntimeError, AssertionError]
    assert str(errors[0]) == "the first stop failed"
    left = str(errors[1])
    assert left.startswith("the harness test's processes left running: ")
    for pid in (first.pid, first_child, second_child):
        assert f"{pid} (" in left, left
    # and nothing is left alive: not the stopped one's child, not the other's group
    for pid in (first.pid, first_child, second.pid, second_child):
        assert not running(pid), pid
    assert table.live() == []


def test_an_orphan_whose_parent_was_killed_is_still_found_and_reported(
    table: ProcessTable,
) -> None:
    # Given a parent killed -9, so its child is handed to init but stays in its group
    parent, child = start_parent(table)
    parent.kill()
    parent.wait(timeout=10)

    def orphaned() -> bool:
        stat = read_stat(child)
        return stat is not None and stat.running and stat.ppid != parent.pid

    eventually(orphaned, what="the child handed to init")

    # When the table is checked
    with pytest.raises(AssertionError, match=rf"left running: \['{child} \("):
        table.assert_none_left()

    # Then the orphan was named and killed
    assert not running(child)


def test_a_clean_stop_passes_and_what_is_not_ours_is_left_alone(
    table: ProcessTable, tmp_path: Path
) -> None:
    # Given a process of the table and one started by nobody's table, its own session
    parent, child = start_parent(table)
    stranger = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
    )
    try:
        # When every process of the table is stopped, its child with its group
        table.close([lambda: os.killpg(parent.pid, signal.SIGTERM), lambda: parent.wait(10)])
        # Then the check passes, and the stranger was not touched
        assert not running(child)
        assert running(stranger.pid)
    finally:
        stranger.kill()
        stranger.wait(timeout=10)


class FirstStopFails(TrackedSuite):
    def stop_proc(self, proc: Proc) -> None:
        if proc.name == "last":
            raise RuntimeError(f"could not stop {proc.name}")
        super().stop_proc(proc)


def test_a_suite_whose_first_stop_fails_still_stops_the_others(
    table: ProcessTable, tmp_path: Path
) -> None:
    # Given a suite with two processes, each a parent with a child
    suite = FirstStopFails(SuiteConfig(data_dir=tmp_path, ports={}), table)
    for name in ("first", "last"):
        proc = Proc(name, [sys.executable, "-c", PARENT], dict(os.environ), tmp_path / name)
        suite._spawn(proc)
        suite.procs[name] = proc
    first = suite.procs["first"]
    eventually(lambda: len(table.live()) == 4, what="both parents and children")

    # When stopping the one stopped first (the last started) fails
    with pytest.raises(RuntimeError, match="could not stop last"):
        suite.stop()

    # Then the other was stopped all the same
    assert not first.alive()
    # and the table reports and kills what the failed stop left
    with pytest.raises(AssertionError, match="left running"):
        table.close()
    assert table.live() == []
