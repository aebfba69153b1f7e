"""Wall-clock slots to instants, by a schedule's DST policy.

A cron slot names a local wall-clock time. Most wall-clock times stand for exactly
one instant; around a transition some stand for none or for two:

- In a spring-forward gap the time does not exist. ``DstGap.SHIFT`` fires at the
  first instant after the gap, so every slot inside one gap collapses into that one
  fire (and into a slot that names the first time after the gap, if there is one).
  ``DstGap.SKIP`` fires nothing and reports the slot as skipped (``dst_gap_skip``)
  at its *nominal* instant plus one microsecond. The nominal instant is the
  wall-clock time read with the offset in force before the gap (what
  ``datetime(..., tzinfo=zone)`` gives): 02:30 in New York's gap reads as
  07:30Z, which is also 03:30 EDT, the fire time of a slot one hour later. Cron
  fire times are whole seconds, so the microsecond keeps a MISSED record of the
  skipped slot apart from every cron fire time of the schedule.
- In a fall-back overlap the time occurs twice. ``DstRepeat.ONCE`` fires at the
  first occurrence, ``LAST`` at the second, ``TWICE`` at both.

Only cron slots go through here: intervals and one-off times are absolute instants
and the DST policy does not apply to them.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import NamedTuple
from zoneinfo import ZoneInfo

from cronwave_core.domain.spec import DstGap, DstRepeat

DST_GAP_SKIP = "dst_gap_skip"

# Longer than any gap or overlap in the tz database (Pacific/Apia skipped 24 hours
# on 2011-12-30; Kwajalein did the same in 1993).
_WIDEST_SHIFT = timedelta(hours=26)
_ZERO = timedelta(0)
_SECOND = timedelta(seconds=1)
_US = timedelta(microseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Occurrence(NamedTuple):
    """One slot of a schedule at one instant.

    ``at`` is an aware UTC instant: the fire time, or for a slot the policy
    skipped its nominal instant plus one microsecond. ``slot`` is the naive local
    wall-clock time a cron expression named (``None`` for intervals and one-off
    times). ``skipped`` is the reason a slot does not fire, or ``""`` when it
    fires.
    """

    at: datetime
    slot: datetime | None
    skipped: str = ""


class Resolution(NamedTuple):
    """What one wall-clock slot stands for under a policy.

    ``fires`` are increasing instants (empty when skipped). ``floor`` is the earliest
    instant whose wall-clock reading is at or after the slot, so no later slot can
    fire before it. ``skipped_at`` is the instant a slot the gap policy skipped is
    reported at (nominal + 1 µs), else ``None``.
    """

    fires: tuple[datetime, ...]
    floor: datetime
    skipped_at: datetime | None


class Resolver:
    """Resolves the wall-clock slots of one zone under one DST policy.

    Holds a one-entry memo of the last gap it measured (slots in one gap share its
    end), so it is cheap to share; a race on the memo only costs a recomputation.
    """

    __slots__ = ("_gap_memo", "gap", "repeat", "tz")

    def __init__(self, tz: ZoneInfo, gap: DstGap, repeat: DstRepeat) -> None:
        self.tz = tz
        self.gap = gap
        self.repeat = repeat
        self._gap_memo: tuple[timedelta, timedelta, datetime] | None = None

    def resolve(self, local: datetime) -> Resolution:
        """The instants the naive wall-clock ``local`` stands for."""
        before = local.replace(tzinfo=self.tz).utcoffset()
        after = local.replace(tzinfo=self.tz, fold=1).utcoffset()
        assert before is not None and after is not None
        first = (local - before).replace(tzinfo=UTC)
        if before == after:
            return Resolution((first,), first, None)
        if before > after:  # fall back: the time occurs twice
            second = (local - after).replace(tzinfo=UTC)
            if self.repeat == DstRepeat.LAST:
                return Resolution((second,), first, None)
            if self.repeat == DstRepeat.TWICE:
                return Resolution((first, second), first, None)
            return Resolution((first,), first, None)
        # Spring forward: the time does not exist; ``first`` (read with the offset
        # before the gap) lies after the transition.
        end = self._gap_end(local, before, after)
        if self.gap == DstGap.SKIP:
            return Resolution((), end, first + _US)
        return Resolution((end,), end, None)

    def _gap_end(self, local: datetime, before: timedelta, after: timedelta) -> datetime:
        """The transition instant of the gap ``local`` falls in: it lies in
        ``(local - after, local - before]``, and has whole seconds."""
        memo = self._gap_memo
        lo = (local - after).replace(tzinfo=UTC)
        hi = (local - before).replace(tzinfo=UTC)
        if memo is not None and memo[0] == before and memo[1] == after and lo < memo[2] <= hi:
            return memo[2]
        # Whole seconds since the epoch: tz transitions fall on whole seconds.
        lo_s = (lo - _EPOCH) // _SECOND
        hi_s = -((_EPOCH - hi) // _SECOND)
        for _ in range(64):  # bisection over at most 26 hours of seconds: ~17 steps
            if hi_s - lo_s <= 1:
                break
            mid = (lo_s + hi_s) // 2
            if (_EPOCH + timedelta(seconds=mid)).astimezone(self.tz).utcoffset() == after:
                hi_s = mid
            else:
                lo_s = mid
        hi = _EPOCH + timedelta(seconds=hi_s)
        self._gap_memo = (before, after, hi)
        return hi

    def search_start(self, after: datetime) -> datetime:
        """The naive wall-clock time from which to walk slots (exclusive) so that no
        slot with an occurrence strictly after ``after`` is passed over.

        Usually the wall-clock reading of ``after``, and always so under the default
        SHIFT/ONCE policy. Earlier only when ``after`` is the first pass through an
        overlap under LAST or TWICE (second occurrences of the slots just before it
        are still to come), or lies shortly after a gap under SKIP (slots in the gap
        are reported at nominal instants after it); then by the width of the shift.
        """
        here = after.astimezone(self.tz)
        local = here.replace(tzinfo=None)
        offset = here.utcoffset()
        assert offset is not None
        back = _ZERO
        if self.repeat != DstRepeat.ONCE and not here.fold:
            second = local.replace(tzinfo=self.tz, fold=1).utcoffset()
            assert second is not None
            if second < offset:
                back = offset - second
        if self.gap == DstGap.SKIP:
            earlier = (after - _WIDEST_SHIFT).astimezone(self.tz).utcoffset()
            assert earlier is not None
            if earlier < offset:
                back = max(back, offset - earlier)
        # Walking back, include the slot at the boundary: a slot skipped by a gap is
        # reported a microsecond after its nominal instant, which may be `after`.
        return local - back - _US if back else local


def occurrences(
    slots: Iterable[datetime], resolver: Resolver, after: datetime
) -> Iterator[Occurrence]:
    """The occurrences strictly after ``after`` of increasing wall-clock ``slots``,
    in non-decreasing instant order. Equal instants (slots collapsed by a gap) are
    left for the caller to merge.

    Slots map to instants in order except inside an overlap (under ``TWICE`` the
    second occurrence of 01:00 comes after the first of 01:45), so occurrences wait
    in a heap until the floor of the latest slot passes them.
    """
    # Entries sort by instant, then fires before skipped slots, then arrival. A
    # skipped slot leaves only once the floor is past it: a later slot may still
    # fire at that very instant, and then covers it.
    heap: list[tuple[datetime, bool, int, Occurrence]] = []
    seq = 0
    for slot in slots:
        fires, floor, skipped_at = resolver.resolve(slot)
        if not heap and skipped_at is None and len(fires) == 1 and fires[0] == floor:
            if floor > after:  # the common case: one instant, nothing pending
                yield Occurrence(floor, slot)
            continue
        for at in fires:
            if at > after:
                seq += 1
                heapq.heappush(heap, (at, False, seq, Occurrence(at, slot)))
        if skipped_at is not None and skipped_at > after:
            seq += 1
            heapq.heappush(
                heap, (skipped_at, True, seq, Occurrence(skipped_at, slot, DST_GAP_SKIP))
            )
        while heap and (heap[0][0] < floor or (heap[0][0] == floor and not heap[0][1])):
            yield heapq.heappop(heap)[3]
    while heap:
        yield heapq.heappop(heap)[3]
