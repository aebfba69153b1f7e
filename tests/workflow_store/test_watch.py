"""WatchSchedules over real gRPC: history first, then live changes, from any replica."""

from __future__ import annotations

import ctypes
import os
import signal
import threading
from datetime import timedelta
from pathlib import Path

import grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from tests.harness.store import register_job_type, schedule_msg
from tests.helpers import eventually, fresh


class Watcher:
    """Consumes one WatchSchedules stream on a thread."""

    def __init__(self, stub, since: int = 0) -> None:
        self.call = stub.WatchSchedules(api.WatchSchedulesRequest(since_revision=since), timeout=60)
        self.received: list = []
        self.ended: BaseException | None = None
        self.thread = threading.Thread(target=self._consume, daemon=True)
        self.thread.start()

    def _consume(self) -> None:
        try:
            for resp in self.call:
                self.received.append(resp.schedule)
        except grpc.RpcError as exc:
            self.ended = exc

    def seen(self) -> list[tuple[str, int, bool, bool]]:
        return [(s.schedule_id, s.revision, s.paused, s.deleted) for s in self.received]

    def cancel(self) -> None:
        self.call.cancel()
        self.thread.join(timeout=10)


def _create(stub, job: str) -> api.CreateScheduleResponse:
    return stub.CreateSchedule(api.CreateScheduleRequest(schedule=schedule_msg(fresh("w"), job)))


def test_watch_streams_history_then_new_changes(stub):
    # Given two schedules, one of them deleted
    job = register_job_type(stub)
    a = _create(stub, job).schedule
    b = _create(stub, job).schedule
    gone = stub.DeleteSchedule(api.DeleteScheduleRequest(schedule_id=b.schedule_id)).schedule

    # When a watch starts from revision 0
    watcher = Watcher(stub)
    try:
        # Then it first gets every schedule's latest state, oldest change first
        history = [
            (a.schedule_id, a.revision, False, False),
            (b.schedule_id, gone.revision, False, True),
        ]
        eventually(lambda: watcher.seen() == history, timeout=30, what="history")

        # And changes made after it started arrive as they happen
        c = _create(stub, job).schedule
        paused = stub.PauseSchedule(
            api.PauseScheduleRequest(schedule_id=a.schedule_id, note="hold")
        ).schedule
        live = [
            (c.schedule_id, c.revision, False, False),
            (a.schedule_id, paused.revision, True, False),
        ]
        eventually(lambda: watcher.seen() == history + live, timeout=30, what="live changes")
        assert watcher.received[-1].pause_note == "hold"
        assert watcher.received[-2].spec == c.spec
    finally:
        watcher.cancel()

    # And a cancelled watch ends promptly
    assert not watcher.thread.is_alive()
    assert watcher.ended is not None and watcher.ended.code() == grpc.StatusCode.CANCELLED


def test_watch_from_a_revision_skips_older_changes(stub):
    job = register_job_type(stub)
    a = _create(stub, job).schedule
    b = _create(stub, job).schedule

    watcher = Watcher(stub, since=a.revision)
    try:
        eventually(
            lambda: watcher.seen() == [(b.schedule_id, b.revision, False, False)], timeout=10
        )
    finally:
        watcher.cancel()


def test_watch_sees_changes_written_by_another_replica(start_store):
    # Given two store processes on one database, and a watch on the first
    first = start_store()
    second = start_store()
    watching, writing = first.stub(), second.stub()
    job = register_job_type(writing)
    watcher = Watcher(watching)
    try:
        # When the second replica creates a schedule
        created = _create(writing, job).schedule

        # Then the first replica's watch delivers it (it re-reads the database)
        eventually(
            lambda: watcher.seen() == [(created.schedule_id, created.revision, False, False)],
            timeout=5,
            what="change from the other replica",
        )
    finally:
        watcher.cancel()


def test_sigterm_stops_the_store_with_open_watches(store, stub):
    # Given a store with an open watch stream
    register_job_type(stub)
    watcher = Watcher(stub)
    eventually(lambda: watcher.thread.is_alive(), timeout=5)

    # When it is asked to stop
    code = store.terminate(timeout=(timedelta(seconds=2) + timedelta(seconds=8)).total_seconds())

    # Then it exits cleanly, and the stream ends
    assert code == 0, store.log()
    watcher.thread.join(timeout=10)
    assert not watcher.thread.is_alive()
    assert "stopped" in store.log()


def test_a_sigterm_the_kernel_hands_to_another_thread_still_stops_the_store(store):
    # Given a running store, and one of its threads other than the main one that does
    # not block SIGTERM (the kernel may deliver a process's signal to any such thread)
    pid = store.popen.pid
    others = [tid for tid in _threads(pid) if tid != pid and not _blocks_sigterm(pid, tid)]
    assert others, "the store runs no other thread that takes SIGTERM"

    # When SIGTERM is sent to that thread alone (tgkill, as the kernel may choose)
    _tgkill(pid, others[0], signal.SIGTERM)

    # Then the store still stops gracefully, within its grace period
    code = store.popen.wait(timeout=20)
    assert code == 0, store.log()
    assert "stopped" in store.log()


def _threads(pid: int) -> list[int]:
    return sorted(int(tid) for tid in os.listdir(f"/proc/{pid}/task"))


def _blocks_sigterm(pid: int, tid: int) -> bool:
    status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
    blocked = next(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk:"))
    return bool(int(blocked, 16) & (1 << (signal.SIGTERM - 1)))


def _tgkill(pid: int, tid: int, signum: int) -> None:
    """A signal to one thread of another process (Linux ``tgkill``)."""
    numbers = {"x86_64": 234, "aarch64": 131}
    machine = os.uname().machine
    assert machine in numbers, f"tgkill's syscall number on {machine} is not known here"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(numbers[machine], pid, tid, signum) != 0:
        raise OSError(ctypes.get_errno(), "tgkill failed")
