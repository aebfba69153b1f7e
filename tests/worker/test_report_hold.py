"""A job process's reports while the bodies of an instant begin: ``started`` and outcome
lines sent with ``hold`` wait (so the worker's threads do not take the cores from the
bodies still due), and go out in their order on a flush, with any line not held, or
``REPORT_HOLD_S`` after the first of them; a run queued behind holds its reports only
while it is due."""

from __future__ import annotations

import io
import json
import threading
import time
from datetime import UTC, datetime

from tests.helpers import eventually
from worker.job_body import REPORT_HOLD_S, Channel, RunQueue


class Stream(io.StringIO):
    """What the worker would read, with how many writes it took."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)

    def ops(self) -> list[tuple[str, object]]:
        lines = self.getvalue().splitlines()
        return [(m["op"], m.get("ticket")) for m in map(json.loads, lines)]


def test_held_lines_wait_for_a_flush_and_keep_their_order() -> None:
    stream = Stream()
    channel = Channel(stream)
    first, second = channel.for_ticket(1), channel.for_ticket(2)

    first.send({"op": "started"}, hold=True)
    first.send({"op": "done"}, hold=True)
    second.send({"op": "started"}, hold=True)
    assert stream.ops() == []

    channel.flush()
    assert stream.ops() == [("started", 1), ("done", 1), ("started", 2)]
    assert stream.writes == 1  # one write for the lot


def test_a_line_not_held_takes_the_held_ones_with_it_first() -> None:
    stream = Stream()
    channel = Channel(stream).for_ticket(7)

    channel.send({"op": "started"}, hold=True)
    channel.send({"op": "beat"})  # a body's heartbeat is never held

    assert stream.ops() == [("started", 7), ("beat", 7)]


def test_held_lines_go_out_on_their_own_after_the_bound() -> None:
    stream = Stream()
    channel = Channel(stream)
    threading.Thread(target=channel.keep_flushing, daemon=True).start()
    sent = time.monotonic()

    channel.for_ticket(3).send({"op": "started"}, hold=True)

    eventually(lambda: stream.ops() == [("started", 3)], timeout=5, what="the held line")
    assert time.monotonic() - sent >= REPORT_HOLD_S


def test_a_queue_says_due_only_for_a_run_whose_fire_time_has_come() -> None:
    queue = RunQueue(Channel(Stream()))
    assert not queue.due()
    soon = time.time_ns() + 5_000_000_000
    queue.take({"op": "run", "ticket": 1, "fire_time": _iso(soon)})
    assert not queue.due()
    queue.take({"op": "run", "ticket": 2, "fire_time": _iso(time.time_ns() - 1_000_000)})
    assert queue.due()


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat()
