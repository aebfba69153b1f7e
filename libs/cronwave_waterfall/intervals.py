"""Half-open time intervals ``(start_ns, end_ns)``: union, difference, length.

The waterfall never adds up overlapping time twice: nested or overlapping spans
of the same hop and kind count once, as the length of their union.
"""

from __future__ import annotations

from collections.abc import Iterable

Interval = tuple[int, int]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint, non-empty intervals covering exactly the input."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def subtract(kept: list[Interval], removed: list[Interval]) -> list[Interval]:
    """``kept`` minus ``removed``; both must be ``union`` outputs."""
    if not removed:
        return kept
    out: list[Interval] = []
    j = 0
    for start, end in kept:
        while j < len(removed) and removed[j][1] <= start:
            j += 1
        k = j
        cursor = start
        while k < len(removed) and removed[k][0] < end:
            r_start, r_end = removed[k]
            if r_start > cursor:
                out.append((cursor, r_start))
            cursor = max(cursor, r_end)
            if cursor >= end:
                break
            k += 1
        if cursor < end:
            out.append((cursor, end))
    return out


def length(intervals: Iterable[Interval]) -> int:
    """Total length of disjoint intervals."""
    return sum(end - start for start, end in intervals)
