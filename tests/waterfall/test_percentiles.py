"""Exact percentiles: the same numbers as the standard library's inclusive method."""

from __future__ import annotations

import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronwave_waterfall import quantile
from cronwave_waterfall.percentiles import summarize_ns


@given(st.lists(st.integers(min_value=0, max_value=10**12), min_size=2, max_size=300))
def test_quantiles_agree_with_statistics_inclusive(values: list[int]):
    cuts = statistics.quantiles(values, n=1000, method="inclusive")
    ordered = sorted(values)
    for q, cut in ((0.5, cuts[499]), (0.9, cuts[899]), (0.99, cuts[989]), (0.999, cuts[998])):
        assert quantile(ordered, q) == pytest.approx(cut, rel=1e-12, abs=1e-6)


def test_edges():
    assert quantile([7], 0.99) == 7
    assert quantile([1, 3], 0.5) == 2
    assert quantile([1, 2, 3, 4], 0.0) == 1
    assert quantile([1, 2, 3, 4], 1.0) == 4
    with pytest.raises(ValueError):
        quantile([], 0.5)


def test_summary_is_in_milliseconds_and_exact():
    rng = random.Random(1)
    values = [rng.randrange(10**9) for _ in range(1001)]
    stats = summarize_ns(values)
    assert stats is not None
    assert stats.count == 1001
    assert stats.p50_ms == statistics.median(values) / 1e6
    assert stats.max_ms == max(values) / 1e6
    assert stats.mean_ms == pytest.approx(statistics.fmean(values) / 1e6, rel=1e-12)
    assert summarize_ns([]) is None
