"""Truth tests: a known delay injected into one hop and kind of real runs is what the
waterfall names as the source of the p99 tail, with the delay it adds.

Each test starts a suite with ``CRONWAVE_FAULT`` set, drives a few hundred runs end to
end, one at a time, stops the suite (so every span is flushed) and analyses its span
files.

The machine stalls too: a run takes ~30 ms here, and about one run in 100 to 200
stalls on the host for 30 to 90 ms (a PostgreSQL commit waiting on a shared disk, CPU
steal). Those stalls can be slower than a 50 ms delay, so the 4 slowest of 400 runs may
all be stalls; the waterfall still names the injected delay because it recurs at one
hop and kind in 3% of the runs (about 12), which moves that hop and kind's own p99,
and a stall in one run moves none (docs/architecture.md, *Reading a waterfall*). So
the suite injects ``CRONWAVE_TRUTH_DELAY_MS`` (50 ms by default); ``make bench``'s
``truth`` scenario measures how often the rule is right over many trials.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pytest

from cronwave_core.faults import LatencyFault, run_key
from cronwave_core.telemetry.vocabulary import ATTR_FAULT
from cronwave_waterfall import Run, RunFilter, TailAttribution, waterfall
from tests.tracing.support import load, runs_since, spans_of, traced_suite

pytestmark = pytest.mark.slow

RUNS = 400
FRACTION = 0.03
DELAY_MS = int(os.environ.get("CRONWAVE_TRUTH_DELAY_MS", "50"))


def _case(hop: str, kind: str, ms: int) -> object:
    fault = LatencyFault(hop, kind, timedelta(milliseconds=ms), FRACTION)
    return pytest.param(fault, id=f"{hop}-{kind}")


CASES = [
    _case("persist", "database", DELAY_MS),
    _case("pickup", "queue", DELAY_MS),
    _case("dispatch", "cache", DELAY_MS),
]


@pytest.mark.parametrize("fault", CASES)
def test_the_tail_is_blamed_on_the_injected_delay(make_suite, namespace, fault) -> None:
    delay_ms = fault.delay.total_seconds() * 1000
    # Given a suite that slows one hop and kind of 3% of runs
    spec = f"delay={fault.hop}:{fault.kind}:{delay_ms:g}ms:{fault.fraction}"
    env = {
        "CRONWAVE_FAULT": spec,
        "CRONWAVE_JOB_ISOLATION": "thread",
        # The span exporter must not put a tail of its own into the runs
        # (docs/operations/drills.md, *Tracing overhead*)
        "CRONWAVE_SWITCH_INTERVAL": "0.0005",
    }
    suite = traced_suite(make_suite, env, test_hooks=True)
    # When a few hundred runs go through it (after a warm-up)
    report = load(suite, namespace, RUNS, concurrency=1, warmup=40, timeout=timedelta(seconds=150))
    runs = runs_since(spans_of(suite), report.since)
    assert len(runs) == RUNS

    # Then the runs the hook chose are the runs whose spans say so
    assert all(r.fire_time is not None for r in runs)
    slowed = {
        r.run_id
        for r in runs
        if r.fire_time is not None and fault.selected(run_key(r.schedule_id, r.fire_time))
    }
    marked = {r.run_id for r in runs if any(s.attributes.get(ATTR_FAULT) for s in r.spans)}
    assert slowed == marked
    assert 4 <= len(slowed) <= 30  # about 12 of 400: the tail (4 runs) can be theirs
    # and the waterfall names that hop and kind as the tail's source
    tail = waterfall(runs, RunFilter(since=report.since)).tail
    why = _explain(tail, runs, slowed)
    top = tail.top
    assert top is not None, why
    assert (top.hop, top.kind) == (fault.hop, fault.kind), why
    assert tail.headline.startswith("p99 tail: "), why
    assert f"{fault.kind} in {fault.hop}" in tail.headline, why
    # with the delay it adds, within 20%
    assert top.excess_ms == pytest.approx(delay_ms, rel=0.2), why
    print(f"injected {delay_ms:g} ms into {fault.kind} in {fault.hop}; {why}")


def _explain(tail: TailAttribution, runs: list[Run], slowed: set[str]) -> str:
    """The headline, the top contributions and each tail run: what a failure shows."""
    threshold = tail.threshold_ms or 0.0
    lines = [tail.headline]
    lines += [f"  {c.kind} in {c.hop}: {c.excess_ms:+.1f} ms" for c in tail.contributions[:4]]
    for run in runs:
        e2e = (run.end_to_end_ns or 0) / 1e6
        if e2e > threshold:
            worst = max(run.kind_ns.items(), key=lambda item: item[1])
            lines.append(
                f"  tail run {run.run_id}: {e2e:.1f} ms, injected={run.run_id in slowed}, "
                f"most in {worst[0][1]} in {worst[0][0]} ({worst[1] / 1e6:.1f} ms)"
            )
    return "\n".join(lines)
