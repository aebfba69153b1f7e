"""Catch-up planning: what becomes of the slots a planner did not fire on time.

``plan_catchup`` gives every occurrence of a schedule in ``(last_handled, now]``
exactly one outcome; nothing is dropped silently:

- **due** -- ``at >= now - grace`` and no later slot has come yet: the planner
  merely woke a little late; it fires as scheduled (trigger SCHEDULED) whatever the
  catch-up policy says.
- **late** -- every other slot: older than the grace, or followed by a later slot
  that has come too (``at + jitter <= now``: a slot whose successor is due was not
  fired on time, however short the schedule's period is next to the grace). A
  planner that comes back 13 s behind a 1 s schedule therefore has one due slot and
  twelve late ones. Late slots within the grace run (CATCHUP, so a short hand-over
  loses nothing) when the overlap policy is ``allow_all``; under any other overlap
  policy they would only be skipped or cancelled for overlapping one another, so
  the catch-up policy decides them, like every slot older than the grace:
- **catch-up run** (trigger CATCHUP) -- a late slot the policy runs, or
- **missed** (recorded as MISSED) with a reason:

  ``dst_gap_skip``            the DST policy skipped the slot (see ``calendar_dst``)
  ``outside_catchup_window``  late by more than ``catchup_window`` (``at < now - window``)
  ``catchup_skip``            policy SKIP runs no late slot
  ``superseded_by_latest``    policy LATEST runs only the newest slot (the due one if
                              any, else the newest late one within the window); the
                              older ones are superseded by it
  ``catchup_cap``             policy ALL runs at most ``catchup_max_runs`` late slots:
                              the newest ones, the older ones are capped (a cap
                              of 0 runs none; the API maps its 0 to the default)

  A slot the DST policy skipped keeps ``dst_gap_skip`` wherever it falls.

A long outage of a dense schedule can leave more slots outside the window than are
worth listing: past ``limit`` of them, the rest are summarised as one ``MissedSpan``
instead of being enumerated. Slots inside the window are always listed.

Catch-up runs come with a rate hint, ``min_spacing``: start them at least that far
apart, so a long outage does not start a storm. Due runs are not paced.

Catch-up runs meet the overlap policy like any other run, and paced ones are
dispatched ahead of their start, so each finds the one before it in flight. Under
``Catchup.ALL`` only ``BUFFER_ALL`` (one after another) and ``ALLOW_ALL`` (side by
side) let every catch-up run start; ``SKIP``, ``BUFFER_ONE`` and ``CANCEL_OTHER`` would
skip or cancel all but one of them, so ``check_coherent`` refuses those combinations
when a schedule is created.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cronwave_core.domain.calendar import next_fire_time, occurrences_after
from cronwave_core.domain.spec import Catchup, Overlap, Policy, Spec
from cronwave_core.errors import InvalidArgument

OUTSIDE_CATCHUP_WINDOW = "outside_catchup_window"
CATCHUP_SKIP = "catchup_skip"
SUPERSEDED_BY_LATEST = "superseded_by_latest"
CATCHUP_CAP = "catchup_cap"

DEFAULT_GRACE = timedelta(minutes=1)
MIN_SPACING = timedelta(seconds=1)
MAX_SPACING = timedelta(minutes=1)
_US = timedelta(microseconds=1)


@dataclass(frozen=True)
class Missed:
    """A slot recorded as MISSED. ``slot`` is the local wall-clock time a cron
    expression named, when it came from one."""

    fire_time: datetime
    reason: str
    slot: datetime | None = None


@dataclass(frozen=True)
class MissedSpan:
    """Every slot with ``after < at <= through`` that was not listed one by one,
    missed for ``reason``."""

    after: datetime
    through: datetime
    reason: str


@dataclass(frozen=True)
class CatchupPlan:
    """The outcome of every slot in ``(last_handled, now]``."""

    due: tuple[datetime, ...]
    catchup: tuple[datetime, ...]
    missed: tuple[Missed, ...]
    unlisted: MissedSpan | None
    min_spacing: timedelta
    handled_through: datetime

    @property
    def to_run(self) -> tuple[datetime, ...]:
        """Due and catch-up fire times together, oldest first."""
        return tuple(sorted(self.due + self.catchup))


#: The overlap policies under which every catch-up run of ``Catchup.ALL`` starts.
CATCHUP_ALL_OVERLAPS = (Overlap.BUFFER_ALL, Overlap.ALLOW_ALL)


def check_coherent(policy: Policy, field: str = "policy") -> None:
    """Refuse a policy whose overlap rule would undo its catch-up rule: ``Catchup.ALL``
    promises every late slot in the window a run, which only ``BUFFER_ALL`` and
    ``ALLOW_ALL`` keep (see the module docstring)."""
    if policy.catchup is Catchup.ALL and policy.overlap not in CATCHUP_ALL_OVERLAPS:
        allowed = " or ".join(o.value for o in CATCHUP_ALL_OVERLAPS)
        raise InvalidArgument(
            f"{field}.overlap",
            f"catch-up 'all' runs every late slot, but overlap '{policy.overlap.value}' "
            f"would skip or cancel all but one of them; use overlap {allowed}, "
            "or catch-up 'latest'",
        )


def plan_catchup(
    spec: Spec,
    policy: Policy,
    last_handled: datetime,
    now: datetime,
    *,
    grace: timedelta = DEFAULT_GRACE,
    limit: int = 10_000,
) -> CatchupPlan:
    """Decide the slots in ``(last_handled, now]`` (see the module docstring).

    ``last_handled`` is the instant through which the planner has already handled
    the schedule; the next call should pass ``plan.handled_through``.
    """
    last = _aware(last_handled, "last_handled")
    now = _aware(now, "now")
    if now < last:
        raise InvalidArgument("now", "must not be before last_handled")
    if policy.catchup_window < timedelta(0):
        raise InvalidArgument("policy.catchup_window", "must not be negative")
    if policy.catchup_max_runs < 0:
        raise InvalidArgument("policy.catchup_max_runs", "must not be negative")
    if grace < timedelta(0):
        raise InvalidArgument("grace", "must not be negative")
    if limit < 1:
        raise InvalidArgument("limit", "must be at least 1")
    due_from = now - grace
    # The newest slot that has certainly come (its jittered instant too): every slot
    # before it is late, even within the grace.
    come_by = now - spec.jitter
    window_from = now - policy.catchup_window
    outside_before = min(due_from, window_from)

    due_slots: list[tuple[datetime, datetime | None]] = []
    side_by_side: list[tuple[datetime, datetime | None]] = []  # late, run whatever the policy
    late: list[tuple[datetime, datetime | None]] = []
    missed: list[Missed] = []
    unlisted: MissedSpan | None = None
    listed_outside = 0
    occurrences = occurrences_after(spec, last)
    occ = next(occurrences, None)
    # Outside the window: listed one by one up to `limit`, then summarised.
    while occ is not None and occ.at <= now and occ.at < outside_before:
        if listed_outside == limit:
            through = outside_before - _US
            unlisted = MissedSpan(missed[-1].fire_time, through, OUTSIDE_CATCHUP_WINDOW)
            occurrences = occurrences_after(spec, through)
            occ = next(occurrences, None)
            break
        missed.append(Missed(occ.at, occ.skipped or OUTSIDE_CATCHUP_WINDOW, occ.slot))
        listed_outside += 1
        occ = next(occurrences, None)
    # Inside the window (or due): every slot is listed; `now` bounds the walk.
    while occ is not None and occ.at <= now:
        if occ.skipped:
            missed.append(Missed(occ.at, occ.skipped, occ.slot))
        elif occ.at >= due_from:
            if occ.at <= come_by:
                # A later slot that has come makes the due ones before it late.
                (side_by_side if policy.overlap is Overlap.ALLOW_ALL else late).extend(due_slots)
                due_slots.clear()
            due_slots.append((occ.at, occ.slot))
        else:
            late.append((occ.at, occ.slot))
        occ = next(occurrences, None)
    due = [at for at, _ in due_slots]

    run, dropped = _apply_policy(policy, late, bool(due))
    run = sorted(run + [at for at, _ in side_by_side])
    missed.extend(dropped)
    missed.sort(key=lambda m: m.fire_time)
    return CatchupPlan(
        due=tuple(due),
        catchup=tuple(run),
        missed=tuple(missed),
        unlisted=unlisted,
        min_spacing=_spacing(spec, policy, now, len(run)),
        handled_through=now,
    )


def _apply_policy(
    policy: Policy, late: list[tuple[datetime, datetime | None]], any_due: bool
) -> tuple[list[datetime], list[Missed]]:
    """Split the late slots inside the window into runs and missed ones."""
    if policy.catchup == Catchup.SKIP:
        return [], [Missed(at, CATCHUP_SKIP, slot) for at, slot in late]
    if policy.catchup == Catchup.LATEST:
        if any_due or not late:
            return [], [Missed(at, SUPERSEDED_BY_LATEST, slot) for at, slot in late]
        older = [Missed(at, SUPERSEDED_BY_LATEST, slot) for at, slot in late[:-1]]
        return [late[-1][0]], older
    cap = policy.catchup_max_runs
    kept = late[max(0, len(late) - cap) :] if cap else []
    capped = late[: len(late) - len(kept)]
    return [at for at, _ in kept], [Missed(at, CATCHUP_CAP, slot) for at, slot in capped]


def _spacing(spec: Spec, policy: Policy, now: datetime, runs: int) -> timedelta:
    """Spread the catch-up runs over the time until the next regular fire, within
    ``[MIN_SPACING, MAX_SPACING]``; one run or none needs no spacing."""
    if runs <= 1:
        return timedelta(0)
    upcoming = next_fire_time(spec, now)
    headroom = (upcoming - now) if upcoming is not None else policy.catchup_window
    return min(MAX_SPACING, max(MIN_SPACING, headroom / (runs + 1)))


def _aware(value: datetime, field: str) -> datetime:
    if value.utcoffset() is None:
        raise InvalidArgument(field, "must be a timezone-aware datetime")
    return value.astimezone(UTC)
