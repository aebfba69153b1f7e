"""Keeps the schedule index in step with the workflow-store, without polling schedules.

ListSchedules once (page by page, so 100,000 schedules never make one oversized
message; the watch from the first page's revision re-sends anything that changed while
the later pages were read), then one WatchSchedules stream from there, applying
each change as it arrives. The store ends a page by bytes as well as by count, so
pages go on until one comes back empty: a short page is not the last. A broken stream
is re-opened from the newest revision applied, after a backoff that doubles up to a
bound; a stream also ends on its own deadline and is re-opened at once, so no wait is
unbounded.

A schedule the planner cannot plan is left out -- dropped from the index, logged with
its id and why (never its payload), and counted in ``left_out`` -- and everything else
loads and fires: a spec the calendar rejects, a record that does not decode, or one
the store lists without part of it (``withheld``: a payload over the store's limit,
written before the limit existed). Firing an older or partial version of it would be
wrong; firing nothing because of it would be worse.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta

import grpc
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc
from tenacity import RetryCallState, Retrying, retry_if_exception_type, retry_if_result

from cron_planner.clock import Clock
from cron_planner.schedule_index import ScheduleIndex
from cronwave_core.backoff import exponential
from cronwave_core.convert import ts_to_dt
from cronwave_core.domain.calendar import validate
from cronwave_core.domain.spec import Policy, ScheduleDef, Spec
from cronwave_core.errors import CronwaveError
from cronwave_core.shards import shard_of

log = logging.getLogger("cronwave.planner.feed")

#: The longest pause between two pages of a paced listing.
_MAX_PACE = 0.5
#: Schedules per ListSchedules page: the store's default page size limit
#: (CRONWAVE_MAX_PAGE_SIZE).
PAGE = 1_000


class SharedValues:
    """One instance per distinct spec and policy value: 100,000 schedules that share a
    few hundred calendars hold a few hundred Spec objects, not 100,000 equal ones.
    Weak values, so a spec no schedule uses any more is freed. Job type names and
    payloads are interned (a payload is usually one of a few texts), and consecutive
    equal change instants (a batch written in one transaction) share one object."""

    def __init__(self) -> None:
        self._specs: weakref.WeakValueDictionary[Spec, Spec] = weakref.WeakValueDictionary()
        self._policies: weakref.WeakValueDictionary[Policy, Policy] = weakref.WeakValueDictionary()
        self._instant: datetime | None = None

    def __call__(self, schedule: ScheduleDef) -> ScheduleDef:
        job_type = sys.intern(schedule.job_type)
        payload = sys.intern(schedule.payload_json)
        try:
            spec = self._specs.setdefault(schedule.spec, schedule.spec)
            policy = self._policies.setdefault(schedule.policy, schedule.policy)
        except TypeError:  # an unhashable value: kept as it is
            spec, policy = schedule.spec, schedule.policy
        return ScheduleDef(
            schedule.schedule_id,
            spec,
            policy,
            job_type,
            payload,
            schedule.paused,
            schedule.revision,
            schedule.critical,
        )

    def instant(self, at: datetime) -> datetime:
        last = self._instant
        if last is not None and last == at:
            return last
        self._instant = at
        return at


def _why(exc: Exception) -> str:
    """What a log line says of a decoding failure: a CronwaveError's message names the
    field and the rule; of anything else, only its kind (its text might quote data)."""
    if isinstance(exc, CronwaveError):
        return str(exc)
    return f"cannot be decoded ({type(exc).__name__})"


class ScheduleFeed:
    def __init__(
        self,
        channel: grpc.Channel,
        index: ScheduleIndex,
        clock: Clock,
        *,
        rpc_timeout: timedelta,
        on_change: Callable[[], None] = lambda: None,
        on_loaded: Callable[[], None] = lambda: None,
        on_pause: Callable[[str, datetime], None] = lambda _sid, _at: None,
        stream_timeout: timedelta = timedelta(minutes=5),
        backoff: tuple[timedelta, timedelta] = (timedelta(seconds=0.1), timedelta(seconds=5)),
        shard_count: int = 1,
    ) -> None:
        """``channel`` should be untraced: a watch stream lives for minutes, and a span
        that long says nothing about any run. ``shard_count`` above 1: the feed holds
        only the schedules of the shards ``refilter`` names, and loads nothing before
        it is first told which; ``index`` must then keep each schedule's shard among
        ``shard_count`` (``ScheduleIndex(shard=...)``)."""
        self._stub = store_grpc.WorkflowStoreServiceStub(channel)
        self._index = index
        self._clock = clock
        self._rpc_timeout = rpc_timeout.total_seconds()
        self._on_change = on_change
        self._on_loaded = on_loaded
        self._on_pause = on_pause
        self._stream_timeout = stream_timeout.total_seconds()
        self._backoff = backoff
        self._stopping = threading.Event()
        self._call: grpc.Call | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.loaded = threading.Event()
        self._shared = SharedValues()
        self.changes = 0
        self.reconnects = 0
        #: Schedules left out so far (each time one is: at a load, at a change).
        self.left_out = 0
        self._shard_count = shard_count
        self._shards: frozenset[int] | None = None if shard_count > 1 else frozenset({0})
        self._loaded_shards: frozenset[int] = frozenset()
        self._filtered = threading.Event()
        self._since: int | None = None  # where the next watch starts, when not the index's
        self._paced = False  # the shards being listed may be listed slowly
        if shard_count <= 1:
            self._filtered.set()

    @property
    def loaded_shards(self) -> frozenset[int]:
        """The shards whose schedules the index holds (all of them, ``{0}``, unsharded).
        While more shards are listed, those loaded before that are still wanted stay
        loaded: their schedules stay in the index (the watch resumes where it was)."""
        with self._lock:
            if self.loaded.is_set():
                return self._loaded_shards
            return self._loaded_shards & (self._shards or frozenset())

    def has_loaded(self, schedule_id: str) -> bool:
        """Whether the index holds the schedules of ``schedule_id``'s shard (others may
        be listed meanwhile: a warm standby's)."""
        return shard_of(schedule_id, self._shard_count) in self.loaded_shards

    def refilter(self, shards: frozenset[int], *, paced: bool = False) -> None:
        """Hold the schedules of ``shards`` alone from now on. The feed's thread drops
        those of shards given up from the index and lists those of shards gained (only
        theirs, the store filtering) into it; the watch is re-opened for the new set
        from where it was, so no change in between is missed. Nothing of that is done
        in the caller's thread (the shard elector's: dropping a hundred thousand
        schedules takes a fifth of a second, which would hold up its next call, so a
        takeover). ``paced``: nothing waits for the shards gained (a warm standby's), so
        their pages are read at most half the time, leaving the store and this process
        the rest (on a busy machine a burst of listing starves lease renewals)."""
        with self._lock:
            if shards == self._shards:
                return
            self._paced = paced
            self._shards = shards
            self.loaded.clear()
            call = self._call
        self._filtered.set()
        if call is not None:
            call.cancel()

    def _drop_others(self) -> int:
        """Forget the schedules of shards no longer held (no revision moves), found by
        the shard the index keeps for each (no id hashed again); how many."""
        others = set(range(self._shard_count)) - (self._shards or frozenset())
        dropped = self._index.ids_in(others)
        for schedule_id in dropped:
            self._index.remove(schedule_id)
        return len(dropped)

    def _filter(self, shards: frozenset[int]) -> store_pb.ShardFilter | None:
        if self._shard_count <= 1:
            return None
        return store_pb.ShardFilter(count=self._shard_count, shards=sorted(shards))

    def _keep(self, schedule_id: str) -> bool:
        shards = self._shards
        if self._shard_count <= 1:
            return True
        return shards is not None and shard_of(schedule_id, self._shard_count) in shards

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="schedule-feed", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            call = self._call
        if call is not None:
            call.cancel()
        if self._thread is not None:
            self._thread.join(timeout=self._rpc_timeout + 1)

    def _run(self) -> None:
        sessions = Retrying(
            retry=retry_if_exception_type((grpc.RpcError, CronwaveError))
            | retry_if_result(lambda healthy: not healthy),
            stop=lambda _state: self._stopping.is_set(),
            wait=exponential(*self._backoff),
            sleep=self._pause,
            before_sleep=self._reconnecting,
            retry_error_callback=lambda _state: False,  # stopping: the thread ends
        )
        # A stream that ended by its own deadline is re-opened at once, and the next
        # break waits from the first delay again.
        while not self._stopping.is_set():
            sessions(self._session)

    def _session(self) -> bool:
        """Load the index if it is not, then watch; True when the watch ended by its
        own deadline."""
        if not self._filtered.is_set():
            self._stopping.wait(0.05)
            return True
        if not self.loaded.is_set():
            self._load()
        return self._watch()

    def _pause(self, seconds: float) -> None:
        self._stopping.wait(seconds)  # a stop ends the wait at once

    def _reconnecting(self, state: RetryCallState) -> None:
        self.reconnects += 1
        exc = state.outcome.exception() if state.outcome else None
        if exc is not None:
            log.warning(
                "schedule feed interrupted (%s); retrying in %.1fs",
                _text(exc),
                state.upcoming_sleep,
            )

    def _load(self) -> None:
        now = self._clock.now()
        shards = self._shards or frozenset()
        held = self._loaded_shards
        if self._shard_count > 1 and held and len(self._index):
            self._load_more(shards, held, now)
            return
        loading = self._index.loading()
        revision: int | None = None
        left_out = self.left_out
        # The next page is asked for before this one is decoded, so the store reads
        # and encodes it while the planner decodes. A page may end early by bytes:
        # only an empty page ends the list.
        pending: grpc.Future | None = self._page("", shards)
        while pending is not None:
            reply = pending.result()
            pending = None
            if revision is None:
                revision = reply.revision
            if reply.schedules and not self._stopping.is_set():
                pending = self._page(reply.schedules[-1].schedule_id, shards)
            for msg in reply.schedules:
                readable = self._readable(msg, now) if self._keep(msg.schedule_id) else None
                if readable is not None:
                    loading.add(*readable)
            if self._shards != shards:
                return  # refiltered meanwhile: load again for the new shards
        if self._stopping.is_set():
            return
        self._index.load(loading, revision or 0)
        with self._lock:
            if self._shards != shards:
                return
            self._loaded_shards = shards
            self.loaded.set()
        self._on_loaded()
        log.info(
            "loaded %d schedules at revision %d (%d left out) of shards %s",
            len(self._index),
            revision or 0,
            self.left_out - left_out,
            sorted(shards),
        )
        self._on_change()

    def _load_more(self, shards: frozenset[int], held: frozenset[int], now: datetime) -> None:
        """The index holds ``held``'s schedules: drop those of shards not in ``shards``,
        list the gained shards' alone into it, and watch from where the index was."""
        since = self._index.revision
        dropped = self._drop_others()
        gained = shards - held
        count = 0
        paced = self._paced
        pending: grpc.Future | None = self._page("", gained) if gained else None
        while pending is not None:
            began = time.monotonic()
            reply = pending.result()
            pending = None
            if reply.schedules and not self._stopping.is_set() and not paced:
                pending = self._page(reply.schedules[-1].schedule_id, gained)
            for msg in reply.schedules:
                readable = self._readable(msg, now) if self._keep(msg.schedule_id) else None
                if readable is not None:
                    self._index.apply(*readable)
                    count += 1
            if self._shards != shards:
                return  # refiltered meanwhile: load again for the new shards
            if paced and reply.schedules and not self._stopping.is_set():
                self._stopping.wait(min(time.monotonic() - began, _MAX_PACE))
                pending = self._page(reply.schedules[-1].schedule_id, gained)
        if self._stopping.is_set():
            return
        with self._lock:
            if self._shards != shards:
                return
            self._since = since
            self._loaded_shards = shards
            self.loaded.set()
        self._on_loaded()
        log.info(
            "loaded %d schedules of %d more shards %s, dropped %d of shards given up",
            count, len(gained), sorted(gained), dropped,
        )  # fmt: skip
        self._on_change()

    def _page(self, after: str, shards: frozenset[int]) -> grpc.Future:
        request = store_pb.ListSchedulesRequest(
            limit=PAGE, after_schedule_id=after, shard_filter=self._filter(shards)
        )
        future: grpc.Future = self._stub.ListSchedules.future(request, timeout=self._rpc_timeout)
        return future

    def _watch(self) -> bool:
        """Apply changes until the stream ends. True when it ended by its own deadline
        (re-open at once); an error or an early end raises or returns False."""
        since, self._since = self._since, None
        request = store_pb.WatchSchedulesRequest(
            since_revision=self._index.revision if since is None else since,
            shard_filter=self._filter(self._shards or frozenset()),
        )
        call = self._stub.WatchSchedules(request, timeout=self._stream_timeout)
        with self._lock:
            if self._stopping.is_set():
                call.cancel()
                return False
            if not self.loaded.is_set():  # refiltered since the load: load again first
                call.cancel()
                return True
            self._call = call
        try:
            for reply in call:
                if self._keep(reply.schedule.schedule_id):
                    self._apply(reply.schedule)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                return True
            if exc.code() == grpc.StatusCode.CANCELLED and not self.loaded.is_set():
                return True  # refiltered: load the new shards at once
            raise
        finally:
            with self._lock:
                self._call = None
        return False

    def _decoded(
        self, msg: common_pb2.Schedule, now: datetime
    ) -> tuple[ScheduleDef, datetime] | None:
        if msg.withheld:
            self._left_out(msg.schedule_id, f"the store withheld part of it ({msg.withheld})")
            return None
        try:
            schedule = ScheduleDef.from_proto(msg)
            since = ts_to_dt(msg.updated_at) if msg.HasField("updated_at") else now
        except Exception as exc:  # one record that cannot be read must not stop the rest
            self._left_out(msg.schedule_id, _why(exc))
            return None
        return self._shared(schedule), self._shared.instant(since)

    def _plannable(
        self, decoded: Iterable[tuple[ScheduleDef, datetime]]
    ) -> Iterator[tuple[ScheduleDef, datetime]]:
        """The schedules whose spec the calendar accepts. Checked right before the index
        takes each one, so the calendar compiled by the check is the one the index uses
        (a planner holds more distinct specs than the calendar cache)."""
        for schedule, since in decoded:
            try:
                validate(schedule.spec)
            except Exception as exc:  # as in _decoded
                self._left_out(schedule.schedule_id, _why(exc))
                continue
            yield schedule, since

    def _readable(
        self, msg: common_pb2.Schedule, now: datetime
    ) -> tuple[ScheduleDef, datetime] | None:
        decoded = self._decoded(msg, now)
        return next(self._plannable((decoded,)), None) if decoded is not None else None

    def _left_out(self, schedule_id: str, why: str) -> None:
        self.left_out += 1
        log.error("schedule '%s' cannot be planned and is left out: %s", schedule_id, why)

    def _apply(self, msg: common_pb2.Schedule) -> None:
        self.changes += 1
        now = self._clock.now()
        readable = None if msg.deleted else self._readable(msg, now)
        if readable is None:
            self._index.remove(msg.schedule_id, msg.revision)
        else:
            before = self._index.get(msg.schedule_id)
            applied = self._index.apply(readable[0], readable[1])
            if applied and readable[0].paused and before is not None and not before.paused:
                self._on_pause(msg.schedule_id, readable[1])
        self._on_change()


def _text(exc: BaseException) -> str:
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        return f"{exc.code().name}: {exc.details()}"
    return str(exc)
