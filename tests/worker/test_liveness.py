"""A worker's liveness: one Heartbeats call per tick carries every attempt it holds;
each attempt gets its own item's answer (a refusal supersedes it alone, a cancel sets
its signal); checkpoints, progress and the body's start ride along without anyone
waiting, and an attempt's end waits only for its own last checkpoint and progress.

The store's side here is a recording function answering as the store would (the real
store's ``Heartbeats`` is tested in tests/workflow_store/test_heartbeats.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import grpc
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from cronwave_core.domain.progress import Progress
from tests.helpers import eventually
from worker.cancellation import CancelSignal
from worker.liveness import Liveness
from worker.supervisor import BeatResult

TOKEN = "0" * 32
TICK = timedelta(milliseconds=50)
AT = datetime(2030, 1, 1, 2, 0, 5, tzinfo=UTC)


class FakeStore:
    """Answers every item OK, but as ``refuse`` and ``cancel`` say per run id;
    ``down`` makes the whole call fail (the store restarting)."""

    def __init__(self) -> None:
        self.requests: list[store_pb.HeartbeatsRequest] = []
        self.refuse: set[str] = set()
        self.cancel: set[str] = set()
        self.down = False
        self._lock = threading.Lock()

    def __call__(self, request: store_pb.HeartbeatsRequest) -> store_pb.HeartbeatsResponse:
        with self._lock:
            copy = store_pb.HeartbeatsRequest()
            copy.CopyFrom(request)
            self.requests.append(copy)
        if self.down:
            raise Unreachable()
        response = store_pb.HeartbeatsResponse()
        for beat in request.beats:
            item = response.results.add()
            if beat.run_id in self.refuse:
                item.error.CopyFrom(
                    common_pb2.ItemError(
                        code=grpc.StatusCode.FAILED_PRECONDITION.value[0],
                        message=f"attempt_token: not the current attempt of run '{beat.run_id}'",
                    )
                )
            else:
                item.beat.SetInParent()
                if beat.run_id in self.cancel:
                    item.beat.cancel_requested = True
                    item.beat.cancel_grace.FromSeconds(5)
                    item.beat.cancel_reason = "operator"
        return response

    def items(self, run_id: str) -> list[store_pb.HeartbeatRequest]:
        with self._lock:
            return [b for r in self.requests for b in r.beats if b.run_id == run_id]


class Unreachable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "store restarting"


def with_liveness(test: Callable[[FakeStore, Liveness], None]) -> None:
    store = FakeStore()
    liveness = Liveness(store)
    try:
        test(store, liveness)
    finally:
        liveness.close()


def test_one_call_per_tick_carries_every_attempt_held() -> None:
    def test(store: FakeStore, liveness: Liveness) -> None:
        # Given 300 attempts held at slightly different moments
        leases = [liveness.hold(f"run-{i}", TOKEN, TICK, CancelSignal()) for i in range(300)]
        # When several ticks pass
        eventually(lambda: len(store.requests) >= 6, timeout=10, what="six calls")
        # Then the attempts beat together: after the first calls, every call carries all
        calls = list(store.requests)
        assert all(len(r.beats) == 300 for r in calls[2:]), [len(r.beats) for r in calls]
        assert {b.run_id for b in calls[-1].beats} == {lease.run_id for lease in leases}
        # ... and a lease dropped is beaten no more
        for lease in leases[:100]:
            lease.drop()
        seen = len(store.requests)
        eventually(lambda: len(store.requests) >= seen + 2, timeout=10, what="two more calls")
        assert len(store.requests[-1].beats) == 200

    with_liveness(test)


def test_a_refusal_supersedes_its_attempt_alone_and_a_cancel_sets_its_signal() -> None:
    def test(store: FakeStore, liveness: Liveness) -> None:
        # Given three attempts, the store refusing one and cancelling another
        store.refuse.add("zombie")
        store.cancel.add("cancelled")
        signals = {name: CancelSignal() for name in ("zombie", "cancelled", "fine")}
        leases = {name: liveness.hold(name, TOKEN, TICK, sig) for name, sig in signals.items()}
        # When a tick has answered them
        eventually(
            lambda: leases["zombie"].beat("") is BeatResult.SUPERSEDED,
            timeout=10,
            what="the refused attempt superseded",
        )
        eventually(signals["cancelled"].is_set, timeout=10, what="the cancel signalled")
        # Then the others are still theirs, the fine one not cancelled
        assert leases["cancelled"].beat("") is BeatResult.OK
        assert leases["fine"].beat("") is BeatResult.OK
        assert not signals["fine"].is_set()
        assert signals["cancelled"].reason == "operator"
        # ... and a superseded attempt is not beaten again
        refused = len(store.items("zombie"))
        seen = len(store.requests)
        eventually(lambda: len(store.requests) >= seen + 3, timeout=10, what="three more calls")
        assert len(store.items("zombie")) == refused

    with_liveness(test)


def test_a_watched_lease_wakes_its_supervisor_when_refused_or_cancelled_only() -> None:
    def test(store: FakeStore, liveness: Liveness) -> None:
        # Given three watched attempts, the store refusing one and cancelling another
        store.refuse.add("zombie")
        store.cancel.add("cancelled")
        woken: dict[str, threading.Event] = {}
        for name in ("zombie", "cancelled", "fine"):
            woken[name] = threading.Event()
            liveness.hold(name, TOKEN, TICK, CancelSignal()).watch(woken[name].set)
        # When ticks have answered them, then the refused and the cancelled are woken
        assert woken["zombie"].wait(10), "the refused attempt's supervisor not woken"
        assert woken["cancelled"].wait(10), "the cancelled attempt's supervisor not woken"
        # ... and the fine one is not, however many ticks go by
        seen = len(store.requests)
        eventually(lambda: len(store.requests) >= seen + 3, timeout=10, what="three more calls")
        assert not woken["fine"].is_set()
        # ... and a watch begun after the refusal wakes at once
        late = threading.Event()
        lease = liveness.hold("zombie", TOKEN, TICK, CancelSignal())
        eventually(lambda: lease.beat("") is BeatResult.SUPERSEDED, timeout=10, what="refused")
        lease.watch(late.set)
        assert late.is_set()

    with_liveness(test)


def test_checkpoints_and_the_start_ride_along_and_are_not_sent_again() -> None:
    def test(store: FakeStore, liveness: Liveness) -> None:
        # Given an attempt beating rarely (its interval is long)
        lease = liveness.hold("run-1", TOKEN, timedelta(seconds=30), CancelSignal())
        # When its body starts and saves two checkpoints, without waiting for the store
        assert lease.report_start(1_000_000_000) is BeatResult.OK
        assert lease.beat('{"step": 1}') is BeatResult.OK
        assert lease.beat('{"step": 2}') is BeatResult.OK
        # Then within the checkpoint flush one call carries the newest and the start
        items = eventually(lambda: store.items("run-1"), timeout=5, what="the flush")
        assert items[0].checkpoint_json == '{"step": 2}'
        assert items[0].body_started_at.ToNanoseconds() == 1_000_000_000
        eventually(lambda: lease.start_recorded, timeout=5, what="the start answered")
        # ... and the next call carries only what is new
        lease.beat('{"step": 3}')
        assert lease.flush() is BeatResult.OK
        sent = store.items("run-1")
        assert [item.checkpoint_json for item in sent] == ['{"step": 2}', '{"step": 3}']
        assert not sent[-1].HasField("body_started_at")

    with_liveness(test)


def test_a_start_reaches_the_store_at_once_not_at_the_next_beat() -> None:
    def test(store: FakeStore, liveness: Liveness) -> None:
        # Given an attempt held for its fire time, beating rarely (its interval is long),
        # its first beat sent: the store has it WAITING
        lease = liveness.hold("run-1", TOKEN, timedelta(seconds=30), CancelSignal())
        lease.flush()
        sent = len(eventually(lambda: store.items("run-1"), timeout=5, what="the first beat"))
        assert not store.items("run-1")[0].HasField("body_started_at")
        # When its body starts
        assert lease.report_start(1_000_000_000) is BeatResult.OK
        # Then a call carries the start within moments, not 30 s later: the run shows
        # RUNNING while its body runs
        items = eventually(
            lambda: store.items("run-1")[sent:], timeout=2, interval=0.01, what="the start"
        )
        assert items[0].body_started_at.ToNanoseconds() == 1_000_000_000
        eventually(lambda: lease.start_recorded, timeout=2, what="the start answered")

    with_liveness(test)


def test_an_attempts_end_waits_for_its_last_checkpoint_through_a_store_restart() -> None:
    def test(store: FakeStore, liveness: Liveness) -> None:
        # Given an attempt with a checkpoint the store does not have, the store down
        lease = liveness.hold("run-1", TOKEN, timedelta(seconds=30), CancelSignal())
        store.down = True
        lease.beat('{"step": 7}')
        eventually(lambda: store.items("run-1"), timeout=5, what="a failed call")
        # When the attempt ends while the store comes back
        threading.Timer(0.3, lambda: setattr(store, "down", False)).start()
        lease.drop()
        # Then its end returned once the store had the checkpoint, and it beats no more
        assert store.items("run-1")[-1].checkpoint_json == '{"step": 7}'
        assert not store.down
        assert len(liveness) == 0

    with_liveness(test)


def test_the_newest_progress_rides_along_once_and_an_end_sends_the_last() -> None:
    def test(store: FakeStore, liveness: Liveness) -> None:
        # Given an attempt beating rarely (its interval is long)
        lease = liveness.hold("run-1", TOKEN, timedelta(seconds=30), CancelSignal())
        # When its body reports its progress three times, without waiting for the store
        for done in (10, 20, 30):
            lease.report_progress(Progress(done, 100, "customers charged", AT))
        # Then within the checkpoint flush one call carries the newest, whole
        items = eventually(lambda: store.items("run-1"), timeout=5, what="the flush")
        assert len(items) == 1
        sent = Progress.from_proto(items[0].progress)
        assert sent == Progress(30, 100, "customers charged", AT)
        # ... a call with nothing new carries none again
        lease.beat('{"step": 1}')
        assert lease.flush() is BeatResult.OK
        assert not store.items("run-1")[-1].HasField("progress")
        # ... and the attempt's end sends the last one before it returns
        lease.report_progress(Progress(100, 100, "customers charged", AT))
        lease.drop()
        assert store.items("run-1")[-1].progress.done == 100

    with_liveness(test)


def test_a_run_held_for_its_fire_time_beats_seldom_and_once_just_before_it() -> None:
    # Given a run held 2 s before its fire time, its held gap 1 s, beside a run that
    # runs now; both beat every 50 ms once begun
    store, held_at = FakeStore(), []

    def send(request: store_pb.HeartbeatsRequest) -> store_pb.HeartbeatsResponse:
        if any(b.run_id == "held" for b in request.beats):
            held_at.append(time.monotonic())
        return store(request)

    liveness = Liveness(send)
    try:
        gap, fire_in = timedelta(seconds=1), timedelta(seconds=2)
        began = time.monotonic()
        held = liveness.hold("held", TOKEN, TICK, CancelSignal(), fire_in=fire_in, held_gap=gap)
        liveness.hold("running", TOKEN, TICK, CancelSignal())

        # When its fire time comes and its body begins
        eventually(lambda: time.monotonic() - began >= 2.3, timeout=10, what="the fire time")
        before = [t - began for t in held_at]
        held.report_start(time.time_ns())
        eventually(lambda: len(held_at) >= len(before) + 3, timeout=10, what="beats once begun")

        # Then while held it beat about once a held gap, not every 50 ms as the
        # running one did, and once within the interval before its fire time (where a
        # cancel still reaches it before its body would begin)
        assert len(store.items("running")) >= 10
        assert 1 <= len([t for t in before if t < 1.85]) <= 3, before
        assert any(t >= 1.85 for t in before), before
    finally:
        liveness.close()
