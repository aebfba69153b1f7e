"""``cronwave_core.metrics``: label values past their cap fold into ``_other``, and
scrape-time gauges query at most once per ttl."""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily

from cronwave_core.metrics import MAX_VALUE, OTHER, BoundedLabel, CachedGauges


def test_values_past_the_cap_are_other_and_the_first_ones_keep_theirs() -> None:
    # Given a label capped at 3 values
    label = BoundedLabel(3)
    # When 5 distinct values come, then the first again
    folded = [label.fold(f"s{i}") for i in range(5)] + [label.fold("s0")]
    # Then the first 3 keep their value, the rest are _other, and a known one stays
    assert folded == ["s0", "s1", "s2", OTHER, OTHER, "s0"]


def test_a_too_long_value_is_other_and_takes_no_place() -> None:
    label = BoundedLabel(1)
    assert label.fold("x" * (MAX_VALUE + 1)) == OTHER
    assert label.fold("short") == "short"


def test_gauges_are_collected_at_most_once_per_ttl() -> None:
    # Given gauges on a fake clock, with a ttl of 5 s
    now = [0.0]
    calls: list[float] = []

    def collect() -> list[GaugeMetricFamily]:
        calls.append(now[0])
        gauge = GaugeMetricFamily("cronwave_test_depth", "test")
        gauge.add_metric([], len(calls))
        return [gauge]

    gauges = CachedGauges(collect, ttl_seconds=5, clock=lambda: now[0])
    # When it is scraped three times within the ttl, then once after it
    values = []
    for at in (0.0, 1.0, 4.9, 5.0):
        now[0] = at
        values.append([s.value for f in gauges.collect() for s in f.samples])
    # Then the query ran twice, and the scrapes in between saw the cached value
    assert calls == [0.0, 5.0]
    assert values == [[1], [1], [1], [2]]


def test_a_failing_collect_keeps_the_last_values() -> None:
    now = [0.0]
    fail = [False]

    def collect() -> list[GaugeMetricFamily]:
        if fail[0]:
            raise RuntimeError("database away")
        gauge = GaugeMetricFamily("cronwave_test_depth", "test")
        gauge.add_metric([], 7)
        return [gauge]

    gauges = CachedGauges(collect, ttl_seconds=1, clock=lambda: now[0])
    assert [s.value for f in gauges.collect() for s in f.samples] == [7]
    fail[0], now[0] = True, 2.0
    assert [s.value for f in gauges.collect() for s in f.samples] == [7]
