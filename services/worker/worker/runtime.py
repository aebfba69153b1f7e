"""Processing one queued run: pickup, claim, execute, complete.

A message is only a pointer to a run. The store's claim decides whether this worker
may run it (exactly one live attempt per run); a message for a run that is already
terminal or held by a live attempt is acknowledged and dropped, which is what makes
at-least-once delivery run a job once.

A message this worker cannot use (undecodable, naming no run the store knows, or a
job type this worker does not have) is a poison message: it goes to the store's
dead-letter list with the reason, and is acknowledged.

A worker that is stopping (``worker.draining``) claims nothing more: a message that
reaches it goes back on its queue. An attempt it stops is RELEASED: the run goes back
to the store (``ReleaseRun``) with its checkpoint and gets a new message, so another
worker resumes it at once.

``RunProcessor`` decides when a message is handled (put back when early or when the
worker is stopping, held until the fire time of a run claimed ahead); each concern of
handling it is a middleware of the chain (``worker.chain``, ``worker.middleware``).
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from dramatiq.brokers.redis import RedisBroker

from cronwave_core.queueing import RunMessage, UndecodableRunMessage
from worker.attempts import Attempts, Isolation
from worker.chain import Chain, Delivery, Poison, RunMiddleware
from worker.draining import Draining
from worker.handback import hand_back
from worker.held_runs import HeldRuns
from worker.jobs import Registry
from worker.middleware.dead_lettering import DeadLettering, message_json
from worker.middleware.heartbeat import Heartbeat
from worker.store_port import RunStore

log = logging.getLogger("cronwave.worker")

#: A message that arrives more than this before its run's fire time is put back with
#: a delay instead of holding a worker slot until then.
EARLY_LIMIT = timedelta(seconds=30)

#: A run claimed at least this long before its fire time waits among the held runs,
#: not in the consumer's thread (which goes back to the broker meanwhile).
HOLD_AT_LEAST = timedelta(milliseconds=50)


class WorkerStats:
    """Counters for ``GetWorkerStatus``; safe to update from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.runs_started = 0
        self.runs_finished = 0
        self.busy = 0

    def started(self) -> None:
        with self._lock:
            self.runs_started += 1
            self.busy += 1

    def finished(self) -> None:
        with self._lock:
            self.runs_finished += 1
            self.busy -= 1

    def snapshot(self) -> tuple[int, int, int]:
        with self._lock:
            return self.runs_started, self.runs_finished, self.busy


class RunProcessor:
    """Turns one run message into at most one completed attempt, through ``chain``
    (the middleware in their declared order, ``worker.middleware.standard``)."""

    def __init__(
        self,
        store: RunStore,
        registry: Registry,
        middleware: Sequence[RunMiddleware],
        stats: WorkerStats,
        broker: RedisBroker | None = None,
        isolation: Isolation | None = None,
        held: HeldRuns | None = None,
        draining: Draining | None = None,
        max_runs: int | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self.stats = stats
        self.broker = broker
        self.isolation = isolation or Isolation(pool=None)
        self.chain = Chain(
            middleware, Attempts(self.isolation.pool, self.isolation.checkpoint_bytes)
        )
        self.dead_letters: DeadLettering = self.chain.find(DeadLettering)
        self.held = held  # runs claimed ahead of their fire time wait there
        self.draining = draining or Draining()  # the runs handled now, and the stop
        self.max_runs = max_runs  # handled at once at most (None: no bound)
        self.heartbeat = _heartbeat_of(self.chain)

    def close(self) -> None:
        """Send the claims and completions still queued; refuse new ones."""
        self.chain.close()

    def process(self, kwargs: Mapping[str, Any], args: Sequence[Any] = (), queue: str = "") -> None:
        """Handle the message's arguments. A poison message is dead-lettered; a run
        that is not ours to run is skipped."""
        try:
            if args:
                raise UndecodableRunMessage("args", "a run message carries keyword arguments only")
            message = RunMessage.from_kwargs(kwargs)
        except UndecodableRunMessage as exc:
            run_id = kwargs.get("run_id") if isinstance(kwargs, Mapping) else None
            poison = Poison(
                "undecodable",
                exc.message,
                run_id=run_id if isinstance(run_id, str) else "",
                queue=queue,
                message_json=message_json(args, kwargs),
            )
            self.chain.poisoned(poison)
            return
        if self._put_back_if_early(message):
            return
        stop = self.draining.enter(message.run_id, limit=self.max_runs)
        try:
            self._handle(Delivery(message, stop))
        finally:
            self.draining.leave(stop)

    def _handle(self, delivery: Delivery) -> None:
        if delivery.stop.requested:  # the worker is stopping: another worker's to take
            self._put_back(delivery.message)
            return
        with delivery.stack:  # the message's trace context, entered by tracing
            if not self.chain.take(delivery):
                self.chain.finish(delivery)
                return
            hold = self._hold_if_early(delivery)
            if hold is None:
                self._attempt(delivery)
                return
        # Handed over only once this thread has left the delivery's stack: a run due
        # within the release lead leaves the heap at once, and its pool thread enters
        # the same stack; closing it here afterwards would undo (in this thread's
        # context) what that thread had entered, which OpenTelemetry refuses, logging a
        # traceback per run.
        hold()  # finished where the held attempt ends

    def _attempt(self, delivery: Delivery) -> None:
        self.stats.started()
        try:
            self.chain.attempt(delivery)
        finally:
            self.stats.finished()
            self.chain.finish(delivery)

    def _hold_if_early(self, delivery: Delivery) -> Callable[[], None] | None:
        """For a run claimed well ahead of its fire time: what hands it to the held runs
        (see ``worker.held_runs``), its lease beating meanwhile (``Heartbeat.hold``),
        called once the caller has left the delivery's stack. None when it is due too
        soon for that to pay (``HOLD_AT_LEAST``): it runs in this thread."""
        if self.held is None or self.heartbeat is None or delivery.job_type is None:
            return None
        held = self.held
        fire_time = delivery.fire_time
        if fire_time - datetime.now(UTC) <= HOLD_AT_LEAST:
            return None
        lease = self.heartbeat.hold(delivery)
        context = contextvars.copy_context()  # the message's trace context
        stop = delivery.stop = self.draining.enter(delivery.run.run_id)  # until run or back

        def attempt() -> None:
            # What the attempt's phases enter on the delivery's stack (its trace
            # context) is left here, in this thread's context: left to the garbage
            # collector, it was left in whichever thread that ran, which OpenTelemetry
            # refuses, logging a traceback per run (a third of a burst's CPU).
            try:
                with delivery.stack:
                    if lease.superseded:  # a pause cancels the runs dispatched ahead
                        log.info("run %s ended while held: not started", delivery.run.run_id)
                        self.chain.finish(delivery)
                        return
                    self._attempt(delivery)
            finally:
                lease.drop()
                self.draining.leave(stop)

        def on_stop() -> None:  # the worker stopped while the run was held
            try:
                lease.drop()
                hand_back(
                    self.store, self.broker, delivery.run, delivery.attempt_token, "",
                    delivery.attrs,
                )  # fmt: skip
            finally:
                self.draining.leave(stop)
                self.chain.finish(delivery)

        def hold() -> None:
            held.hold(fire_time, lambda: context.run(attempt), on_stop=lambda: context.run(on_stop))
            if self.isolation.pool is not None:  # the instant's bodies find processes ready
                self.isolation.pool.prepare(len(held) + self.stats.snapshot()[2])

        return hold

    def _put_back(self, message: RunMessage) -> None:
        """The message again on its queue, unclaimed, for another worker (if it is
        lost, the sweeper sends another once the run is overdue)."""
        if self.broker is None:
            return
        try:
            self.broker.enqueue(message.to_message())
        except Exception as exc:
            log.error("run %s: message not put back: %s", message.run_id, exc)

    def _put_back_if_early(self, message: RunMessage) -> bool:
        early = message.fire_time - datetime.now(UTC)
        if early <= EARLY_LIMIT or self.broker is None:
            return False
        delay = early - EARLY_LIMIT / 2
        log.info("run %s: message %.1fs early; put back", message.run_id, early.total_seconds())
        self.broker.enqueue(message.to_message(), delay=int(delay.total_seconds() * 1000))
        return True


def _heartbeat_of(chain: Chain) -> Heartbeat | None:
    """The chain's heartbeat, whose leases keep held runs this worker's (None: a
    chain without one holds no runs)."""
    try:
        heartbeat: Heartbeat = chain.find(Heartbeat)
    except LookupError:
        return None
    return heartbeat
