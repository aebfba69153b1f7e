"""The waterfall over many runs: percentiles checked against the raw spans, filters,
scenarios, and the time it takes."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import timedelta

import pytest

from cronwave_core.errors import InvalidArgument
from cronwave_waterfall import RunFilter, build_runs, compare_scenarios, waterfall
from cronwave_waterfall.percentiles import Stats

from .synth import BASE_FIRE, Injection, RunRecord, all_spans, make_runs

MS = 1e6


def _direct(records: list[RunRecord], measure: Callable[[RunRecord], int]) -> dict[str, float]:
    """Reference figures from the standard library, in milliseconds."""
    values = [measure(r) for r in records]
    cuts = statistics.quantiles(values, n=1000, method="inclusive")
    return {
        "count": len(values),
        "mean_ms": statistics.fmean(values) / MS,
        "p50_ms": cuts[499] / MS,
        "p90_ms": cuts[899] / MS,
        "p99_ms": cuts[989] / MS,
        "p999_ms": cuts[998] / MS,
    }


def _same(stats: Stats | None, reference: dict[str, float]) -> None:
    assert stats is not None
    for name, value in reference.items():
        assert getattr(stats, name) == pytest.approx(value, rel=1e-9, abs=1e-9), name


def _named(record: RunRecord, name: str, span_kind: str = "INTERNAL"):
    return next(s for s in record.spans if s.name == name and s.span_kind == span_kind)


def _top_level(record: RunRecord, hop: str, kind: str) -> int:
    """Sum of the durations of the spans marked with hop and kind whose parent is
    not marked the same: nested ones are inside their parent already."""
    marked = {
        s.span_id: s
        for s in record.spans
        if s.attributes.get("cronwave.hop") == hop and s.attributes.get("cronwave.kind") == kind
    }
    return sum(s.duration_ns for s in marked.values() if s.parent_span_id not in marked)


def _fire_ns(record: RunRecord) -> int:
    return int(record.fire_time.timestamp()) * 1_000_000_000


@pytest.fixture(scope="module")
def records() -> list[RunRecord]:
    return make_runs(2000, Injection("persist", "database", 40.0, share=0.03), seed=11)


def test_hop_and_kind_percentiles_match_the_raw_spans(records: list[RunRecord]):
    # Given 2,000 runs, and figures computed straight from their spans
    create = "/cronwave.v1.WorkflowStoreService/CreateRun"
    complete = "/cronwave.v1.WorkflowStoreService/CompleteRun"
    expected = {
        ("persist", "database"): _direct(records, lambda r: _top_level(r, "persist", "database")),
        ("pickup", "queue"): _direct(records, lambda r: _top_level(r, "pickup", "queue")),
        ("dispatch", "cache"): _direct(records, lambda r: _top_level(r, "dispatch", "cache")),
        ("execute", "database"): _direct(records, lambda r: _top_level(r, "execute", "database")),
        ("persist", "network"): _direct(
            records,
            lambda r: (
                _named(r, create, "CLIENT").duration_ns - _named(r, create, "SERVER").duration_ns
            ),
        ),
    }
    persist_wall = _direct(records, lambda r: _named(r, create, "CLIENT").duration_ns)
    execute_wall = _direct(records, lambda r: _named(r, "job.billing").duration_ns)
    end_to_end = _direct(records, lambda r: _named(r, complete, "CLIENT").end_ns - _fire_ns(r))
    lateness = _direct(records, lambda r: _named(r, "job.billing").start_ns - _fire_ns(r))

    # When the waterfall is computed
    result = waterfall(build_runs(all_spans(records)))

    # Then every figure agrees
    rows = {row.hop: row for row in result.hops}
    assert list(rows) == ["plan", "leader", "dispatch", "persist", "pickup", "execute", "complete"]
    for (hop, kind), reference in expected.items():
        [row] = [k for k in rows[hop].kinds if k.kind == kind]
        _same(row.stats, reference)
    _same(rows["persist"].stats, persist_wall)
    _same(rows["execute"].stats, execute_wall)
    _same(result.end_to_end, end_to_end)
    _same(result.lateness, lateness)
    assert result.runs == 2000


def test_kind_means_add_up_to_the_hop_mean(records: list[RunRecord]):
    result = waterfall(build_runs(all_spans(records)))
    for row in result.hops:
        total = sum(k.stats.mean_ms for k in row.kinds)
        assert total == pytest.approx(row.stats.mean_ms, rel=1e-9), row.hop


def test_hops_sit_on_the_time_axis_in_run_order(records: list[RunRecord]):
    result = waterfall(build_runs(all_spans(records)))
    offsets = {row.hop: row.offset_ms for row in result.hops}
    assert offsets["plan"] is not None and offsets["plan"] < 0  # the planner works ahead
    order = ["dispatch", "persist", "pickup", "execute", "complete"]
    assert [offsets[h] for h in order] == sorted(offsets[h] for h in order)  # type: ignore[type-var]


def test_filters_last_range_schedule_and_job_type():
    # Given runs of two schedules and job types, one second apart
    runs = build_runs(
        all_spans(make_runs(30, seed=1, schedule_id="a", job_type="billing"))
        + all_spans(
            make_runs(30, seed=2, schedule_id="b", job_type="report", spacing=timedelta(seconds=2))
        )
    )

    # Then each filter keeps what it says
    assert waterfall(runs).runs == 60
    assert waterfall(runs, schedule_id="a").runs == 30
    assert waterfall(runs, job_type="report").runs == 30
    assert waterfall(runs, schedule_id="b", last=5).runs == 5
    since = BASE_FIRE + timedelta(seconds=10)
    until = BASE_FIRE + timedelta(seconds=20)
    # a: seconds 10..19 (10 runs); b: 10, 12, .., 18 (5 runs)
    assert waterfall(runs, since=since, until=until).runs == 15
    assert waterfall(runs, RunFilter(since=since, schedule_id="a")).runs == 20
    assert waterfall(runs, schedule_id="nope").runs == 0


def test_bad_filters_name_the_field():
    with pytest.raises(InvalidArgument, match="last"):
        RunFilter(last=0)
    with pytest.raises(InvalidArgument, match="scenario"):
        RunFilter(scenario="disk")
    with pytest.raises(InvalidArgument, match="since"):
        RunFilter(since=BASE_FIRE.replace(tzinfo=None))


def test_scenarios_are_seen_whole_and_side_by_side():
    # Given runs whose dispatcher look-ups were answered locally, in redis, or missed
    runs = build_runs(all_spans(make_runs(600, seed=3, cache_weights=(0.5, 0.3, 0.2))))

    # When one scenario is asked for, and when they are compared
    miss = waterfall(runs, scenario="miss")
    side = compare_scenarios(runs)

    # Then a scenario holds only its runs, and compare gives each its own waterfall
    assert {r.scenario for r in runs} == {"local", "redis", "miss"}
    assert miss.runs == sum(1 for r in runs if r.scenario == "miss")
    assert [w.scenario for w in side] == ["local", "redis", "miss"]
    assert sum(w.runs for w in side) == len(runs)

    def cache_p50(w) -> float:
        [row] = [r for r in w.hops if r.hop == "dispatch"]
        return next(k.stats.p50_ms for k in row.kinds if k.kind == "cache")

    assert cache_p50(side[0]) < cache_p50(side[1]) < cache_p50(side[2])


@pytest.mark.slow
def test_ten_thousand_runs(capsys: pytest.CaptureFixture[str]):
    # Given 10,000 runs of 29 spans each
    spans = all_spans(make_runs(10_000, Injection("persist", "database", 50.0), seed=5))

    # When grouped into runs, and when the waterfall (with tail attribution) is computed
    started = time.perf_counter()
    runs = build_runs(spans)
    built = time.perf_counter()
    result = waterfall(runs)
    done = time.perf_counter()

    # Then both finish well within a few seconds, even on a busy machine
    with capsys.disabled():
        print(
            f"\n10,000 runs / {len(spans)} spans: build_runs {built - started:.2f} s, "
            f"waterfall {done - built:.2f} s"
        )
    assert result.runs == 10_000
