"""The sweeper: re-sends the message of every run that needs one, from the store.

The broker is not the source of truth; the store is. A message can be lost (Redis
restarted with persistence off, a worker died holding a delayed retry) and a worker
can die mid-run. Once a tick (``CRONWAVE_SWEEP_INTERVAL``) the sweeper asks the store for at
most ``CRONWAVE_SWEEP_LIMIT`` such runs, which the store marks "requeued" in the same transaction:

- PENDING runs due longer than ``pending_for`` ago that no worker claimed (a retry is
  due only once its delay has passed), and replayed runs, which have no message yet; a
  run's queue's backlog counts on top of ``pending_for``: a message younger than the
  oldest one still waiting on its queue is not lost (``dispatcher.backlog``);
- WAITING and RUNNING runs whose heartbeat lapsed: the worker died or paused past its
  job type's heartbeat timeout (for a WAITING run, while it held the run for its fire
  time). The new attempt resumes from the run's last checkpoint.

A lost queue is not left to ``pending_for``: each tick first looks at the queue
epoch (``cronwave_core.queue_epoch``: one round trip to Redis). When Redis has lost its
messages (restarted empty, flushed, another server) the sweeper that notices it re-sends
the message of every PENDING run recorded before then, page by page
(``RequeueLostRuns``, ``CRONWAVE_SWEEP_LIMIT`` runs a page, the pages one after another
without waiting for the next tick), so those runs start within a second of Redis
answering again rather than after ``CRONWAVE_SWEEP_PENDING_AFTER``. A page that fails
is asked for again next tick; a recovery left unfinished by a dying dispatcher is
finished by the ordinary sweep, once overdue.

A message sent twice is harmless: a worker acts on a message only through
``ClaimRuns``, which lets exactly one attempt hold a run and refuses a run that is
done, held by a live attempt, or not yet due. So a sweeper may err towards sending.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from dramatiq.brokers.redis import RedisBroker

from cronwave_core.convert import dt_to_ts, td_to_duration, ts_to_dt
from cronwave_core.queue_epoch import EpochWatch
from cronwave_core.queueing import DEFAULT_QUEUE, RunMessage
from cronwave_core.settings import DispatcherSettings
from cronwave_core.telemetry.run_span import record_attempt_span, within_run
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import Hop, Kind, run_attributes
from dispatcher.backlog import queue_waits

log = logging.getLogger("cronwave.dispatcher")

#: A lost queue's runs are re-sent at most this many pages a tick; the rest next tick.
LOST_PAGES_PER_TICK = 50


#: The reason the store gives for a run whose attempt's heartbeat lapsed.
LAPSED = "heartbeat_lapsed"


#: The lost attempts whose span this process recorded, newest last: a lapsed run is
#: re-sent until a worker claims it, and its lost attempt is recorded once.
_LOST: OrderedDict[tuple[str, int], None] = OrderedDict()
_LOST_REMEMBERED = 4096


def _record_lost_attempt(run: Any, attrs: dict[str, Any]) -> None:
    """The span of the attempt whose worker went silent, from its claim to its last
    heartbeat: its worker never recorded it, and the spans it had sent hang under it
    (``run_span``). Once per attempt in this process."""
    if not run.attempt or not run.HasField("claimed_at") or len(run.trace_id) != 32:
        return
    key = (run.trace_id, run.attempt)
    if key in _LOST:
        return
    try:
        trace_id = int(run.trace_id, 16)
    except ValueError:
        return
    _LOST[key] = None
    while len(_LOST) > _LOST_REMEMBERED:
        _LOST.popitem(last=False)
    began = run.claimed_at.ToNanoseconds()
    last = run.heartbeat_at.ToNanoseconds() if run.HasField("heartbeat_at") else began
    attributes = {**attrs, "cronwave.outcome": "lost", "cronwave.worker_id": run.worker_id}
    record_attempt_span(trace_id, run.attempt, began, attributes, end_ns=max(began, last))


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Recovery:
    """A lost queue's runs being re-sent: recorded before ``lost_at``, after ``after``."""

    lost_at: datetime
    why: str
    started: float  # time.monotonic()
    after: str = ""
    sent: int = 0


class Sweeper:
    """A daemon thread that runs ``sweep_once`` every ``settings.sweep_interval``. With a
    ``watch``, each tick first looks for a lost queue and re-sends the runs it held.
    ``queues``: the queues whose backlog each sweep reads (the dispatcher's servicer
    adds those it sends to; the sweeper those of the runs it re-sends)."""

    def __init__(
        self,
        store: Any,  # WorkflowStoreServiceStub
        broker: RedisBroker,
        settings: DispatcherSettings,
        watch: EpochWatch | None = None,
        now: Callable[[], datetime] = _now,
        queues: set[str] | None = None,
    ) -> None:
        self.store = store
        self.broker = broker
        self.queues = queues if queues is not None else set()
        self.queues.add(DEFAULT_QUEUE)
        self.settings = settings
        self.watch = watch
        self.now = now
        self._recovery: _Recovery | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sweeper", daemon=True)

    def start(self) -> None:
        if self.settings.sweep_interval > timedelta(0):
            self._thread.start()

    def stop(self, timeout: timedelta = timedelta(seconds=5)) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout.total_seconds())

    def sweep_once(self) -> int:
        """One tick: look for a lost queue and re-send a page of the runs it held, then
        re-send the message of every run the store hands back; returns how many were
        sent. A lost queue that cannot be looked at or recovered now (Redis or the
        store away) does not hold up the ordinary sweep; it is tried again next tick."""
        try:
            sent = self._recover_lost()
        except Exception as exc:  # the recovery, if one began, resumes at its page
            log.warning("lost-queue check failed: %s", exc)
            sent = 0
        waits = queue_waits(self.broker, list(self.queues))
        response = self.store.RequeueStalledRuns(
            store_pb.RequeueStalledRunsRequest(
                pending_for=td_to_duration(self.settings.sweep_pending_after),
                limit=self.settings.sweep_limit,
                queue_waits={queue: td_to_duration(wait) for queue, wait in waits.items()},
            )
        )
        return sent + self._send(response.runs)

    def _recover_lost(self) -> int:
        """Notice a lost queue (``watch``), then re-send one page of its runs."""
        if self.watch is not None:
            loss = self.watch.check(self.now())
            if loss is not None:
                # A newer loss supersedes one still being recovered: its runs are a
                # superset (everything recorded before the later instant).
                self._recovery = _Recovery(loss.epoch.since, loss.why, time.monotonic())
                log.warning("queue lost: %s; re-sending the runs it held", loss.why)
        return self._recover_page()

    def _recover_page(self) -> int:
        """Re-send the next page of the lost queue's runs, if one is being recovered."""
        recovery = self._recovery
        if recovery is None:
            return 0
        page = self.store.RequeueLostRuns(
            store_pb.RequeueLostRunsRequest(
                lost_at=dt_to_ts(recovery.lost_at),
                pending_for=td_to_duration(self.settings.sweep_pending_after),
                after_run_id=recovery.after,
                limit=self.settings.sweep_limit,
            )
        )
        sent = self._send(page.runs)
        recovery.sent += sent
        recovery.after = page.next_after_run_id
        if not recovery.after:
            self._recovery = None
            log.log(
                logging.WARNING if recovery.sent else logging.INFO,
                "queue lost: %d runs re-sent in %.3fs (%s)",
                recovery.sent,
                time.monotonic() - recovery.started,
                recovery.why,
            )
        return sent

    def _send(self, stalled_runs: Sequence[store_pb.StalledRun]) -> int:
        sent = 0
        for stalled in stalled_runs:
            run = stalled.run
            queue = run.queue or DEFAULT_QUEUE
            self.queues.add(queue)
            fire_time = ts_to_dt(run.fire_time)
            attrs = {
                **run_attributes(run.run_id, run.schedule_id, fire_time.isoformat()),
                "cronwave.queue": queue,
                "cronwave.requeue_reason": stalled.reason,
            }
            if stalled.reason == LAPSED:
                _record_lost_attempt(run, attrs)
            # In the run's trace, beneath its run span: the next attempt is the run's.
            with (
                within_run(run.trace_id),
                hop_span("dispatch.requeue", Hop.DISPATCH, Kind.QUEUE, attrs),
            ):
                message = RunMessage.for_run(run)
                try:
                    self.broker.enqueue(message.to_message())
                except Exception as exc:  # it is handed out again once overdue once more
                    log.error("run %s: requeue on %s failed: %s", run.run_id, queue, exc)
                    continue
            sent += 1
            log.info("run %s: requeued on %s (%s)", run.run_id, queue, stalled.reason)
        return sent

    def _loop(self) -> None:
        interval = self.settings.sweep_interval.total_seconds()
        while not self._stop.is_set():
            started = time.monotonic()
            pages = 0
            try:
                sent = self.sweep_once()
                # A lost queue's pages go one after another, a bounded number a tick.
                while self._recovery is not None and pages < LOST_PAGES_PER_TICK:
                    if self._stop.is_set():
                        return
                    sent += self._recover_page()
                    pages += 1
            except Exception as exc:  # the store or Redis is down: try again next tick
                log.warning("sweep failed: %s", exc)
                sent = 0
            # A full batch means more are waiting: go again at once.
            if sent < self.settings.sweep_limit:
                self._stop.wait(max(0.0, interval - (time.monotonic() - started)))
