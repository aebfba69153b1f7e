"""Tail attribution finds a delay injected into 2% of runs, names it, and sizes it."""

from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest

from cronwave_waterfall import attribute_tail, build_runs, waterfall
from cronwave_waterfall.tail import recurring_level, stands_out

from .synth import Injection, all_spans, make_run, make_runs


@pytest.mark.parametrize(
    ("injection", "blamed", "because", "tell_tales"),
    [
        (
            Injection("persist", "database", 50.0),
            "database in persist",
            "cache miss",
            {("cronwave.cache.hit", "miss")},
        ),
        (
            Injection("pickup", "queue", 80.0),
            "queue in pickup",
            "queue=bulk",
            {("cronwave.queue", "bulk"), ("cronwave.attempt", ">1")},
        ),
        (
            Injection("dispatch", "cache", 30.0),
            "cache in dispatch",
            "cache miss",
            {("cronwave.cache.hit", "miss")},
        ),
    ],
    ids=["database-in-persist", "queue-in-pickup", "cache-miss-in-dispatch"],
)
def test_the_tail_line_names_the_injected_delay(injection, blamed, because, tell_tales):
    # Given 5,000 runs, 2% of which got extra time in one hop and kind
    records = make_runs(5000, injection, seed=23)
    injected = sum(r.injected for r in records)
    assert 60 <= injected <= 140

    # When the waterfall's tail is attributed
    result = waterfall(build_runs(all_spans(records)))
    tail = result.tail

    # Then the one-line headline comes first, naming the hop, kind and cause
    headline = tail.headline
    assert "\n" not in headline
    assert headline.startswith("p99 tail: ")
    assert f"{blamed} ({because})" in headline
    # and estimates the added delay within 20%
    top = tail.contributions[0]
    assert f"{top.kind} in {top.hop}" == blamed
    assert top.excess_ms == pytest.approx(injection.extra_ms, rel=0.2)
    said = re.search(r"\+([\d.]+) ms per tail run", headline)
    assert said is not None
    stated = float(said.group(1))
    assert stated == pytest.approx(injection.extra_ms, rel=0.2)
    assert top.share > 0.8
    # And the tail runs are the injected ones, whose tell-tale attributes stand out
    assert tail.tail_runs == 50
    skews = {(a.key, a.value): a for a in tail.attributes}
    for key in tell_tales:
        assert skews[key].tail_frequency == 1.0
        assert skews[key].rest_frequency < 0.1


def test_shares_of_positive_excess_add_up_to_one():
    runs = build_runs(all_spans(make_runs(1000, Injection("persist", "database", 20.0), seed=2)))
    tail = attribute_tail(runs)
    assert sum(c.share for c in tail.contributions) == pytest.approx(1.0)
    assert all(c.share == 0.0 for c in tail.contributions if c.excess_ms <= 0)
    assert tail.threshold_ms is not None and tail.median_end_to_end_ms is not None
    assert tail.tail_end_to_end_ms is not None and tail.tail_end_to_end_ms > tail.threshold_ms


def test_too_few_runs_say_so():
    tail = attribute_tail(build_runs(all_spans(make_runs(1, seed=3))))
    assert tail.headline == "p99 tail: not enough completed runs to compare (1)"
    assert tail.contributions == ()


def test_the_tail_lists_no_statement_text_and_no_connection_address():
    # Given runs whose slow ones also share a SQL statement's text and a connection's
    # address and port (as OpenTelemetry's SQL and gRPC spans carry them)
    records = make_runs(1000, Injection("persist", "database", 30.0), seed=5)
    noise = {
        "db.statement": "SELECT runs.run_id FROM runs WHERE runs.run_id = %(id)s",
        "db.query.text": "UPDATE runs SET state = %(state)s",
        "net.peer.port": 54021,
        "net.peer.name": "10.0.3.7",
        "server.port": 5432,
        "network.peer.address": "10.0.3.7",
        "cronwave.note": "x" * 200,
    }
    spans = [
        replace(span, attributes={**span.attributes, **noise}) if record.injected else span
        for record in records
        for span in record.spans
    ]

    # When the tail is attributed
    tail = attribute_tail(build_runs(spans))

    # Then none of those is listed, and the cause that explains the tail still is
    keys = {a.key for a in tail.attributes}
    assert not keys & set(noise), keys
    assert ("cronwave.cache.hit", "miss") in {(a.key, a.value) for a in tail.attributes}


def test_scattered_stalls_slower_than_the_cause_do_not_take_the_headline():
    # Given 400 runs: 12 carry 50 ms more database time in persist (a cause that
    # recurs), and 6 others stall for 60 to 87 ms, three in pickup's queue and three in
    # dispatch's cache (the host's own stalls: slower, so the 4 slowest runs are all
    # stalls, and no (hop, kind) has more than 3 of them)
    rng = random.Random(11)
    cause = Injection("persist", "database", 50.0, share=1.0)
    slowed = set(range(17, 400, 33))
    stalls = {
        40: Injection("pickup", "queue", 87.0, share=1.0),
        90: Injection("dispatch", "cache", 81.0, share=1.0),
        160: Injection("pickup", "queue", 72.0, share=1.0),
        230: Injection("dispatch", "cache", 66.0, share=1.0),
        300: Injection("pickup", "queue", 60.0, share=1.0),
        370: Injection("dispatch", "cache", 63.0, share=1.0),
    }
    assert len(slowed) == 12 and not slowed & set(stalls)
    records = [make_run(rng, i, cause if i in slowed else stalls.get(i)) for i in range(400)]
    runs = build_runs(all_spans(records))

    # When the tail is attributed
    tail = attribute_tail(runs)

    # Then the slowest runs are the stalls
    slowest = sorted(runs, key=lambda r: r.end_to_end_ns or 0)[-tail.tail_runs :]
    assert {r.run_id for r in slowest} <= {records[i].run_id for i in stalls}
    # but the headline names the cause that recurs, with its delay within 20%
    top = tail.top
    assert top is not None
    assert (top.hop, top.kind) == ("persist", "database"), tail.headline
    assert "database in persist" in tail.headline
    assert top.excess_ms == pytest.approx(50.0, rel=0.2)


def test_a_cause_in_fewer_runs_than_the_tail_quantile_is_not_named():
    # Given 400 runs of which 2 (half of 1%) carry 50 ms more database time in persist
    rng = random.Random(13)
    cause = Injection("persist", "database", 50.0, share=1.0)
    records = [make_run(rng, i, cause if i in (100, 300) else None) for i in range(400)]

    # When the tail is attributed
    tail = attribute_tail(build_runs(all_spans(records)))

    # Then two runs are scattered, not a p99 cause: persist's database p99 is its own
    top = tail.top
    assert top is not None
    persist = next(c for c in tail.contributions if (c.hop, c.kind) == ("persist", "database"))
    assert persist.excess_ms < 10.0


def test_a_cause_in_exactly_one_percent_of_runs_is_named():
    # Given 400 runs of which 4 (the p99's 1%) carry 50 ms more cache time in dispatch
    rng = random.Random(17)
    cause = Injection("dispatch", "cache", 50.0, share=1.0)
    records = [make_run(rng, i, cause if i in (50, 150, 250, 350) else None) for i in range(400)]

    # When the tail is attributed
    tail = attribute_tail(build_runs(all_spans(records)))

    # Then it is named, with its delay
    top = tail.top
    assert top is not None
    assert (top.hop, top.kind) == ("dispatch", "cache"), tail.headline
    assert top.excess_ms == pytest.approx(50.0, rel=0.2)


def _scattered(low_ms: float, count: int, step: float = 1.15) -> list[float]:
    """``count`` stall times from ``low_ms`` up, each ``step`` times the last: no two
    within 10% of each other, as a host's stalls fall."""
    return [low_ms * step**i for i in range(count)]


def test_stalls_at_the_causes_own_hop_slower_and_more_than_one_percent_do_not_hide_it():
    # Given 400 runs: 12 carry 50 ms more database time in persist (a cause that
    # recurs), and 8 others stall in persist's database for 58 to 154 ms each (a loaded
    # machine's commits: slower than the cause, scattered, and 2% of the runs, so the
    # plain p99 of persist's database time is a stall's)
    rng = random.Random(29)
    cause = Injection("persist", "database", 50.0, share=1.0)
    slowed = set(range(11, 400, 33))
    stalled = dict(zip(range(5, 400, 50), _scattered(58.0, 8), strict=True))  # 5, 55, ..., 355
    assert len(slowed) == 12 and not slowed & set(stalled)
    records = [
        make_run(
            rng,
            i,
            cause
            if i in slowed
            else Injection("persist", "database", stalled[i], share=1.0)
            if i in stalled
            else None,
        )
        for i in range(400)
    ]
    runs = build_runs(all_spans(records))
    values = sorted(r.kind_ns.get(("persist", "database"), 0) for r in runs)
    plain_p99_ms = (values[-4] - values[len(values) // 2]) / 1e6
    assert plain_p99_ms > 60.0  # the 4 slowest are stalls

    # When the tail is attributed
    tail = attribute_tail(runs)

    # Then the headline names the cause with its delay, not the stalls' level
    top = tail.top
    assert top is not None
    assert (top.hop, top.kind) == ("persist", "database"), tail.headline
    assert top.excess_ms == pytest.approx(50.0, rel=0.2), tail.headline
    assert "+5" in tail.headline and "database in persist" in tail.headline


@pytest.mark.parametrize(
    "point",
    [("persist", "database"), ("pickup", "queue"), ("dispatch", "cache")],
    ids=lambda p: f"{p[0]}-{p[1]}",
)
@pytest.mark.parametrize("seed", range(8))
def test_stalls_scattered_across_hops_do_not_displace_a_consistent_cause(point, seed):
    # Given 400 runs: 3% carry 50 ms more time at one hop and kind, and 2% others stall
    # at a hop and kind drawn at random (of the three), for 30 to 150 ms drawn at random
    rng = random.Random(1000 + seed)
    hop, kind = point
    points = [("persist", "database"), ("pickup", "queue"), ("dispatch", "cache")]
    order = list(range(400))
    rng.shuffle(order)
    slowed, stalled = set(order[:12]), set(order[12:20])
    records = []
    for i in range(400):
        injection = None
        if i in slowed:
            injection = Injection(hop, kind, 50.0, share=1.0)
        elif i in stalled:
            where = rng.choice(points)
            injection = Injection(*where, 30.0 * 5 ** rng.random(), share=1.0)
        records.append(make_run(rng, i, injection))

    # When the tail is attributed
    tail = attribute_tail(build_runs(all_spans(records)))

    # Then the cause is named, with its delay within 20%
    top = tail.top
    assert top is not None
    assert (top.hop, top.kind) == point, tail.headline
    assert top.excess_ms == pytest.approx(50.0, rel=0.2), tail.headline


def test_scattered_stalls_alone_give_their_hop_no_excess():
    # Given 400 runs of which 8 stall in persist's database for 58 to 154 ms, scattered
    rng = random.Random(31)
    stalled = dict(zip(range(5, 400, 50), _scattered(58.0, 8), strict=True))
    records = [
        make_run(rng, i, Injection("persist", "database", stalled[i], share=1.0))
        if i in stalled
        else make_run(rng, i)
        for i in range(400)
    ]

    # When the tail is attributed
    tail = attribute_tail(build_runs(all_spans(records)))

    # Then persist's database time is read at its own spread, as without the stalls
    persist = next(c for c in tail.contributions if (c.hop, c.kind) == ("persist", "database"))
    assert persist.excess_ms < 5.0, tail.headline


def test_stalls_that_recur_at_one_value_are_a_cause():
    # Given 400 runs of which 6 wait 70 ms more in pickup's queue, give or take 1 ms
    rng = random.Random(37)
    records = [
        make_run(rng, i, Injection("pickup", "queue", 69.0 + i % 3, share=1.0))
        if i in range(30, 400, 65)
        else make_run(rng, i)
        for i in range(400)
    ]

    # When the tail is attributed
    tail = attribute_tail(build_runs(all_spans(records)))

    # Then they are named: a delay that recurs is what the rule looks for
    top = tail.top
    assert top is not None
    assert (top.hop, top.kind) == ("pickup", "queue"), tail.headline
    assert top.excess_ms == pytest.approx(70.0, rel=0.1)


def test_a_dense_tail_is_read_at_its_own_slowest_one_percent():
    # Given a time spread evenly from 0 to 99 ms over 400 runs (a job's own work)
    values = sorted(float(i % 100) for i in range(400))

    # When its recurring level is read over its slowest 4
    level = recurring_level(values, 4)

    # Then every value recurs, and the level is the 4th slowest's over the median
    assert level == values[-4] - 49.5


def test_a_cause_standing_out_is_named_before_a_hops_own_continuum_as_slow():
    # Given 400 runs: 12 wait 50 ms more in pickup's queue (a cause), and 40 others
    # spend 20 to 56 ms more in persist's database, spread evenly (a loaded database's
    # own slow commits: a continuum whose slowest 1% recur and reach past the cause)
    rng = random.Random(41)
    order = list(range(400))
    rng.shuffle(order)
    slowed, slow_commits = set(order[:12]), order[12:52]
    commit_ms = {i: 20.0 + 36.0 * n / 39 for n, i in enumerate(slow_commits)}
    records = [
        make_run(rng, i, Injection("pickup", "queue", 50.0, share=1.0))
        if i in slowed
        else make_run(rng, i, Injection("persist", "database", commit_ms[i], share=1.0))
        if i in commit_ms
        else make_run(rng, i)
        for i in range(400)
    ]

    # When the tail is attributed
    tail = attribute_tail(build_runs(all_spans(records)))

    # Then persist's database reads slower than the cause
    excess = {(c.hop, c.kind): c.excess_ms for c in tail.contributions}
    assert excess[("persist", "database")] > excess[("pickup", "queue")], tail.headline
    # but the cause is named first, with its delay: its runs stand above their hop's
    # own time, while persist's slowest stand on a slope of slow commits
    top = tail.top
    assert top is not None
    assert (top.hop, top.kind) == ("pickup", "queue"), tail.headline
    assert top.excess_ms == pytest.approx(50.0, rel=0.2)


def test_what_stands_out_is_a_cluster_above_a_gap():
    # Given the same excess of 50 over a median of 0, once as 12 runs at 49 to 51 above
    # a gap, once as the top of a slope from 20 to 55
    cluster = sorted([0.0] * 388 + [49.0 + i / 6 for i in range(12)])
    slope = sorted([0.0] * 360 + [20.0 + 35.0 * i / 39 for i in range(40)])

    # Then only the cluster stands out
    assert stands_out(cluster, 50.0)
    assert not stands_out(slope, 50.0)
    assert not stands_out(cluster, 0.0)


def test_a_cause_is_named_before_fewer_stalls_bunched_above_it():
    # Given 400 runs: 12 carry 50 ms more database time in persist, and 5 others stall
    # in pickup's queue for 76 to 90 ms (a few stalls that happen to bunch up within
    # 10% of each other, above a gap: they recur and stand out too, and are slower)
    rng = random.Random(43)
    order = list(range(400))
    rng.shuffle(order)
    slowed = set(order[:12])
    bunched = dict(zip(order[12:17], (76.0, 80.0, 82.0, 84.0, 90.0), strict=True))
    records = [
        make_run(rng, i, Injection("persist", "database", 50.0, share=1.0))
        if i in slowed
        else make_run(rng, i, Injection("pickup", "queue", bunched[i], share=1.0))
        if i in bunched
        else make_run(rng, i)
        for i in range(400)
    ]

    # When the tail is attributed
    tail = attribute_tail(build_runs(all_spans(records)))

    # Then both stand out, the stalls further
    excess = {(c.hop, c.kind): c.excess_ms for c in tail.contributions}
    assert excess[("pickup", "queue")] > 70.0
    # but the cause more runs share is named, with its delay
    top = tail.top
    assert top is not None
    assert (top.hop, top.kind) == ("persist", "database"), tail.headline
    assert top.excess_ms == pytest.approx(50.0, rel=0.2)
