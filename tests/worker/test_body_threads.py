"""Body threads: reused after a body ends, never after a stop, and a stop reaches only
the body it was meant for."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tests.helpers import eventually
from worker.body_threads import BodyTask, BodyThreads


class Stop(Exception):
    pass


def _run(threads: BodyThreads, fn: Callable[[], None]) -> tuple[int, threading.Event]:
    """Start ``fn`` and wait for it to end; the thread it ran on, and its end."""
    ended = threading.Event()
    seen: list[int] = []

    def body() -> None:
        seen.append(threading.get_ident())
        try:
            fn()
        finally:
            ended.set()

    threads.start(body, "job-test")
    assert ended.wait(10)
    return seen[0], ended


def test_a_thread_that_finished_a_body_runs_the_next_one() -> None:
    threads = BodyThreads()

    first, _ = _run(threads, lambda: None)
    eventually(lambda: threads.idle() == 1)
    second, _ = _run(threads, lambda: None)

    assert first == second
    assert threads.started_threads == 1


def test_a_stopped_body_gets_the_stop_and_its_thread_is_not_reused() -> None:
    threads = BodyThreads()
    caught: list[BaseException] = []
    running = threading.Event()
    ended = threading.Event()
    bodies_threads: list[threading.Thread] = []

    def body() -> None:
        bodies_threads.append(threading.current_thread())
        running.set()
        try:
            for _ in range(10_000):  # bounded: stopped long before the end
                time.sleep(0.001)
        except Stop as exc:
            caught.append(exc)
        finally:
            ended.set()

    task = threads.start(body, "job-stopped")
    assert running.wait(10)
    task.stop(Stop)
    assert ended.wait(10)
    assert [type(e) for e in caught] == [Stop]

    # The next body runs on a new thread, and is not hit by anything meant for the last
    _run(threads, lambda: bodies_threads.append(threading.current_thread()))
    stopped_thread, next_thread = bodies_threads
    assert next_thread is not stopped_thread  # (an OS thread id may be reused)
    assert threads.started_threads == 2
    eventually(lambda: not stopped_thread.is_alive())


def test_a_stop_after_the_body_ended_changes_nothing() -> None:
    threads = BodyThreads()
    ended = threading.Event()
    task = threads.start(ended.set, "job-done")
    assert ended.wait(10)
    eventually(lambda: threads.idle() == 1)

    task.stop(Stop)  # too late: the body is done and its thread is idle

    hits: list[BaseException] = []
    turns: list[int] = []

    def next_body() -> None:
        # An exception raised into a thread lands at its next Python instructions: a
        # stop on its way would hit one of these turns
        try:
            for turn in range(1000):
                turns.append(turn)
        except Stop as exc:
            hits.append(exc)

    _run(threads, next_body)
    assert hits == [] and len(turns) == 1000
    assert threads.started_threads == 1


def test_a_body_stopped_before_it_began_does_not_run() -> None:
    threads = BodyThreads()
    ran: list[str] = []
    task = BodyTask(lambda: ran.append("ran"), "job-early")

    task.stop(Stop)  # no thread runs it yet: nothing is raised anywhere
    threads._serve(task)  # the thread that would have run it

    assert ran == []
    assert task.done and task.stopped
    assert threads.idle() == 0  # that thread retired


def test_idle_threads_end_after_the_idle_timeout() -> None:
    threads = BodyThreads(idle_timeout=0.05)

    _run(threads, lambda: None)

    eventually(lambda: threads.idle() == 0)
    _run(threads, lambda: None)
    assert threads.started_threads == 2


def test_at_most_keep_idle_threads_wait() -> None:
    threads = BodyThreads(keep_idle=2)
    release = threading.Event()
    started = [threading.Event() for _ in range(4)]
    ran_on: list[threading.Thread] = []

    def body(event: threading.Event) -> None:
        ran_on.append(threading.current_thread())
        event.set()
        release.wait(10)

    for event in started:
        threads.start(lambda e=event: body(e), "job-many")
    assert all(event.wait(10) for event in started)
    release.set()

    # Then two of the four threads wait, idle, and the other two have ended (so none
    # of them can become idle later)
    eventually(lambda: sum(t.is_alive() for t in ran_on) == 2, timeout=10, what="two threads ended")
    assert threads.idle() == 2
