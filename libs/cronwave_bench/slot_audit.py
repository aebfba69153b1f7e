"""Every slot of one fault's window accounted for, and when firing was on time again.

The fault matrix (``cronwave_bench.fault_matrix``) cuts its time into windows, one per
fault, each from just before the fault to the end of the quiet period after it.
``audit_window`` judges the window's slots -- (schedule, nominal fire time) pairs
whose fire time falls in it -- from the store's runs and, where needed, their
histories. The instants compared are the store's stamps (``created_at``,
``claimed_at``, ``finished_at``), the worker's (``body_started_at``) and the drill's,
all on one host's clock.

- **missing**: a slot with neither a run nor a MISSED record (``audit.audit``), or
  with a MISSED record whose reason its own facts contradict (``contradicted``).
- **duplicate**: a run beyond the first of a slot (``audit.audit``), a run whose
  history records its job body starting more than once, or a confirmed **re-run**.
  A re-run is a run given a new attempt while the worker of its previous attempt
  lived on: that worker began the attempt and ran the body, but its completion never
  reached the store (a body's start is recorded with its completion), so the run
  stayed held (WAITING or RUNNING) until its heartbeat lapsed and then ran again.
  The store cannot tell it from an attempt the worker never began (its claim's reply
  lost): only the worker's own count can (``Tally``: how many of a worker's re-runs, in all windows,
  were bodies). A window's re-runs are duplicates as far as that count proves them
  (the count less the worker's re-runs in other windows); the rest are reported as
  possible (the count allows them) or not begun (the count rules them out). A
  killed worker's count is gone: its re-runs are possible.
- **stuck**: a run of the window still in flight (PENDING, WAITING, RUNNING) -- or a
  placeholder still pending -- ``stuck_after`` after the window ended, whether it
  finished later (its ``finished_at``) or not at all. The job is a noop, done in
  milliseconds once its body starts, and a window ends only after a quiet period of
  firing on time: a run unfinished that long after is lost in the machinery, not busy.
- **on time**: the slot's run's job body started at most ``tolerance`` after the
  fire time. The run bounds its body start -- not before ``max(claim, fire time)``
  (a worker holds a body until its fire time), not after ``finished_at`` -- so the
  history's ``started`` event is read only where those bounds leave it open, and for
  every run with more than one attempt (``needs_history``).
- **recovery**: the first slot at or after a reference instant (the fault's
  injection, or its end) from which every later slot of the window is on time;
  recovery time is that slot's fire time minus the reference. None when the window's
  last slot is not on time: firing had not recovered when the window closed.

MISSED reasons the record itself can contradict (``contradicted``):

- ``overlap_skip``, ``overlap_buffer_full``: the planner skips a fire when another
  run of the schedule is in flight (PENDING, WAITING, RUNNING) as it decides, which is
  at or after the fire time (a fire acted on ahead of it is deferred to its instant,
  not skipped) and before the MISSED row is recorded. Contradicted when no other run of the schedule
  was recorded before the MISSED row and still unfinished at the fire time (less
  ``LOOKUP_SLACK``: the in-flight look-up of a batch can precede its decisions).
- ``superseded_by_latest``, ``catchup_skip``, ``catchup_cap``,
  ``outside_catchup_window``: reasons of a late slot: planned later than the catch-up
  grace after its fire time, or once the schedule's next slot had come too
  (``cronwave_core.domain.catchup``); contradicted when recorded within the grace and
  before its successor's fire time. A window's last slot takes its successor to be
  as far after it as it is after the slot before it (the schedules audited are
  periodic).

Other reasons (a start given up after its retries, a start the dispatcher refused)
are the planner's own account of what it tried: reported by reason, not checked.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cronwave_proto.v1 import common_pb2

from cronwave import RunEvent
from cronwave_bench.audit import PLANNED, TERMINAL, audit, is_placeholder
from cronwave_bench.measure import body_starts
from cronwave_core.convert import ts_to_dt
from cronwave_core.domain.catchup import (
    CATCHUP_CAP,
    CATCHUP_SKIP,
    DEFAULT_GRACE,
    OUTSIDE_CATCHUP_WINDOW,
    SUPERSEDED_BY_LATEST,
)
from cronwave_core.domain.overlap import OVERLAP_BUFFER_FULL, OVERLAP_SKIP

#: A slot is on time when its job body started at most this long after its fire time.
TOLERANCE = timedelta(seconds=1)
#: A run of a window not finished this long after the window ended is stuck.
STUCK_AFTER = timedelta(seconds=10)
#: How far before a fire time a planner's look-up of the runs in flight may be: a fire
#: collected for a batch just before its instant (the batch is collected for up to
#: 100 ms) is decided just after it, on the batch's one look-up; the rest is the
#: look-up's own time on a busy machine.
LOOKUP_SLACK = timedelta(seconds=0.5)
_OVERLAP_REASONS = frozenset({OVERLAP_SKIP, OVERLAP_BUFFER_FULL})
_LATE_REASONS = frozenset({SUPERSEDED_BY_LATEST, CATCHUP_SKIP, CATCHUP_CAP, OUTSIDE_CATCHUP_WINDOW})
#: The run event of a claim; its detail is the claiming worker's id.
CLAIMED = "claimed"
#: The run event of a MISSED reason recorded (a new row's, or a placeholder's final one).
MISSED_EVENT = "missed"
_WORD = re.compile(r"[a-z][a-z0-9_]*")
#: Labels of the reasons the planner writes as sentences.
_SENTENCES = (
    ("not started within", "gave_up"),
    ("dispatcher refused the start", "refused"),
    ("overlap check failed", "overlap_check_failed"),
)


@dataclass(frozen=True)
class Window:
    """The slots with a fire time in ``(start, end]`` belong to this window.
    ``injected_at``/``ended_at``: when its fault was applied and undone (the same
    instant for a kill -9 and restart; None for the baseline, which has no fault)."""

    name: str
    start: datetime
    end: datetime
    injected_at: datetime | None = None
    ended_at: datetime | None = None

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise ValueError(f"window {self.name!r}: end must be after start")
        if self.injected_at and self.ended_at and self.ended_at < self.injected_at:
            raise ValueError(f"window {self.name!r}: its fault ends before it begins")

    def holds(self, at: datetime) -> bool:
        return self.start < at <= self.end


@dataclass(frozen=True)
class Tally:
    """A worker's own count set against the store: of its ``reruns`` (in all
    windows), ``bodies`` were attempts it began, so bodies that ran twice."""

    reruns: int
    bodies: int

    def __post_init__(self) -> None:
        if self.reruns < 0 or self.bodies < 0:
            raise ValueError("Tally counts must not be negative")

    def split(self, here: int) -> tuple[int, int, int]:
        """Of ``here`` re-runs in one window: (proven bodies, possible, not begun)."""
        bodies = min(self.bodies, self.reruns)
        proven = max(0, bodies - (self.reruns - here))
        possible = min(here, bodies) - proven
        return proven, possible, here - proven - possible


@dataclass(frozen=True)
class History:
    """What a run's history says of its attempts: the body starts recorded, and who
    claimed each attempt when (oldest first)."""

    starts: tuple[datetime, ...] = ()
    claims: tuple[tuple[str, datetime], ...] = ()
    missed_at: datetime | None = None  # when its latest MISSED reason was recorded

    @classmethod
    def of(cls, events: Iterable[RunEvent]) -> History:
        events = list(events)
        claims = tuple((e.detail, e.at) for e in events if e.kind == CLAIMED)
        missed = [e.at for e in events if e.kind == MISSED_EVENT]
        return cls(tuple(body_starts(events)), claims, missed[-1] if missed else None)

    def rerun_by(self, deaths: Mapping[str, datetime]) -> list[str]:
        """The workers whose attempt was followed by another claim while they lived
        (``deaths``: when each killed worker was killed), one entry per such attempt."""
        out = []
        for (worker, _), (_, next_at) in zip(self.claims, self.claims[1:], strict=False):
            died = deaths.get(worker)
            if died is None or died > next_at:
                out.append(worker)
        return out


def reason_label(error: str) -> str:
    """A MISSED row's reason as a short label: its leading ``snake_case`` word
    (``overlap_skip``, ``outside_catchup_window: summary of ...``), or a label for the
    planner's sentences (``gave_up`` for a start not made within its retries)."""
    for prefix, label in _SENTENCES:
        if error.startswith(prefix):
            return label
    head = error.split(":", 1)[0].strip()
    return head if _WORD.fullmatch(head) else (head[:40] or "no reason")


def contradicted(
    missed: common_pb2.Run,
    others: Sequence[common_pb2.Run],
    grace: timedelta = DEFAULT_GRACE,
    recorded_at: datetime | None = None,
    successor: datetime | None = None,
) -> bool:
    """True when ``missed``'s own facts contradict its reason (see the module
    docstring); ``others``: the schedule's other runs. ``recorded_at``: when its
    history says the reason was recorded -- a placeholder that took its final reason
    keeps the ``created_at`` of the placeholder -- else its ``created_at``.
    ``successor``: the schedule's next fire time after the slot, when known."""
    label = reason_label(missed.error)
    fire = ts_to_dt(missed.fire_time)
    recorded = recorded_at or ts_to_dt(missed.created_at)
    if label in _OVERLAP_REASONS:
        since = fire - LOOKUP_SLACK
        return not any(
            r.run_id != missed.run_id
            and ts_to_dt(r.fire_time) != fire
            and r.state != common_pb2.RUN_STATE_MISSED
            and ts_to_dt(r.created_at) <= recorded
            and (not r.HasField("finished_at") or ts_to_dt(r.finished_at) >= since)
            for r in others
        )
    if label in _LATE_REASONS:
        after_successor = successor is not None and recorded >= successor
        return recorded - fire <= grace and not after_successor
    return False


def suspects(runs: Mapping[str, Sequence[common_pb2.Run]]) -> list[common_pb2.Run]:
    """The MISSED records that their ``created_at`` alone contradicts: their histories
    say when their reason was recorded (``contradicted``'s ``recorded_at``)."""
    return [
        run
        for mine in runs.values()
        for run in mine
        if run.state == common_pb2.RUN_STATE_MISSED
        and not is_placeholder(run)
        and contradicted(run, mine)
    ]


def body_start_bounds(run: common_pb2.Run) -> tuple[datetime, datetime | None]:
    """Earliest and latest instants the run's (last) job body can have started: its
    (last) claim or its fire time, whichever is later; its completion, if it has one."""
    fire = ts_to_dt(run.fire_time)
    low = max(ts_to_dt(run.claimed_at), fire) if run.HasField("claimed_at") else fire
    high = ts_to_dt(run.finished_at) if run.HasField("finished_at") else None
    return low, high


def needs_history(run: common_pb2.Run, tolerance: timedelta = TOLERANCE) -> bool:
    """Whether ``audit_window`` needs the run's recorded body starts: a run with more
    than one attempt (did its body start twice?), or one whose bounds leave open
    whether its body started on time."""
    if run.trigger not in PLANNED or run.state == common_pb2.RUN_STATE_MISSED:
        return False
    if run.attempt > 1:
        return True
    fire = ts_to_dt(run.fire_time)
    low, high = body_start_bounds(run)
    return low - fire <= tolerance and (high is None or high - fire > tolerance)


def body_started(
    run: common_pb2.Run,
    histories: Mapping[str, History],
    tolerance: timedelta = TOLERANCE,
) -> bool:
    """Whether the run's job body started on time: read from its history when given
    (``histories``, by run id), else from its bounds; a run that is neither known on
    time nor known late counts as late."""
    if run.state == common_pb2.RUN_STATE_MISSED:
        return False
    fire = ts_to_dt(run.fire_time)
    history = histories.get(run.run_id)
    if history is not None and history.starts:
        return history.starts[0] - fire <= tolerance
    low, high = body_start_bounds(run)
    return high is not None and high - fire <= tolerance and low - fire <= tolerance


@dataclass(frozen=True)
class WindowAudit:
    """One window's slots, accounted for (see the module docstring for each term)."""

    name: str
    slots: int
    fired: int  # slots with a started run
    missing: int  # no run and no MISSED record, or a MISSED record contradicted
    contradicted: int  # of ``missing``: MISSED records whose facts contradict the reason
    duplicate: int  # runs beyond the first of a slot, bodies started twice, re-runs
    body_started_twice: int  # of ``duplicate``: runs with more than one body start
    reruns: int  # of ``duplicate``: re-runs a worker's own count proves were bodies
    reruns_possible: int  # re-runs the count allows but does not prove (or no count)
    reruns_not_begun: int  # re-runs the count rules out: attempts never begun
    stuck: int
    unsettled: int  # runs not finished yet, audited before they could count as stuck
    late: int  # slots from the injection on (all, without one) not on time, MISSED included
    resumed: int  # runs with more than one attempt (a crash's resume, or a retry)
    tokens_in_order: bool
    missed_by_reason: dict[str, int] = field(default_factory=dict)
    contradicted_records: tuple[str, ...] = ()  # "<schedule>@<fire time>: <reason>"
    recovery_from_injection_s: float | None = None
    recovery_from_end_s: float | None = None

    @property
    def clean(self) -> bool:
        return not (self.missing or self.duplicate or self.stuck)


def audit_window(
    window: Window,
    slots: Mapping[str, Sequence[datetime]],
    runs: Mapping[str, Sequence[common_pb2.Run]],
    histories: Mapping[str, History],
    audited_at: datetime,
    *,
    deaths: Mapping[str, datetime] | None = None,
    tallies: Mapping[str, Tally] | None = None,
    tolerance: timedelta = TOLERANCE,
    stuck_after: timedelta = STUCK_AFTER,
    grace: timedelta = DEFAULT_GRACE,
) -> WindowAudit:
    """Account for the window's slots. ``slots``: each schedule's nominal fire times
    in the window; ``runs``: each schedule's runs (all of them: an overlap is judged
    against runs of earlier windows too); ``histories``: those read
    (``needs_history``), by run id; ``audited_at``: when ``runs`` were read;
    ``deaths``: when each killed worker was killed; ``tallies``: the workers whose
    own count is known, set against the store."""
    deaths = deaths or {}
    tallies = tallies or {}
    here: Counter[str] = Counter()
    evidence: list[str] = []
    slot_count = fired = missing = false = duplicate = twice = 0
    stuck = unsettled = resumed = 0
    in_order = True
    reasons: Counter[str] = Counter()
    judged: list[tuple[datetime, bool]] = []
    settle_by = window.end + stuck_after
    for schedule_id, times in slots.items():
        mine = list(runs.get(schedule_id, ()))
        accounts = audit(mine, times)
        slot_count += accounts.slots
        fired += accounts.fired
        missing += accounts.missed
        duplicate += accounts.duplicate_runs
        in_order = in_order and accounts.tokens_in_order
        wanted = set(times)
        by_slot: dict[datetime, list[common_pb2.Run]] = {}
        for run in mine:
            if run.trigger in PLANNED and ts_to_dt(run.fire_time) in wanted:
                by_slot.setdefault(ts_to_dt(run.fire_time), []).append(run)
        ordered = sorted(times)
        successors = dict(itertools.pairwise(ordered))
        if len(ordered) > 1:  # the last one's: one period on (periodic schedules)
            successors[ordered[-1]] = ordered[-1] + (ordered[-1] - ordered[-2])
        for at in times:
            found = by_slot.get(at, [])
            first = found[0] if found else None
            missed = first is not None and first.state == common_pb2.RUN_STATE_MISSED
            if first is not None and missed and not is_placeholder(first):
                reasons[reason_label(first.error)] += 1
                known = histories.get(first.run_id)
                recorded_at = known.missed_at if known else None
                if contradicted(first, mine, grace, recorded_at, successors.get(at)):
                    false += 1
                    evidence.append(f"{schedule_id}@{at.isoformat()}: {first.error}")
            for run in found:
                resumed += run.attempt > 1
                history = histories.get(run.run_id, History())
                if len(history.starts) > 1:
                    twice += 1
                else:
                    here.update(history.rerun_by(deaths))
                open_ = run.state not in TERMINAL or is_placeholder(run)
                if open_:
                    if audited_at >= settle_by:
                        stuck += 1
                    else:
                        unsettled += 1
                elif run.HasField("finished_at") and run.state != common_pb2.RUN_STATE_MISSED:
                    stuck += ts_to_dt(run.finished_at) > settle_by
            judged.append((at, first is not None and body_started(first, histories, tolerance)))
    judged.sort()
    reruns = possible = not_begun = 0
    for worker, count in here.items():
        tally = tallies.get(worker)
        if tally is None:
            possible += count
            continue
        proven, maybe, never = tally.split(count)
        reruns, possible, not_begun = reruns + proven, possible + maybe, not_begun + never
    since = window.injected_at or window.start
    late = sum(1 for at, ok in judged if not ok and at >= since)
    recovered = _recovery(judged, window.injected_at)
    return WindowAudit(
        name=window.name,
        slots=slot_count,
        fired=fired,
        missing=missing + false,
        contradicted=false,
        duplicate=duplicate + twice + reruns,
        body_started_twice=twice,
        reruns=reruns,
        reruns_possible=possible,
        reruns_not_begun=not_begun,
        stuck=stuck,
        unsettled=unsettled,
        late=late,
        resumed=resumed,
        tokens_in_order=in_order,
        missed_by_reason=dict(sorted(reasons.items())),
        contradicted_records=tuple(evidence),
        recovery_from_injection_s=_seconds(recovered, window.injected_at),
        recovery_from_end_s=_seconds(recovered, window.ended_at),
    )


def _recovery(judged: Sequence[tuple[datetime, bool]], since: datetime | None) -> datetime | None:
    """The fire time of the first slot at or after ``since`` from which every later
    slot is on time; None when the last one is not (or there is none)."""
    if since is None:
        return None
    after = [(at, ok) for at, ok in judged if at >= since]
    if not after or not after[-1][1]:
        return None
    first = len(after)
    while first > 0 and after[first - 1][1]:
        first -= 1
    return after[first][0]


def _seconds(at: datetime | None, since: datetime | None) -> float | None:
    if at is None or since is None:
        return None
    return round((at - since).total_seconds(), 3)
