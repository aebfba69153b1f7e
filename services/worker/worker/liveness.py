"""Liveness per worker: one heartbeat call per tick carries every attempt the worker
holds, however many there are.

An attempt is held from the moment its body is about to be handed out (while it waits
for a job process, at its fire gate, while its body runs) until its outcome is
decided. Each held attempt is a ``Lease`` here. One thread, the ticker, sends a single
``Heartbeats`` call whenever a lease is due (every ``interval`` of its own, the job
type's heartbeat interval or the cancel check, whichever is shorter) and puts every
lease due within half an interval in the same call, so leases taken at different
moments soon beat together: the store sees one call per tick, not one per run. A
newer checkpoint, the body's progress (``JobContext.progress``) or its start rides
along with the next call (a checkpoint or progress within ``checkpoint_flush``; only
the newest of each is sent; the start within ``start_flush``: the store moves the run
from WAITING to RUNNING when it has it, so a held run shows RUNNING as soon as its body
runs, and the starts of a burst released together share their calls); nothing a
supervising thread does waits for the store, so a run waiting for a job process costs
no call, and a job process is never held by one.

Each lease gets its own item's answer: a refusal (a newer attempt owns the run, or it
ended) marks it superseded, which its supervisor sees at its next look and stops the
body; a cancel request sets its ``CancelSignal``. A call that fails (the store is
restarting or slow) is tried again at the next tick; the attempt is safe meanwhile
until its heartbeat timeout, which is several intervals.

``Lease.flush`` is the one call that waits: it sends what the lease holds that the
store does not have yet and returns once answered. An attempt's end uses it (``drop``)
so the newest checkpoint is durable before the outcome goes out: a retry resumes from
it. Flushes of attempts ending together share one call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

import grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from cronwave_core.batching import DEFAULT_MAX_BATCH, results_of
from cronwave_core.convert import duration_to_td
from cronwave_core.domain.progress import Progress
from worker.cancellation import CancelSignal
from worker.store_port import NOT_OURS
from worker.supervisor import BeatResult

log = logging.getLogger("cronwave.worker")

#: A new checkpoint reaches the store within this time even when the heartbeat
#: interval is longer, so a resumed attempt repeats at most this much work.
CHECKPOINT_FLUSH = timedelta(seconds=1)
#: The body's start reaches the store within this time (the run is WAITING until then),
#: however long the heartbeat interval; bodies starting together share the call.
START_FLUSH = timedelta(milliseconds=100)
#: A tick whose call failed is tried again this soon (the store may be restarting).
RETRY_AFTER = timedelta(milliseconds=500)
#: How long an attempt's end waits for its last checkpoint to be sent.
FLUSH_WAIT = timedelta(seconds=5)

Send = Callable[[store_pb.HeartbeatsRequest], store_pb.HeartbeatsResponse]


class Lease:
    """One held attempt. Its methods are called from the attempt's own threads and
    never wait for the store, but ``flush`` and ``drop``."""

    def __init__(
        self,
        liveness: Liveness,
        run_id: str,
        attempt_token: str,
        interval: float,
        cancel: CancelSignal,
        due: float,
    ) -> None:
        self._liveness = liveness
        self.run_id = run_id
        self.attempt_token = attempt_token
        self.interval = interval
        self.cancel = cancel
        self.due = due  # next beat (monotonic seconds)
        # A run held for its fire time: until the body begins, the lease beats every
        # ``held_gap`` rather than every ``interval``, and once in the last interval
        # before ``fire_at`` (monotonic seconds; 0.0: not held).
        self.fire_at = 0.0
        self.held_gap = 0.0
        self.flush_by = 0.0  # an unsent checkpoint or start must go by then; 0 = none
        self.checkpoint = ""  # newest unsent checkpoint JSON ("" = the store has it)
        self.progress: Progress | None = None  # newest unsent progress (None: sent)
        self.version = 0  # counts changes (checkpoints, the start) to send
        self.delivered = 0  # the version the store has answered for
        self.started_ns = 0  # the body's start, once known
        self.start_recorded = False  # the store has answered a beat carrying it
        self.superseded = False
        self.failed = False  # the last call carrying it failed
        self.urgent = False  # a flush waits for the next call
        self.dropped = False
        self.wake: Callable[[], None] | None = None  # told when the store's answer changes

    @property
    def state(self) -> BeatResult:
        """What the store last said of the attempt."""
        if self.superseded:
            return BeatResult.SUPERSEDED
        return BeatResult.FAILED if self.failed else BeatResult.OK

    def beat(self, checkpoint_json: str) -> BeatResult:
        """The body's newest checkpoint ("" = none new), sent with the next call
        (within ``checkpoint_flush``); SUPERSEDED once the store refused the attempt,
        else OK (a call that failed is the ticker's to retry and to log)."""
        return self._liveness._update(self, checkpoint_json, 0)

    def report_progress(self, progress: Progress) -> None:
        """The body's newest progress, sent with the next call (within
        ``checkpoint_flush``); an older one not sent yet is replaced."""
        self._liveness._progress(self, progress)

    def report_start(self, started_ns: int) -> BeatResult:
        """When the body began (ns since the epoch), sent with the next call; as
        ``beat``. Until the store has answered a call carrying it, the attempt's
        completion carries it too (the store records it once)."""
        return self._liveness._update(self, "", started_ns)

    def watch(self, wake: Callable[[], None] | None) -> None:
        """Call ``wake()`` when a newer attempt turns out to own the run, or a cancel is
        asked (from the ticker's thread; it must not block), so a supervisor need not
        look at the lease every interval: a run queued ahead of its fire time costs no
        wake-up until then. None: no longer."""
        self._liveness._watch(self, wake)

    def flush(self, wait: timedelta = FLUSH_WAIT) -> BeatResult:
        """Send what the store does not have of this attempt now; the answer."""
        return self._liveness._flush(self, wait)

    def drop(self) -> None:
        """The attempt's outcome is decided: its newest checkpoint is sent (waiting
        for it), and the lease beats no more. Once; a second call does nothing."""
        if self.dropped:
            return
        self.dropped = True
        if (self.checkpoint or self.progress) and not self.superseded:
            self.flush()
        self._liveness._drop(self)


class Liveness:
    """The leases of one worker and the thread that beats for them."""

    def __init__(
        self,
        send: Send,
        *,
        checkpoint_flush: timedelta = CHECKPOINT_FLUSH,
        start_flush: timedelta = START_FLUSH,
        max_batch: int = DEFAULT_MAX_BATCH,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._flush_s = checkpoint_flush.total_seconds()
        self._start_s = start_flush.total_seconds()
        self._max_batch = max_batch
        self._monotonic = monotonic
        self._leases: dict[int, Lease] = {}
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="liveness", daemon=True)
        self._thread.start()

    def hold(
        self,
        run_id: str,
        attempt_token: str,
        interval: timedelta,
        cancel: CancelSignal,
        *,
        fire_in: timedelta = timedelta(0),
        held_gap: timedelta = timedelta(0),
    ) -> Lease:
        """A lease of the attempt, beating every ``interval`` from now on. A run held
        for a fire time ``fire_in`` away beats every ``held_gap`` (when longer) until
        its body begins, and once within the interval before the fire time: thousands
        of runs claimed ahead of the top of the hour cost the store a renewal each
        ``held_gap``, not each second, and a cancel still reaches each before its
        body would begin."""
        seconds = max(interval.total_seconds(), 0.01)
        with self._cond:
            now = self._monotonic()
            lease = Lease(self, run_id, attempt_token, seconds, cancel, now + seconds)
            if fire_in > interval and held_gap > interval:
                lease.fire_at = now + fire_in.total_seconds()
                lease.held_gap = held_gap.total_seconds()
                lease.due = now + _gap(lease, now)
            self._leases[id(lease)] = lease
            self._cond.notify()
        return lease

    def __len__(self) -> int:
        with self._cond:
            return len(self._leases)

    def close(self) -> None:
        """Beat no more (the worker has stopped)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=5)

    # -- called through a lease ----------------------------------------------------------
    def _update(self, lease: Lease, checkpoint_json: str, started_ns: int) -> BeatResult:
        with self._cond:
            if checkpoint_json:
                lease.checkpoint = checkpoint_json
                lease.version += 1
                self._due_soon(lease)
            if started_ns and not lease.started_ns:
                lease.started_ns = started_ns
                lease.version += 1
                now = self._monotonic()
                lease.fire_at = 0.0  # begun: it beats every interval from now on
                lease.due = min(lease.due, now + lease.interval)
                start_by = now + min(self._start_s, lease.interval)
                if not lease.flush_by or start_by < lease.flush_by:
                    lease.flush_by = start_by
                    self._cond.notify()
            return BeatResult.SUPERSEDED if lease.superseded else BeatResult.OK

    def _progress(self, lease: Lease, progress: Progress) -> None:
        with self._cond:
            lease.progress = progress
            lease.version += 1
            self._due_soon(lease)

    def _due_soon(self, lease: Lease) -> None:
        """The lease's unsent change goes within ``checkpoint_flush`` (or its interval,
        if shorter). Called under the lock."""
        if not lease.flush_by:
            lease.flush_by = self._monotonic() + min(self._flush_s, lease.interval)
            self._cond.notify()

    def _flush(self, lease: Lease, wait: timedelta) -> BeatResult:
        deadline = self._monotonic() + wait.total_seconds()
        with self._cond:
            want = lease.version
            lease.urgent = True
            self._cond.notify_all()
            while lease.delivered < want and not lease.superseded and not self._closed:
                left = deadline - self._monotonic()
                if left <= 0:
                    return BeatResult.FAILED
                self._cond.wait(left)
            return lease.state

    def _watch(self, lease: Lease, wake: Callable[[], None] | None) -> None:
        with self._cond:
            lease.wake = wake
            changed = lease.superseded or lease.cancel.is_set()
        if changed and wake is not None:  # it changed before the watch began
            wake()

    def _drop(self, lease: Lease) -> None:
        with self._cond:
            self._leases.pop(id(lease), None)

    # -- the ticker -------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                now = self._monotonic()
                live = [lease for lease in self._leases.values() if not lease.superseded]
                due = [lease for lease in live if _due(lease, now)]
                if not due:
                    wake = min((_next(lease) for lease in live), default=None)
                    self._cond.wait(None if wake is None else max(wake - now, 0.001))
                    continue
                batch = self._take(due, now)
            self._beat(batch)

    def _take(self, due: list[Lease], now: float) -> list[_Item]:
        """The leases of the next call and what each sends: every lease due, and those
        due within half an interval, so leases fall into step. Called under the lock."""
        chosen = {id(lease) for lease in due}
        riders = [
            lease
            for lease in self._leases.values()
            if id(lease) not in chosen
            and not lease.superseded
            and lease.due - now <= lease.interval / 2
        ]
        batch = []
        for lease in [*due, *riders][: self._max_batch]:
            lease.due = now + _gap(lease, now)
            lease.flush_by = 0.0
            lease.urgent = False
            started = lease.started_ns if not lease.start_recorded else 0
            batch.append(_Item(lease, lease.version, lease.checkpoint, started, lease.progress))
        return batch

    def _beat(self, batch: Sequence[_Item]) -> None:
        request = store_pb.HeartbeatsRequest()
        for item in batch:
            lease = item.lease
            beat = request.beats.add(
                run_id=lease.run_id,
                attempt_token=lease.attempt_token,
                checkpoint_json=item.checkpoint,
            )
            if item.started_ns:
                beat.body_started_at.FromNanoseconds(item.started_ns)
            if item.progress is not None:
                beat.progress.CopyFrom(item.progress.to_proto())
        try:
            answers = results_of(self._send(request).results, "beat")
        except grpc.RpcError as exc:
            log.warning(
                "heartbeat of %d attempt(s) not delivered (%s); retrying",
                len(batch),
                exc.code().name if hasattr(exc, "code") else exc,
            )
            answers = [exc] * len(batch)
        except Exception as exc:  # the ticker must keep beating whatever happens
            log.exception("heartbeat of %d attempt(s) failed", len(batch))
            answers = [exc] * len(batch)
        retry = self._monotonic() + RETRY_AFTER.total_seconds()
        with self._cond:
            wakes = [
                wake
                for item, answer in zip(batch, answers, strict=True)
                if (wake := self._answered(item, answer, retry)) is not None
            ]
            self._cond.notify_all()
        for wake in wakes:  # outside the lock: a supervisor's wake takes its own
            wake()

    def _answered(
        self, item: _Item, answer: store_pb.HeartbeatResponse | BaseException, retry: float
    ) -> Callable[[], None] | None:
        """One lease's item answered; the lease's ``wake`` when the answer changed what
        its supervisor must do (superseded, cancel asked). Called under the lock."""
        lease, checkpoint, started_ns = item.lease, item.checkpoint, item.started_ns
        unsent = (checkpoint and lease.checkpoint == checkpoint) or (
            item.progress is not None and lease.progress is item.progress
        )
        if isinstance(answer, BaseException):
            code = answer.code() if isinstance(answer, grpc.RpcError) else None
            if code in NOT_OURS:
                if not lease.superseded:
                    details = answer.details() if isinstance(answer, grpc.RpcError) else ""
                    log.warning("run %s: heartbeat refused: %s", lease.run_id, details)
                    lease.superseded = True
                    return lease.wake
                return None
            lease.failed = True
            lease.due = min(lease.due, retry)
            if unsent:
                lease.flush_by = lease.flush_by or retry
            return None
        lease.failed = False
        lease.delivered = max(lease.delivered, item.version)
        if checkpoint and lease.checkpoint == checkpoint:
            lease.checkpoint = ""  # the store has the newest
        if item.progress is not None and lease.progress is item.progress:
            lease.progress = None
        if started_ns:
            lease.start_recorded = True
        if not answer.cancel_requested:
            return None
        if not lease.cancel.is_set():
            log.info("run %s: cancel requested: %s", lease.run_id, answer.cancel_reason)
        lease.cancel.request(
            duration_to_td(answer.cancel_grace, "cancel_grace"), answer.cancel_reason
        )
        return lease.wake


@dataclass(frozen=True)
class _Item:
    """What one lease sends in a call: its change count then, its unsent checkpoint
    ("" = none), its body's start (0 = known to the store) and its unsent progress."""

    lease: Lease
    version: int
    checkpoint: str
    started_ns: int
    progress: Progress | None


def _gap(lease: Lease, now: float) -> float:
    """How long until the lease's next beat: its interval once its body has begun;
    before that its held gap, with one beat within the interval before the fire time
    (a run still queued after its fire time, behind the bodies of a crowded instant,
    keeps the held gap: thousands of them beating every second would starve the
    store of the time to renew them)."""
    if not lease.fire_at:
        return lease.interval
    last = lease.fire_at - lease.interval - now  # a beat within the last interval
    if last <= 0:
        return max(lease.interval, lease.held_gap)
    return max(lease.interval, min(lease.held_gap, last))


def _due(lease: Lease, now: float) -> bool:
    return lease.urgent or now >= _next(lease)


def _next(lease: Lease) -> float:
    """When the lease must be in a call next: its beat, or its unsent checkpoint's
    flush, whichever is sooner."""
    if lease.urgent:
        return 0.0
    return min(lease.due, lease.flush_by) if lease.flush_by else lease.due
