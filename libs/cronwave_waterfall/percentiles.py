"""Exact percentiles: sort, then interpolate linearly between the closest ranks.

For sorted values ``x[0..n-1]`` the ``q``-quantile (``0 <= q <= 1``) is at rank
``h = (n - 1) * q``: ``x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)])``.
This is Hyndman & Fan's type 7, the default of numpy, R and Python's
``statistics.quantiles(method="inclusive")``. It never leaves the range of the data,
and p50 of an even count is the mean of the two middle values. No sampling, no
sketches: every figure is exact for the runs given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

QUANTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99, "p999": 0.999}


def quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q``-quantile of already sorted values (see the module docstring)."""
    if not ordered:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be within [0, 1], got {q}")
    rank = (len(ordered) - 1) * q
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (rank - low) * (ordered[high] - ordered[low])


@dataclass(frozen=True)
class Stats:
    """A distribution of durations in milliseconds over ``count`` runs."""

    count: int
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float


def summarize_ns(values_ns: Sequence[int]) -> Stats | None:
    """Stats of nanosecond durations, reported in milliseconds; ``None`` if empty."""
    if not values_ns:
        return None
    ordered = sorted(values_ns)
    scale = 1e-6
    return Stats(
        count=len(ordered),
        mean_ms=sum(ordered) / len(ordered) * scale,
        p50_ms=quantile(ordered, QUANTILES["p50"]) * scale,
        p90_ms=quantile(ordered, QUANTILES["p90"]) * scale,
        p99_ms=quantile(ordered, QUANTILES["p99"]) * scale,
        p999_ms=quantile(ordered, QUANTILES["p999"]) * scale,
        max_ms=ordered[-1] * scale,
    )


def median(values: Sequence[float]) -> float:
    """The p50 of unsorted values."""
    return quantile(sorted(values), 0.5)
