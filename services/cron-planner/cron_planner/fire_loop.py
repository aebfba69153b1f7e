"""The fire loop: while leading, handle every schedule's due slot, start the runs that
are due, and record every slot that is not run as MISSED with its reason.

A due slot is planned whole (``planning.plan_slot``): every occurrence since the
schedule was last handled gets one outcome -- due now, a paced catch-up run, or MISSED
with a reason (outside the catch-up window, skipped by the catch-up policy, skipped by
the DST policy). Runs to start go into a work queue by the instant they may start.

The loop's parts, each owning its own state, all driven from this loop's one thread:

- ``starts.Starter``: plans each due slot, collects the due fires into batches and
  starts them, one call to the dispatcher per batch (the contract of one start is in
  its docstring); it polls the buffered fires too;
- ``overlap_gate.OverlapGate``: the overlap decision of each fire;
- ``loss_waits.LossWaits``: fires held back for runs lost in the queue, rather than
  skipped for them;
- ``missed_rows.MissedRows``: MISSED rows and placeholders on their way to the store;
- the ports it is given (``ports``): the lease, the dispatcher, the store, the queue.

Terms. When this planner begins a term with a new fencing token it takes the store's
word for where every schedule stands -- the newest fire time handled and the count of
fire times (``LatestFireTimes``, one query per 10,000 schedules, never one call per
schedule; fire times further ahead of its clock than it ever records do not count,
``ScheduleIndex.reach``) -- and re-plans from there: slots missed while nobody led are
caught up by each schedule's catch-up policy. It then resumes the placeholders of the
term before (see ``work``): paced catch-up runs, buffered fires and backfills that a
previous leader decided but did not start. When a term ends, queued work is left to
the next term: placeholders in the store stand for it (a fire put off stands there
from the next step on, even ahead of its instant), and due fires that were not
started are newer than anything recorded, so the next term plans them again. The rows
this planner decided and has not sent yet are sent under its next token
(``MissedRows.retoken``).

Sharded planning begins a term whenever the shards held change, straight from the term
before. Such a term takes the store's word for the schedules of the shards it gained
alone, and keeps the rest as it stands. The gained schedules are parked
(``ScheduleIndex.park``: no slot of theirs fires from a guess) and re-based page by
page, soonest slot first (``LatestFireTimes`` of ``REBASE_PAGE`` ids a step, between the
steps that start what is due; the term's first page is ``REBASE_FIRST_PAGE``), so a
takeover fires its shards' next slots after one short page, not after all of them; their
placeholders are resumed at once. The schedules of shards held all along stand as they
are, with their queued and buffered work, as if no term had begun; the work of shards
lost is dropped (their new holder resumes it from the store, and the store refuses a
write under a stale token anyway). A shard held again under a new token counts as
gained: someone else may have held it between. The first term after none re-bases
everything.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from cron_planner.backoff import Backoff
from cron_planner.buffers import Buffers
from cron_planner.clock import Clock
from cron_planner.fire_stats import FireStats
from cron_planner.loss_waits import LossWaits
from cron_planner.missed_rows import MissedRows
from cron_planner.overlap_gate import OverlapGate
from cron_planner.ports import Dispatch, Leadership, Ledger, QueueLoss, Shards
from cron_planner.schedule_index import ScheduleIndex
from cron_planner.starts import Starter
from cron_planner.work import PENDING_BUFFER, Fire, Missed, Trigger, WorkQueue, iso
from cronwave_core.errors import CronwaveError

log = logging.getLogger("cronwave.planner.fire")

# A buffered fire waits for the run in flight however long it takes.
_NO_DEADLINE = datetime(9000, 1, 1, tzinfo=UTC)
#: Schedules of gained shards re-based a step (one ``LatestFireTimes`` call); the first
#: page of a term is smaller, so the slots due soonest fire after a short call.
REBASE_PAGE = 10_000
REBASE_FIRST_PAGE = 1_000


class FireLoop:
    """The loop's thread and its terms; what it does in a term is its parts' (see the
    module docstring). ``wake``, ``paused`` and ``submit`` may be called from any
    thread; the rest is the loop's."""

    def __init__(
        self,
        index: ScheduleIndex,
        clock: Clock,
        leadership: Leadership,
        dispatch: Dispatch,
        ledger: Ledger,
        *,
        give_up_after: timedelta = timedelta(seconds=60),
        backoff: Backoff | None = None,
        idle: timedelta = timedelta(seconds=1),
        buffer_poll: timedelta = timedelta(seconds=0.5),
        buffer_poll_limit: int = 100,
        resume_spacing: timedelta = timedelta(seconds=1),
        resume_backfill_rate: float = 10.0,
        queue_loss: QueueLoss | None = None,
        holds: Callable[[str], bool] = lambda _schedule_id: True,
        shards: Shards | None = None,
    ) -> None:
        """``holds``: whether a schedule is this planner's to fire in the term that
        begins (sharded planning: its shard is held); ``shards``: the shards held
        (sharded planning: a term re-bases only the shards it gained)."""
        self._index = index
        self._holds = holds
        self._shards = shards
        self._held: dict[int, int] = {}  # the shards (and tokens) the term is based on
        self._clock = clock
        self._leadership = leadership
        self._ledger = ledger
        self._give_up_after = give_up_after
        self._backoff = backoff or Backoff()
        self._idle = idle
        self._resume_spacing = resume_spacing
        self._resume_backfill_gap = timedelta(seconds=1 / resume_backfill_rate)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._term = 0  # the token whose term the index was re-based for
        self._term_attempts = 0
        self._term_retry_at: datetime | None = None
        # Parked schedules of gained shards still to re-base, soonest slot first.
        self._unbased: list[str] = []
        self._rebase_page_size = REBASE_PAGE
        self._rebase_attempts = 0
        self._rebase_retry_at: datetime | None = None
        self._rebase_turn = True  # with due work waiting too, pages and starts alternate
        self._inbox: list[Fire] = []
        self._pauses: list[tuple[str, datetime]] = []
        self._inbox_lock = threading.Lock()
        self.stats = FireStats()
        self._work = WorkQueue()
        self._buffers = Buffers()
        self._rows = MissedRows(ledger, self._backoff, self.stats)
        self._losses = LossWaits(queue_loss, self._work, self.stats)
        gate = OverlapGate(
            index,
            ledger,
            self._work,
            self._buffers,
            self._rows,
            self._losses,
            self.stats,
            give_up_after=give_up_after,
        )
        self._starter = Starter(
            index,
            clock,
            leadership,
            dispatch,
            ledger,
            self._work,
            self._buffers,
            self._rows,
            gate,
            self.stats,
            give_up_after=give_up_after,
            backoff=self._backoff,
            buffer_poll=buffer_poll,
            buffer_poll_limit=buffer_poll_limit,
            holds=holds,
        )

    # lifecycle ---------------------------------------------------------------
    def wake(self) -> None:
        """Re-examine now: a schedule changed or leadership did."""
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="fire-loop", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def paused(self, schedule_id: str, at: datetime) -> None:
        """``schedule_id`` was paused at ``at`` (from any thread): its runs dispatched
        ahead of a fire time after ``at`` (the dispatch lead) are cancelled, so a pause
        stops what has not begun. Queued and buffered fires of a paused schedule are
        recorded MISSED ``paused`` when their turn comes."""
        with self._inbox_lock:
            self._pauses.append((schedule_id, at))
        self.wake()

    def submit(self, fires: Sequence[Fire]) -> None:
        """Queue ``fires`` (a backfill whose placeholders are recorded) from any
        thread; the loop takes them in while it leads."""
        with self._inbox_lock:
            self._inbox.extend(fires)
        self.wake()

    @property
    def term(self) -> int:
        """The fencing token of the term the loop works in (0: none)."""
        return self._term

    @property
    def pending_missed(self) -> int:
        return len(self._rows)

    @property
    def pending_missed_due(self) -> int:
        """The MISSED rows waiting whose slot has come (the rest wait for theirs)."""
        return self._rows.due(self._clock.now())

    @property
    def queued(self) -> int:
        return len(self._work)

    @property
    def buffered(self) -> int:
        return len(self._buffers)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.step()
            except Exception:  # the loop must outlive any one bad slot
                log.exception("fire loop iteration failed")
                self._stopping.wait(self._idle.total_seconds())

    # one iteration -------------------------------------------------------------
    def step(self) -> None:
        """Do one thing that is due now, or wait until something is (or a wake)."""
        self._wake.clear()
        now = self._clock.now()
        token = self._leadership.token()
        self._rows.flush(now)
        until = now + self._idle
        next_try = self._rows.next_try()
        if next_try is not None:
            until = min(until, next_try)
        if not token:
            if self._term:
                self._end_term()
            self._term = 0
            with self._inbox_lock:
                self._pauses.clear()  # the leader's own feed tells it of the pause
            self._clock.wait(self._wake, until)
            return
        if token != self._term:
            if self._term_retry_at is not None and now < self._term_retry_at:
                self._clock.wait(self._wake, min(until, self._term_retry_at))
                return
            self._begin_term(token, now)
            return
        self._take_inbox()
        fire = self._work.peek()
        slot = self._index.peek()
        due = (fire is not None and fire.act_at <= now) or (slot is not None and slot.act_at <= now)
        rebase_at = self._rebase_retry_at or now
        if self._unbased and rebase_at <= now and (self._rebase_turn or not due):
            self._rebase_turn = False
            self._rebase_page(now)
            return
        self._rebase_turn = True
        if due:
            self._starter.start_due(token, now)
            return
        next_poll = self._starter.next_poll
        if self._buffers and (next_poll is None or next_poll <= now):
            self._starter.poll_buffers(token, now)
            return
        for instant in (
            fire.act_at if fire else None,
            slot.act_at if slot else None,
            next_poll if self._buffers else None,
            rebase_at if self._unbased else None,
        ):
            if instant is not None:
                until = min(until, instant)
        self._clock.wait(self._wake, until)

    # terms -----------------------------------------------------------------------
    def _begin_term(self, token: int, now: datetime) -> None:
        began = time.perf_counter()
        held = self._shards.held() if self._shards is not None else {}
        gained: set[int] | None = None  # None: re-base everything
        if self._shards is not None and self._term:
            gained = {k for k, t in held.items() if self._held.get(k) != t}
        latest: dict[str, tuple[datetime, int]] = {}
        try:
            if gained is None:
                latest = self._ledger.latest_fire_times(None, self._index.reach(now))
            pending = self._ledger.pending_fires() if gained != set() else []
        except CronwaveError as exc:
            # Not knowing where the schedules stand, the planner does not fire.
            self._term_retry_at = now + self._backoff.delay(self._term_attempts)
            self._term_attempts += 1
            log.warning("term of token %d waits: the store did not answer (%s)", token, exc)
            return
        self._term_attempts, self._term_retry_at = 0, None
        # Rows an earlier term decided and could not send yet go under this token; the
        # store cannot list their placeholders yet, so the term resumes them from here.
        moved = self._rows.retoken(token)
        listed = {(p.schedule_id, p.fire_time) for p in pending}
        pending += [
            m for m in moved if m.placeholder and (m.schedule_id, m.fire_time) not in listed
        ]
        if gained is None:
            self._unbased = []
            self._rebase_all(latest, pending, now)
            re_based = f"{len(self._index)} schedules re-based ({len(latest)} with runs)"
        else:
            self._rebase_gained(gained, pending, now)
            re_based = f"{len(self._unbased)} schedules to re-base"
        self._held = held
        self._term = token
        self.stats.terms += 1
        log.info(
            "term of token %d: %s, %d placeholders resumed, %d rows of the term before "
            "sent under it (%.3f s)",
            token, re_based, len(pending), len(moved), time.perf_counter() - began,
        )  # fmt: skip

    def _rebase_all(
        self, latest: dict[str, tuple[datetime, int]], pending: list[Missed], now: datetime
    ) -> None:
        # Straight from one term to the next (unsharded: a new token after a lease
        # renewed late), a due fire waiting to be retried stays queued while its
        # schedule is still this planner's: a later slot of it may be recorded already,
        # so the store's newest fire time would not bring it back. Placeholders are
        # resumed from the store below.
        carried = [
            f
            for f in self._work.clear()
            if self._term and not f.placeholder and self._holds(f.schedule_id)
        ]
        self._buffers.clear()
        self._losses.clear()
        self._starter.forget_paces()
        with self._inbox_lock:
            self._inbox.clear()  # their placeholders are among `pending`
        self._index.rebase(latest)
        self._resume(pending, now)
        for fire in carried:
            self._work.push(fire)

    def _rebase_gained(self, gained: set[int], pending: list[Missed], now: datetime) -> None:
        """Park the schedules of ``gained`` shards to re-base them page by page (see
        ``_rebase_page``) and resume their placeholders; keep the work of shards still
        held, drop that of shards no longer held."""
        assert self._shards is not None
        shard = self._shards.shard

        def kept(fire: Fire) -> bool:
            return shard(fire.schedule_id) not in gained and self._holds(fire.schedule_id)

        work, buffered = self._work.clear(), self._buffers.clear()
        for fire in work:
            if kept(fire):
                self._work.push(fire)
        for fire in buffered:
            if kept(fire):
                self._buffers.add(fire)
        self._losses.forget(lambda sid: shard(sid) in gained or not self._holds(sid))
        with self._inbox_lock:
            self._inbox = [f for f in self._inbox if kept(f)]  # the rest: among `pending`
        # Those still parked from the term before go first: they were due sooner.
        still = [sid for sid in self._unbased if shard(sid) not in gained and self._holds(sid)]
        self._unbased = still + self._index.park(gained)
        self._rebase_page_size = REBASE_FIRST_PAGE
        self._rebase_attempts, self._rebase_retry_at = 0, None
        self._resume([p for p in pending if shard(p.schedule_id) in gained], now)

    def _rebase_page(self, now: datetime) -> None:
        """Take the store's word for the next page of parked schedules and put
        their slots back; while the store does not answer they stay parked."""
        page = self._unbased[: self._rebase_page_size]
        try:
            latest = self._ledger.latest_fire_times(page, self._index.reach(now))
        except CronwaveError as exc:
            self._rebase_retry_at = now + self._backoff.delay(self._rebase_attempts)
            self._rebase_attempts += 1
            log.warning(
                "%d schedules of gained shards wait to be re-based: the store did not answer (%s)",
                len(self._unbased),
                exc,
            )
            return
        self._rebase_attempts, self._rebase_retry_at = 0, None
        del self._unbased[: len(page)]
        self._rebase_page_size = REBASE_PAGE
        self._index.rebase(latest, only=page)
        if not self._unbased:
            log.info("term of token %d: the gained shards' schedules are re-based", self._term)

    def _end_term(self) -> None:
        queued, buffered = self._work.clear(), self._buffers.clear()
        self._losses.clear()
        self._held = {}
        with self._inbox_lock:
            self._inbox.clear()
        if queued or buffered:
            log.warning(
                "term of token %d ended with %d queued and %d buffered fires; the next "
                "term resumes their placeholders and re-plans the due ones",
                self._term,
                len(queued),
                len(buffered),
            )

    def _resume(self, pending: Sequence[Missed], now: datetime) -> None:
        """Queue the placeholders of an earlier term again, paced per schedule."""
        turns: dict[tuple[str, bool], int] = defaultdict(int)
        for p in sorted(pending, key=lambda m: (m.schedule_id, m.fire_time)):
            if not p.placeholder:
                continue
            if p.reason == PENDING_BUFFER:
                fire = Fire(p.schedule_id, p.fire_time, p.trigger, now, _NO_DEADLINE)
                fire.placeholder = True
                self._buffers.add(fire)
                continue
            backfill = p.trigger is Trigger.BACKFILL
            gap = self._resume_backfill_gap if backfill else self._resume_spacing
            turn = turns[(p.schedule_id, backfill)]
            turns[(p.schedule_id, backfill)] = turn + 1
            act_at = now + gap * turn
            fire = Fire(p.schedule_id, p.fire_time, p.trigger, act_at, act_at + self._give_up_after)
            fire.placeholder, fire.pace = True, gap
            self._work.push(fire)
        self.stats.resumed += len(pending)

    def _take_inbox(self) -> None:
        with self._inbox_lock:
            fires, self._inbox = self._inbox, []
            pauses, self._pauses = self._pauses, []
        for fire in fires:
            self._work.push(fire)
        for schedule_id, at in pauses:
            self._cancel_ahead(schedule_id, at)

    def _cancel_ahead(self, schedule_id: str, at: datetime) -> None:
        try:
            runs = [r for r in self._ledger.in_flight(schedule_id) if r.fire_time > at]
            for run in runs:
                reason = f"paused: the schedule was paused at {iso(at)}, before this fire time"
                if self._ledger.cancel_run(run, reason):
                    self.stats.cancelled += 1
        except CronwaveError as exc:
            log.warning("runs of paused '%s' dispatched ahead not cancelled: %s", schedule_id, exc)
